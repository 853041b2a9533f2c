"""The course catalog as the sessions service sees it: every reload and error audited."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from gpuspawner.core.catalog_source import CatalogSource
from gpuspawner.policy import Catalog, CatalogError

from .audit import AuditLog


class WatchedCatalog:
    """A :class:`CatalogSource` whose reloads (``catalog-reload``) and errors
    (``catalog-error``) go to the audit log, stamped with the round's ``now``.

    In the service's event loop a changed catalog is read in a worker thread (see
    :class:`CatalogSource`); a read that outlasts the round is recorded with the ``now`` of
    the round that asked last, and the round goes on with the last good catalog.
    """

    def __init__(self, path: str | Path, audit: AuditLog):
        self.audit = audit
        self._now: datetime | None = None
        self._source = CatalogSource(path, on_load=self._loaded, on_error=self._failed)

    @property
    def path(self) -> Path:
        return self._source.path

    @property
    def catalog(self) -> Catalog | None:
        return self._source.catalog

    def current(self, now: datetime) -> Catalog | None:
        """The catalog to act on at ``now`` (None while no valid catalog was ever loaded)."""
        self._now = now
        return self._source.current()

    def _loaded(self, catalog: Catalog, first: bool) -> None:
        assert self._now is not None
        self.audit.record(
            self._now,
            "catalog-reload",
            detail=f"{'Loaded' if first else 'Reloaded'} {self.path}: "
            f"{len(catalog.courses)} course(s), {len(catalog.research)} research allocation(s).",
        )

    def _failed(self, error: CatalogError, kept: bool) -> None:
        assert self._now is not None
        state = "keeping the last good catalog" if kept else "no catalog loaded yet"
        self.audit.record(self._now, "catalog-error", detail=f"{error} ({state}).")
