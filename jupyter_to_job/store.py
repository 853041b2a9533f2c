"""The job store: one table of jobs, SQLAlchemy 2, SQLite by default, PostgreSQL supported.

Design notes: docs/design/jobs.md, "jupyter_to_job.store".
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    CursorResult,
    Engine,
    Float,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    delete,
    func,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from gpuspawner.core.databases import UTCDateTime, database_engine

from .errors import InvalidJobRequest
from .models import JobStatus, ListJobsQuery

ACTIVE = (JobStatus.RUNNING, JobStatus.STOPPING)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """The declarative base of the job store's tables."""


class JobRow(Base):
    """One job. ``id`` orders the queue (first in, first out); ``job_id`` is its public name."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("owner", "idempotency_token", name="uq_jobs_owner_token"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255))
    flavor: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), index=True, default=JobStatus.CREATED.value)
    status_message: Mapped[str | None] = mapped_column(Text)
    input_path: Mapped[str] = mapped_column(Text)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    output_formats: Mapped[list[str]] = mapped_column(JSON, default=list)
    kernel_name: Mapped[str | None] = mapped_column(String(64))
    deadline_seconds: Mapped[int | None] = mapped_column(Integer)
    cell_timeout_seconds: Mapped[int | None] = mapped_column(Integer)
    idempotency_token: Mapped[str | None] = mapped_column(String(128))
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime)
    queue_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    start_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    end_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    cells_completed: Mapped[int] = mapped_column(Integer, default=0)
    cells_total: Mapped[int | None] = mapped_column(Integer)
    current_cell: Mapped[int | None] = mapped_column(Integer)
    gpu: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """The share held: description, device ids, and the capacity pool's allocation."""
    pid: Mapped[int | None] = mapped_column(Integer)
    process_start_time: Mapped[float | None] = mapped_column(Float)
    """The job process's start time (seconds since the epoch), to tell it from a reused pid."""
    pipeline_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The pipeline whose stage made this job (None: not a pipeline's)."""
    schedule_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The schedule whose run made this job (None: not a schedule's)."""
    environment: Mapped[dict[str, str] | None] = mapped_column(JSON)
    """Variables the job's runner gets besides its GPU share (a pipeline's shared folder)."""
    rerun_of: Mapped[str | None] = mapped_column(String(64))
    """The job this one runs again (Rerun), whose notebook snapshot it ran; None: none."""

    @property
    def job_status(self) -> JobStatus:
        return JobStatus(self.status)


class JobNotifyRow(Base):
    """Whom to tell when a job ends, when its create said so (``CreateJob.notify``)."""

    __tablename__ = "job_notify"

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)


class JobAttemptsRow(Base):
    """A job with a checkpoint: its folder and its attempts (a table of its own, so a store
    made before checkpoints gains it with ``create_tables`` and no migration)."""

    __tablename__ = "job_attempts"

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    checkpoint_folder: Mapped[str] = mapped_column(Text)
    """As asked for, relative to the notebook's folder."""
    checkpoint_path: Mapped[str] = mapped_column(Text)
    """Its absolute path, as the runner gets it."""
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    max_attempts: Mapped[int] = mapped_column(Integer, default=1)
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    """One entry per attempt that ended and was started again: ``{attempt, reason, time}``."""


class OwnerNotifyRow(Base):
    """An owner's default notifications and the secret their webhooks are signed with."""

    __tablename__ = "owner_notify"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    webhook_secret: Mapped[str | None] = mapped_column(String(128))


class DuplicateToken(Exception):
    """Another job of this owner already uses this idempotency token."""

    def __init__(self, existing: JobRow):
        super().__init__(existing.job_id)
        self.existing = existing


@dataclass(frozen=True)
class JobPage:
    rows: list[JobRow]
    total_count: int
    next_token: str | None


_SORT_COLUMNS = {"create_time": JobRow.create_time, "name": JobRow.name, "status": JobRow.status}


def _encode_token(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def _decode_token(token: str, query: ListJobsQuery) -> dict[str, Any]:
    problem = InvalidJobRequest(
        "The page token is not valid for this listing; list the jobs again from the first page."
    )
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise problem from None
    if (
        not isinstance(data, dict)
        or data.get("sort") != [query.sort_by, query.sort_order]
        or not isinstance(data.get("id"), int)
        or not isinstance(data.get("value"), str)
    ):
        raise problem
    return data


def add_missing_columns(engine: Engine, table: Table) -> list[str]:
    """Add ``table``'s nullable columns that its database table lacks (a store made by an
    older version); returns their names. A column that is not nullable is never added this
    way: that change needs a migration of its own."""
    present = {column["name"] for column in inspect(engine).get_columns(table.name)}
    added = []
    with engine.begin() as connection:
        for column in table.columns:
            if column.name in present or not column.nullable:
                continue
            kind = column.type.compile(dialect=engine.dialect)
            connection.execute(text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}'))
            added.append(column.name)
        for index in table.indexes:
            if {column.name for column in index.columns} & set(added):
                index.create(connection, checkfirst=True)
    return added


class JobStore:
    """All reads and writes of job rows."""

    def __init__(self, db_url: str, *, echo: bool = False):
        self.db_url = db_url
        self.engine = database_engine(db_url, echo=echo)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def create_tables(self) -> None:
        """Create the missing tables, and the nullable columns added to ``jobs`` since a
        store was made (SQLite and PostgreSQL both add a nullable column in place)."""
        Base.metadata.create_all(self.engine)
        add_missing_columns(self.engine, JobRow.__table__)  # type: ignore[arg-type]

    def drop_tables(self) -> None:
        Base.metadata.drop_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- create and read ----------------------------------------------------------------

    def add(self, row: JobRow) -> JobRow:
        """Insert a new job; raises :class:`DuplicateToken` when its token is taken."""
        now = utcnow()
        row.create_time = row.create_time or now
        row.update_time = now
        try:
            with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError:
            if row.idempotency_token is not None:
                existing = self.find_by_token(row.owner, row.idempotency_token)
                if existing is not None:
                    raise DuplicateToken(existing) from None
            raise
        return row

    def get(self, job_id: str) -> JobRow | None:
        with self._sessions() as session:
            return session.scalar(select(JobRow).where(JobRow.job_id == job_id))

    def find_by_token(self, owner: str, token: str) -> JobRow | None:
        with self._sessions() as session:
            return session.scalar(
                select(JobRow).where(JobRow.owner == owner, JobRow.idempotency_token == token)
            )

    def with_status(self, *statuses: JobStatus) -> list[JobRow]:
        """Jobs in any of ``statuses``, oldest first (queue order)."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(JobRow)
                    .where(JobRow.status.in_([s.value for s in statuses]))
                    .order_by(JobRow.id)
                )
            )

    def count(self, *statuses: JobStatus) -> int:
        with self._sessions() as session:
            return (
                session.scalar(
                    select(func.count())
                    .select_from(JobRow)
                    .where(JobRow.status.in_([s.value for s in statuses]))
                )
                or 0
            )

    def queue_position(self, row: JobRow) -> int | None:
        """1 for the next queued job to start; None unless ``row`` is queued."""
        if row.job_status is not JobStatus.QUEUED:
            return None
        with self._sessions() as session:
            ahead = session.scalar(
                select(func.count())
                .select_from(JobRow)
                .where(JobRow.status == JobStatus.QUEUED.value, JobRow.id < row.id)
            )
        return (ahead or 0) + 1

    def list(self, query: ListJobsQuery, *, owners: Collection[str] | None = None) -> JobPage:
        """One page of jobs matching ``query``, with keyset pagination (stable under inserts).

        ``owners`` limits the page to those users' jobs (None: no limit), on top of
        ``query.owner``: the job service passes the owners a caller may read.
        """
        filters = []
        if query.owner is not None:
            filters.append(JobRow.owner == query.owner)
        if owners is not None:
            filters.append(JobRow.owner.in_(sorted(owners)))
        if query.status is not None:
            filters.append(JobRow.status == query.status.value)
        if query.name:
            filters.append(func.lower(JobRow.name).contains(query.name.lower(), autoescape=True))
        column = _SORT_COLUMNS[query.sort_by]
        descending = query.sort_order == "desc"
        page_filters = list(filters)
        if query.next_token:
            token = _decode_token(query.next_token, query)
            value: Any = token["value"]
            if query.sort_by == "create_time":
                try:
                    value = datetime.fromisoformat(value)
                except ValueError:
                    raise InvalidJobRequest(
                        "The page token is not valid for this listing; "
                        "list the jobs again from the first page."
                    ) from None
            if descending:
                page_filters.append(
                    or_(column < value, and_(column == value, JobRow.id < token["id"]))
                )
            else:
                page_filters.append(
                    or_(column > value, and_(column == value, JobRow.id > token["id"]))
                )
        order = (column.desc(), JobRow.id.desc()) if descending else (column.asc(), JobRow.id)
        with self._sessions() as session:
            total = session.scalar(select(func.count()).select_from(JobRow).where(*filters))
            rows = list(
                session.scalars(
                    select(JobRow).where(*page_filters).order_by(*order).limit(query.max_items + 1)
                )
            )
        next_token = None
        if len(rows) > query.max_items:
            rows = rows[: query.max_items]
            last = rows[-1]
            value = getattr(last, query.sort_by)
            next_token = _encode_token(
                {
                    "sort": [query.sort_by, query.sort_order],
                    "value": value.isoformat() if isinstance(value, datetime) else value,
                    "id": last.id,
                }
            )
        return JobPage(rows, total or 0, next_token)

    # -- change -------------------------------------------------------------------------

    def update(self, job_id: str, **fields: Any) -> None:
        """Set ``fields`` on a job, whatever its state."""
        fields["update_time"] = utcnow()
        with self._sessions.begin() as session:
            session.execute(update(JobRow).where(JobRow.job_id == job_id).values(**fields))

    def transition(
        self, job_id: str, from_: Iterable[JobStatus], to: JobStatus, **fields: Any
    ) -> bool:
        """Move a job to ``to`` only if it is in one of ``from_``; True if this call did it."""
        fields["update_time"] = utcnow()
        with self._sessions.begin() as session:
            result = session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id, JobRow.status.in_([s.value for s in from_]))
                .values(status=to.value, **fields)
            )
            return cast(CursorResult[Any], result).rowcount == 1

    def delete(self, job_id: str) -> bool:
        with self._sessions.begin() as session:
            session.execute(delete(JobNotifyRow).where(JobNotifyRow.job_id == job_id))
            session.execute(delete(JobAttemptsRow).where(JobAttemptsRow.job_id == job_id))
            result = session.execute(delete(JobRow).where(JobRow.job_id == job_id))
            return cast(CursorResult[Any], result).rowcount == 1

    # -- checkpoints and attempts -----------------------------------------------------------

    def set_job_checkpoint(self, job_id: str, folder: str, path: str, max_attempts: int) -> None:
        with self._sessions.begin() as session:
            session.merge(
                JobAttemptsRow(
                    job_id=job_id,
                    checkpoint_folder=folder,
                    checkpoint_path=path,
                    attempt=1,
                    max_attempts=max_attempts,
                    history=[],
                )
            )

    def job_attempts(self, job_id: str) -> JobAttemptsRow | None:
        """The job's checkpoint and attempts; None for a job without a checkpoint."""
        with self._sessions() as session:
            return session.get(JobAttemptsRow, job_id)

    def jobs_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttemptsRow]:
        if not job_ids:
            return {}
        with self._sessions() as session:
            rows = session.scalars(
                select(JobAttemptsRow).where(JobAttemptsRow.job_id.in_(sorted(job_ids)))
            )
            return {row.job_id: row for row in rows}

    def start_again(
        self,
        job_id: str,
        from_: Iterable[JobStatus],
        reason: str,
        *,
        memory_bytes: int | None = None,
    ) -> int | None:
        """Queue an active job for its next attempt, in one transaction: the job goes back to
        QUEUED only if it is in ``from_`` and has attempts left. Returns the new attempt's
        number, or None (not in ``from_``, no checkpoint, or no attempt left).
        ``memory_bytes``: the memory its attempts get from now on (an out-of-memory retry),
        kept in the history entry."""
        now = utcnow()
        with self._sessions.begin() as session:
            attempts = session.get(JobAttemptsRow, job_id, with_for_update=True)
            if attempts is None or attempts.attempt >= attempts.max_attempts:
                return None
            result = session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id, JobRow.status.in_([s.value for s in from_]))
                .values(
                    status=JobStatus.QUEUED.value,
                    status_message=f"Queued again after attempt {attempts.attempt}: {reason}",
                    update_time=now,
                    queue_time=now,
                    pid=None,
                    process_start_time=None,
                    current_cell=None,
                    exit_code=None,
                )
            )
            if cast(CursorResult[Any], result).rowcount != 1:
                return None
            entry: dict[str, Any] = {
                "attempt": attempts.attempt,
                "reason": reason,
                "time": now.isoformat(),
            }
            if memory_bytes is not None:
                entry["memory_bytes"] = memory_bytes
            attempts.history = [*attempts.history, entry]
            attempts.attempt += 1
            return attempts.attempt

    def count_attempt(self, job_id: str, reason: str, ended: str) -> int | None:
        """Count a new attempt of a job that goes on by itself (a Kubernetes Job that the
        cluster starts again): the attempt ``ended`` (a pod's uid, or which of the Job's
        failed pods) ended for ``reason``.
        Returns the new attempt's number, or None (no checkpoint, no attempt left, or
        ``ended`` counted already: a job service following the job again after a restart)."""
        with self._sessions.begin() as session:
            attempts = session.get(JobAttemptsRow, job_id, with_for_update=True)
            if attempts is None or attempts.attempt >= attempts.max_attempts:
                return None
            if any(entry.get("ended") == ended for entry in attempts.history):
                return None
            attempts.history = [
                *attempts.history,
                {
                    "attempt": attempts.attempt,
                    "reason": reason,
                    "time": utcnow().isoformat(),
                    "ended": ended,
                },
            ]
            attempts.attempt += 1
            return attempts.attempt

    # -- notifications ----------------------------------------------------------------------

    def set_job_notify(self, job_id: str, settings: dict[str, Any]) -> None:
        with self._sessions.begin() as session:
            session.merge(JobNotifyRow(job_id=job_id, settings=settings))

    def job_notify(self, job_id: str) -> dict[str, Any] | None:
        with self._sessions() as session:
            row = session.get(JobNotifyRow, job_id)
            return None if row is None else dict(row.settings)

    def owner_notify(self, owner: str) -> OwnerNotifyRow | None:
        with self._sessions() as session:
            return session.get(OwnerNotifyRow, owner)

    def set_owner_notify(
        self, owner: str, settings: dict[str, Any], webhook_secret: str | None
    ) -> None:
        with self._sessions.begin() as session:
            session.merge(
                OwnerNotifyRow(owner=owner, settings=settings, webhook_secret=webhook_secret)
            )
