"""The course catalog as the service sees it: reloaded when its files change, never lost."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from gpuspawner.policy import Catalog, CatalogError, load_catalog

from .audit import AuditLog

Signature = tuple[tuple[str, int, int], ...]


def _signature(root: Path) -> Signature:
    """Name, modification time and size of the catalog file, or of each file in the folder."""
    try:
        if root.is_dir():
            files = sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml"))
        else:
            files = [root]
        return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    except OSError:
        return ()


class WatchedCatalog:
    """A catalog file or folder, reloaded when a file's mtime (or the set of files) changes.

    A catalog that fails validation is reported once (``catalog-error``) and the last good
    one stays in use, so an instructor's typo never stops pre-warming or reclaiming.
    """

    def __init__(self, path: str | Path, audit: AuditLog):
        self.path = Path(path)
        self.audit = audit
        self.catalog: Catalog | None = None
        self._seen: Signature | None = None

    def current(self, now: datetime) -> Catalog | None:
        """The catalog to act on at ``now`` (None while no valid catalog was ever loaded)."""
        signature = _signature(self.path)
        if signature == self._seen:
            return self.catalog
        self._seen = signature
        try:
            catalog = load_catalog(self.path)
        except CatalogError as error:
            kept = "keeping the last good catalog" if self.catalog else "no catalog loaded yet"
            self.audit.record(now, "catalog-error", detail=f"{error} ({kept}).")
            return self.catalog
        first = self.catalog is None
        self.catalog = catalog
        self.audit.record(
            now,
            "catalog-reload",
            detail=f"{'Loaded' if first else 'Reloaded'} {self.path}: "
            f"{len(catalog.courses)} course(s), {len(catalog.research)} research allocation(s).",
        )
        return catalog
