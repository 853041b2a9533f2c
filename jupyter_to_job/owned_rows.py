"""Rows each owned by one person, in the job store's database: what the pipeline and the
schedule stores share (create their tables, find one of the owner's, change it, list an
owner's newest first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import JSON, Engine, String, Table, Text, delete, select, update
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from .errors import JobError
from .store import Base, add_missing_columns

RowT = TypeVar("RowT", bound=Base)


class OwnedRequest:
    """The columns of a row made from one person's request (``spec``) and where it stands."""

    owner: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    status_message: Mapped[str | None] = mapped_column(Text)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)


class OwnedRows(Generic[RowT]):
    """Reads and writes of one table of owned rows (``row_class``), keyed by ``key``; the
    other ``tables`` hold rows that belong to one of them (by a ``key`` column of theirs)."""

    def __init__(
        self,
        engine: Engine,
        row_class: type[RowT],
        key: str,
        not_found: Callable[[str], JobError],
        tables: list[Table],
    ):
        self.engine = engine
        self.row_class = row_class
        self._key = getattr(row_class, key)
        self._key_name = key
        self._not_found = not_found
        self._tables = tables
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create_tables(self, grown: Table) -> None:
        """Create the missing tables, and the nullable columns ``grown`` gained since."""
        Base.metadata.create_all(self.engine, tables=self._tables)
        add_missing_columns(self.engine, grown)

    def find(self, key: str) -> RowT | None:
        with self._sessions() as session:
            return session.get(self.row_class, key)

    def get(self, key: str, owner: str | None) -> RowT:
        """The row ``key``; with ``owner``, only if it is theirs (else the not-found error)."""
        row = self.find(key)
        if row is None or (owner is not None and row.owner != owner):  # type: ignore[attr-defined]
            raise self._not_found(key)
        return row

    def update(self, key: str, **values: Any) -> None:
        with self._sessions.begin() as session:
            session.execute(update(self.row_class).where(self._key == key).values(**values))

    def delete(self, key: str) -> None:
        """Delete the row ``key`` and the rows that belong to it."""
        with self._sessions.begin() as session:
            for table in reversed(self._tables):
                session.execute(delete(table).where(table.c[self._key_name] == key))

    def of_owner(self, owner: str) -> list[RowT]:
        """``owner``'s rows, newest first."""
        row_class: Any = self.row_class
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(row_class)
                    .where(row_class.owner == owner)
                    .order_by(row_class.create_time.desc())
                ).all()
            )
