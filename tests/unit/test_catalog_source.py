"""Scenarios: the hub asks for the catalog while an instructor edits it.

On the event loop a changed catalog is read in a worker thread; the hub waits briefly for
it and otherwise serves the last good catalog. Without an event loop it is read in place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path

import pytest

import gpuspawner.core.catalog_source as catalog_source
from gpuspawner.core.catalog_source import CatalogSource
from gpuspawner.policy import load_catalog

CPU = """\
standing:
  - id: cpu
    title: CPU only
"""
GPU = """\
standing:
  - id: gpu
    title: A GPU share
"""
BOMB = "standing: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"k{n}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 9)}]\n" for n in range(8)
)


def save(path: Path, text: str, later_by: int) -> None:
    """Write ``text`` with an mtime ``later_by`` seconds on, as a save a moment later would."""
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + later_by * 1_000_000_000))


def ids(catalog) -> list[str]:
    return [p.id for p in catalog.standing]


@pytest.fixture
def catalog_file(tmp_path) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(CPU)
    return path


class SlowReads:
    """Catalog reads that block until the test releases them (as a slow disk would)."""

    def __init__(self):
        self.started = threading.Event()
        self.release = threading.Event()

    def load(self, path):
        self.started.set()
        # A guard so a read on the event loop itself fails the test instead of hanging it.
        assert self.release.wait(timeout=30), "the read was never released"
        return load_catalog(path)


@pytest.fixture
def slow_reads(monkeypatch):
    slow = SlowReads()
    monkeypatch.setattr(catalog_source, "load_catalog", slow.load)
    yield slow
    slow.release.set()


class Recorder:
    """``on_load``/``on_error`` callbacks that remember what happened and in which thread."""

    def __init__(self):
        self.events: list[tuple[str, str]] = []
        self.loaded = threading.Event()

    def on_load(self, catalog, first):
        self.events.append(("load", threading.current_thread().name))
        self.loaded.set()

    def on_error(self, error, kept):
        self.events.append(("error", threading.current_thread().name))
        self.loaded.set()


def test_given_no_event_loop_then_an_edit_is_read_in_place(catalog_file):
    recorder = Recorder()
    source = CatalogSource(catalog_file, on_load=recorder.on_load, on_error=recorder.on_error)
    assert ids(source.current()) == ["cpu"]

    save(catalog_file, GPU, later_by=1)

    assert ids(source.current()) == ["gpu"]
    here = threading.current_thread().name
    assert recorder.events == [("load", here), ("load", here)]


async def test_given_an_event_loop_then_the_first_catalog_is_read_at_once(catalog_file):
    source = CatalogSource(catalog_file, reload_wait=0)

    assert ids(source.current()) == ["cpu"]


async def test_given_an_event_loop_then_a_quick_edit_is_read_in_a_worker_and_seen_at_once(
    catalog_file,
):
    recorder = Recorder()
    source = CatalogSource(catalog_file, on_load=recorder.on_load, on_error=recorder.on_error)
    source.current()

    save(catalog_file, GPU, later_by=1)

    assert ids(source.current()) == ["gpu"]
    loop_thread = threading.current_thread().name
    assert recorder.events[0] == ("load", loop_thread)
    (kind, reader), *_ = recorder.events[1:]
    assert kind == "load" and reader.startswith("catalog-reload") and reader != loop_thread


async def test_given_an_event_loop_and_a_slow_read_then_the_last_good_catalog_is_served_meanwhile(
    catalog_file, slow_reads, caplog
):
    source = CatalogSource(catalog_file, reload_wait=0.01)
    slow_reads.release.set()
    source.current()
    slow_reads.release.clear()
    save(catalog_file, GPU, later_by=1)

    with caplog.at_level(logging.WARNING, logger="gpuspawner.core.catalog_source"):
        during = source.current()
    again = source.current()

    # The read is still blocked, yet the hub got an answer: the last good catalog.
    assert slow_reads.started.is_set() and not slow_reads.release.is_set()
    assert ids(during) == ids(again) == ["cpu"]
    assert f"The course catalog {catalog_file} changed and takes more than" in caplog.text
    assert "serving the last good catalog until it is read" in caplog.text

    slow_reads.release.set()
    assert await eventually_serves(source, ["gpu"])


async def eventually_serves(source: CatalogSource, expected: list[str]) -> bool:
    """Ask as the hub does, between other work, until ``expected`` is in force (a guard
    against hanging, not a time limit)."""
    for _ in range(3000):
        if ids(source.current()) == expected:
            return True
        await asyncio.sleep(0.01)
    return False


async def test_given_an_event_loop_and_an_alias_bomb_then_the_last_good_catalog_stays_with_the_error_logged(
    catalog_file, caplog
):
    source = CatalogSource(catalog_file, logging.getLogger("test-hub"))
    source.current()

    save(catalog_file, BOMB, later_by=1)
    with caplog.at_level(logging.ERROR, logger="test-hub"):
        kept = source.current()

    assert ids(kept) == ["cpu"]
    assert "keeping the last good one" in caplog.text
    assert f"{catalog_file}:" in caplog.text and "alias bomb" in caplog.text
    assert "alias bomb" in str(source.last_error)


async def test_given_two_saves_during_a_slow_read_then_the_latest_is_read_next(
    catalog_file, slow_reads
):
    source = CatalogSource(catalog_file, reload_wait=0.01)
    slow_reads.release.set()
    source.current()
    slow_reads.release.clear()
    save(catalog_file, CPU.replace("CPU only", "CPU, first edit"), later_by=1)
    source.current()
    save(catalog_file, GPU, later_by=2)
    assert ids(source.current()) == ["cpu"]  # the first read is still under way

    slow_reads.release.set()

    assert await eventually_serves(source, ["gpu"])
