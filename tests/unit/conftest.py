"""Helpers shared by the unit tests: catalogs written as YAML, instants in named zones, and a
process standing for a server."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gpuspawner.policy import Catalog, load_catalog

ZURICH = ZoneInfo("Europe/Zurich")
NEW_YORK = ZoneInfo("America/New_York")
UTC = ZoneInfo("UTC")

WriteYAML = Callable[..., Path]


def at(text: str, zone: ZoneInfo = ZURICH) -> datetime:
    """``at("2024-03-18 10:00")``: a wall-clock instant in ``zone``, as an aware datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=zone)


def dedent(text: str) -> str:
    """The YAML as written in a test, so its line 1 is the line after the opening quotes."""
    return textwrap.dedent(text).removeprefix("\n")


@pytest.fixture
def write_yaml(tmp_path: Path) -> WriteYAML:
    """``write_yaml(text, name="catalog.yaml", folder=None)``: a catalog file in ``tmp_path``."""

    def write(text: str, name: str = "catalog.yaml", folder: str | None = None) -> Path:
        directory = tmp_path / folder if folder else tmp_path
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.write_text(dedent(text), encoding="utf-8")
        return path

    return write


@pytest.fixture
def catalog_from(write_yaml: WriteYAML) -> Callable[[str], Catalog]:
    """``catalog_from(text)``: load a catalog written as YAML in the test."""

    def load(text: str) -> Catalog:
        return load_catalog(write_yaml(text))

    return load


@pytest.fixture
def server_process() -> Iterator[subprocess.Popen[bytes]]:
    """A long-running process standing for a single-user server or a job's runner."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()
