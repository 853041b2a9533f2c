"""The course catalog as a running process sees it: reloaded when its files change, never lost.

The hub's spawners, the course-sessions service, the job service and the Kubernetes job
executor all read the same catalog this way. A catalog that fails validation is reported
and the last good one stays in force, so an instructor's typo never takes anything down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from .policy import Catalog, CatalogError, load_catalog

Signature = tuple[tuple[str, int, int], ...]


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


class CatalogSource:
    """A catalog file or folder, read again only when one of its files changes.

    ``on_load(catalog, first)`` and ``on_error(error, kept)`` report what happened; by
    default both go to ``log``. ``last_error`` holds the error of the latest failed read.
    """

    def __init__(
        self,
        path: str | Path,
        log: logging.Logger | None = None,
        *,
        on_load: Callable[[Catalog, bool], None] | None = None,
        on_error: Callable[[CatalogError, bool], None] | None = None,
    ):
        self.path = Path(path)
        self.log = log or logging.getLogger(__name__)
        self._on_load = on_load or self._log_load
        self._on_error = on_error or self._log_error
        self.catalog: Catalog | None = None
        self.last_error: CatalogError | None = None
        self._seen: Signature | None = None

    def current(self) -> Catalog | None:
        """The catalog in force (None while no valid catalog was ever loaded)."""
        signature = _signature(self.path)
        if signature == self._seen:
            return self.catalog
        self._seen = signature
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
