"""What the project's SQLAlchemy stores (the job store, the usage record) share: an engine for
a database URL, and a column type for aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Engine, TypeDecorator, create_engine, event


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, stored naive: the same in SQLite and
    PostgreSQL. A naive datetime is refused rather than guessed at."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("this column takes aware datetimes only (with a time zone)")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def database_engine(db_url: str, *, echo: bool = False) -> Engine:
    """An engine for ``db_url``. SQLite is shared by several processes (the hub, the job
    service, the sessions service) and by an event loop's helper threads: one connection per
    thread is allowed, writers wait up to 30 s for the lock, and WAL lets readers go on while
    another process writes."""
    if not db_url.startswith("sqlite"):
        return create_engine(db_url, echo=echo)
    engine = create_engine(
        db_url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
