"""The course catalog as a running process sees it: reloaded when its files change, never lost.

Design notes: docs/design/core.md, "gpuspawner.core.catalog_source".
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_for_future
from pathlib import Path

from ..policy import Catalog, CatalogError, load_catalog
from ..policy.course_overrides import overrides_path

Signature = tuple[tuple[str, int, int], ...]

RELOAD_WAIT = 0.5
"""Seconds a caller on the event loop waits for a changed catalog before using the last one."""


def _signature(root: Path) -> Signature:
    """Name, modification time and size of the catalog file, or of each file in the folder."""
    try:
        files = (
            sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml"))
            if root.is_dir()
            else [root]
        )
        return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    except OSError:
        return ()


def _overrides_signature(catalog: Catalog | None) -> Signature:
    """The instructors' overrides file of ``catalog`` (written by the course-sessions
    service): a change to it reloads the catalog too."""
    path = overrides_path(catalog) if catalog is not None else None
    if path is None:
        return ()
    try:
        stat = path.stat()
    except OSError:
        return ((str(path), 0, -1),)
    return ((str(path), stat.st_mtime_ns, stat.st_size),)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class CatalogSource:
    """A catalog file or folder, read again only when one of its files changes.

    ``on_load(catalog, first)`` and ``on_error(error, kept)`` report what happened; by
    default both go to ``log``. They run in the thread that read the catalog. ``last_error``
    holds the error of the latest failed read. ``reload_wait`` is how long a caller on a
    running event loop waits for a changed catalog before going on with the last good one.
    """

    def __init__(
        self,
        path: str | Path,
        log: logging.Logger | None = None,
        *,
        on_load: Callable[[Catalog, bool], None] | None = None,
        on_error: Callable[[CatalogError, bool], None] | None = None,
        reload_wait: float = RELOAD_WAIT,
    ):
        self.path = Path(path)
        self.log = log or logging.getLogger(__name__)
        self._on_load = on_load or self._log_load
        self._on_error = on_error or self._log_error
        self.reload_wait = reload_wait
        self.catalog: Catalog | None = None
        self.last_error: CatalogError | None = None
        self._seen: Signature | None = None
        self._lock = threading.Lock()
        self._reading: Future[Catalog | None] | None = None
        """The read running in a worker thread, if any."""

    def current(self) -> Catalog | None:
        """The catalog in force (None while no valid catalog was ever loaded)."""
        signature = _signature(self.path) + _overrides_signature(self.catalog)
        with self._lock:
            if self._reading is not None or signature == self._seen:
                # Unchanged, or a read is already under way: its result applies when done.
                return self.catalog
            self._seen = signature
            if self.catalog is None or not _on_event_loop():
                reading = None
            else:
                reading = self._reading = Future()
        if reading is None:
            return self._read()
        threading.Thread(
            target=self._read_in_background,
            args=(reading,),
            name=f"catalog-reload {self.path.name}",
            daemon=True,
        ).start()
        wait_for_future([reading], timeout=self.reload_wait)
        if reading.done():
            return reading.result()
        self.log.warning(
            "The course catalog %s changed and takes more than %.1f s to read; serving the "
            "last good catalog until it is read.",
            self.path,
            self.reload_wait,
        )
        return self.catalog

    def _read(self) -> Catalog | None:
        """Read the catalog here and now, and put it in force if it is valid."""
        try:
            catalog = load_catalog(self.path)
        except CatalogError as error:
            self.last_error = error
            self._on_error(error, self.catalog is not None)
            return self.catalog
        first = self.catalog is None
        self.catalog, self.last_error = catalog, None
        self._on_load(catalog, first)
        return catalog

    def _read_in_background(self, reading: Future[Catalog | None]) -> None:
        result = self.catalog
        try:
            result = self._read()
        except Exception:
            # A bug, not a catalog mistake: say so, and keep serving the last good catalog.
            self.log.exception(
                "Reading the course catalog %s failed unexpectedly; keeping the last good one.",
                self.path,
            )
        finally:
            with self._lock:
                self._reading = None
            reading.set_result(result)

    def _log_load(self, catalog: Catalog, first: bool) -> None:
        self.log.info(
            "%s course catalog %s: %d course(s), %d research allocation(s), %d job flavor(s)",
            "Loaded" if first else "Reloaded",
            self.path,
            len(catalog.courses),
            len(catalog.research),
            len(catalog.flavors),
        )

    def _log_error(self, error: CatalogError, kept: bool) -> None:
        state = "keeping the last good one" if kept else "no catalog loaded yet"
        self.log.error("The course catalog %s has errors (%s):\n%s", self.path, state, error)


_shared: dict[str, CatalogSource] = {}


def shared_catalog_source(path: str | Path, log: logging.Logger | None = None) -> CatalogSource:
    """The one :class:`CatalogSource` of ``path`` in this process (created on first use).

    The hub's spawners, its authenticator and a Kubernetes executor each ask for the catalog
    often; sharing one source reads and validates each change once.
    """
    key = str(path)
    source = _shared.get(key)
    if source is None:
        source = _shared[key] = CatalogSource(path, log)
    return source
