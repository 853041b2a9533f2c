"""Fixtures of the sessions tests: the catalog of scenario.py, loaded from a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuspawner.policy import Catalog, load_catalog

from .scenario import CATALOG_YAML


@pytest.fixture
def catalog_path(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(CATALOG_YAML)
    return path


@pytest.fixture
def catalog(catalog_path: Path) -> Catalog:
    return load_catalog(catalog_path)
