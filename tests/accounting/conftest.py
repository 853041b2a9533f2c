"""Fixtures for the GPU-hour accounting tests: the usage record on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuspawner.accounting.store import UsageStore, close_shared_usage_store

from ..support.postgres import postgres_url_fixture

postgres_url = postgres_url_fixture()


@pytest.fixture(params=["sqlite", "postgresql"])
def usage_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty usage record's URL: a SQLite file, then a real PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'gpu-usage.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_url")
    empty = UsageStore(url)
    empty.drop_tables()
    empty.close()
    yield url
    close_shared_usage_store(url)
    leftover = UsageStore(url)
    leftover.drop_tables()
    leftover.close()
