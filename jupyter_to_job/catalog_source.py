"""The catalog the job flavors come from: reloaded when its files change, never lost."""

from __future__ import annotations

import logging
from pathlib import Path

from gpuspawner.policy import Catalog, CatalogError, load_catalog

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
    """A catalog file or folder, reloaded when a file changes.

    A catalog that fails validation is logged and the last good one stays in use, so an
    instructor's typo never takes Run as Job down.
    """

    def __init__(self, path: str | Path, log: logging.Logger | None = None):
        self.path = Path(path)
        self.log = log or logging.getLogger(__name__)
        self._catalog: Catalog | None = None
        self._seen: Signature | None = None

    def current(self) -> Catalog | None:
        """The catalog in force (None while no valid catalog was ever loaded)."""
        signature = _signature(self.path)
        if signature == self._seen:
            return self._catalog
        self._seen = signature
        try:
            catalog = load_catalog(self.path)
        except CatalogError as error:
            kept = "keeping the last good one" if self._catalog else "no job flavors until fixed"
            self.log.error("The course catalog %s has errors (%s):\n%s", self.path, kept, error)
            return self._catalog
        self.log.info("Loaded course catalog %s: %d job flavor(s)", self.path, len(catalog.flavors))
        self._catalog = catalog
        return catalog
