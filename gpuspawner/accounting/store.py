"""The usage record: one row per allocation interval, SQLAlchemy 2 (SQLite or PostgreSQL).

Design notes: docs/design/accounting.md, "gpuspawner.accounting.store".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from fractions import Fraction
from typing import Any, cast

from sqlalchemy import (
    JSON,
    CursorResult,
    Float,
    Index,
    Integer,
    String,
    or_,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from ..core.databases import UTCDateTime, database_engine
from ..holder_use import HolderUse
from .intervals import IntervalUse, UsageInterval

_AS_IN_INTERVAL = ("key", "kind", "owner", "name", "profile", "course", "allocation", "started")
"""The columns that hold the :class:`UsageInterval` field of the same name, as it is."""


class _Base(DeclarativeBase):
    """The usage record's tables."""


class UsageRow(_Base):
    """One allocation interval: who held how many GPUs, charged to what, from when to when."""

    __tablename__ = "gpu_usage"
    __table_args__ = (
        Index("ix_gpu_usage_open", "key", "ended"),
        Index("ix_gpu_usage_span", "started", "ended"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(320))
    kind: Mapped[str] = mapped_column(String(8))
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    profile: Mapped[str] = mapped_column(String(64))
    course: Mapped[str | None] = mapped_column(String(64), index=True)
    allocation: Mapped[str | None] = mapped_column(String(64), index=True)
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    share_numerator: Mapped[int] = mapped_column(Integer)
    share_denominator: Mapped[int] = mapped_column(Integer)
    devices: Mapped[list[str]] = mapped_column(JSON, default=list)
    started: Mapped[datetime] = mapped_column(UTCDateTime)
    ended: Mapped[datetime | None] = mapped_column(UTCDateTime)
    end_reason: Mapped[str | None] = mapped_column(String(32))
    """``stopped``; ``gone``: found no longer running after a restart."""

    @classmethod
    def of(cls, interval: UsageInterval, devices: Iterable[str]) -> UsageRow:
        """The row that opens ``interval`` (its ``ended`` and ``use`` are not stored here)."""
        return cls(
            **{column: getattr(interval, column) for column in _AS_IN_INTERVAL},
            groups=sorted(interval.groups),
            share_numerator=interval.share.numerator,
            share_denominator=interval.share.denominator,
            devices=list(devices),
        )

    def interval(self, use: IntervalUse | None = None) -> UsageInterval:
        return UsageInterval(
            **{column: getattr(self, column) for column in _AS_IN_INTERVAL},
            share=Fraction(self.share_numerator, self.share_denominator),
            ended=self.ended,
            groups=tuple(self.groups or ()),
            use=use,
        )


class GPUUseRow(_Base):
    """What one interval used of its GPUs, summed over the rounds that read it."""

    __tablename__ = "gpu_use"

    usage_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    """The interval's ``gpu_usage`` row."""
    observed_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    busy_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    device_wide_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    peak_memory_mib: Mapped[int | None] = mapped_column(Integer, nullable=True)

    def use(self) -> IntervalUse:
        return IntervalUse(
            observed_seconds=self.observed_seconds,
            busy_seconds=self.busy_seconds,
            device_wide_seconds=self.device_wide_seconds,
            peak_memory_mib=self.peak_memory_mib,
        )


class UsageStore:
    """All reads and writes of the usage record (one per database URL and process)."""

    def __init__(self, db_url: str, *, echo: bool = False):
        self.db_url = db_url
        self.engine = database_engine(db_url, echo=echo)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        try:
            _Base.metadata.create_all(self.engine)
        except SQLAlchemyError:
            # The hub, the job service and the sessions service may create the tables at
            # the same moment: the loser finds them made.
            _Base.metadata.create_all(self.engine)

    def drop_tables(self) -> None:
        _Base.metadata.drop_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- change ----------------------------------------------------------------------------

    def open(
        self, interval: UsageInterval, devices: Collection[str] = (), *, fresh: bool = False
    ) -> bool:
        """Record that ``interval`` began (its ``ended`` is ignored); False when its key is
        open already (a restarted hub seeing a server it recorded before).

        ``fresh``: a new start of the key, so an interval still open for it is stale (its
        end was never recorded): it is closed when this one begins, and this one opens.
        """
        with self._sessions.begin() as session:
            existing = session.scalar(
                select(UsageRow).where(UsageRow.key == interval.key, UsageRow.ended.is_(None))
            )
            if existing is not None and not fresh:
                return False
            if existing is not None:
                existing.ended = max(interval.started, existing.started)
                existing.end_reason = "replaced"
            session.add(UsageRow.of(interval, devices))
        return True

    def close_interval(self, key: str, ended: datetime, reason: str = "stopped") -> bool:
        """Close the open interval of ``key`` at ``ended``; False when none was open."""
        with self._sessions.begin() as session:
            row = session.scalar(
                select(UsageRow).where(UsageRow.key == key, UsageRow.ended.is_(None))
            )
            if row is None:
                return False
            result = session.execute(
                update(UsageRow)
                .where(UsageRow.id == row.id, UsageRow.ended.is_(None))
                .values(ended=max(ended, row.started), end_reason=reason)
            )
            return cast(CursorResult[Any], result).rowcount == 1

    def close_dangling(
        self, running: Iterable[str], now: datetime, *, kinds: Collection[str] = ("server", "job")
    ) -> list[str]:
        """Close, at ``now``, the open intervals of ``kinds`` whose key is not in ``running``
        (what still runs, from the rebuilt pool); returns their keys."""
        alive = set(running)
        closed = []
        with self._sessions.begin() as session:
            rows = session.scalars(
                select(UsageRow).where(UsageRow.ended.is_(None), UsageRow.kind.in_(list(kinds)))
            ).all()
            for row in rows:
                if row.key in alive:
                    continue
                session.execute(
                    update(UsageRow)
                    .where(UsageRow.id == row.id, UsageRow.ended.is_(None))
                    .values(ended=max(now, row.started), end_reason="gone")
                )
                closed.append(row.key)
        return closed

    def record_use(self, uses: Iterable[HolderUse], seconds: float) -> int:
        """Add one reading of each holder's use, standing for the last ``seconds``, to its
        open interval's; returns how many intervals it was added to. A holder whose
        utilisation is unknown, or without an open interval, is skipped."""
        known = {use.key: use for use in uses if use.utilization_pct is not None}
        if not known or seconds <= 0:
            return 0
        with self._sessions.begin() as session:
            rows = session.scalars(
                select(UsageRow).where(UsageRow.key.in_(sorted(known)), UsageRow.ended.is_(None))
            ).all()
            for row in rows:
                use = known[row.key]
                record = session.get(GPUUseRow, row.id)
                if record is None:
                    record = GPUUseRow(
                        usage_id=row.id,
                        observed_seconds=0.0,
                        busy_seconds=0.0,
                        device_wide_seconds=0.0,
                    )
                    session.add(record)
                record.observed_seconds += seconds
                record.busy_seconds += seconds * (use.utilization_pct or 0.0) / 100
                if use.device_wide:
                    record.device_wide_seconds += seconds
                if use.memory_used_mib is not None:
                    record.peak_memory_mib = max(record.peak_memory_mib or 0, use.memory_used_mib)
            return len(rows)

    # -- read ------------------------------------------------------------------------------

    def intervals(
        self,
        begin: datetime | None = None,
        finish: datetime | None = None,
        *,
        owner: str | None = None,
        course: str | None = None,
        allocation: str | None = None,
        courses: Collection[str] | None = None,
    ) -> list[UsageInterval]:
        """Intervals that overlap ``[begin, finish)`` (None: no bound), oldest first.

        ``courses``: only intervals charged to one of these courses (an instructor's view).
        """
        query = select(UsageRow)
        if finish is not None:
            query = query.where(UsageRow.started < finish)
        if begin is not None:
            query = query.where(or_(UsageRow.ended.is_(None), UsageRow.ended > begin))
        if owner is not None:
            query = query.where(UsageRow.owner == owner)
        if course is not None:
            query = query.where(UsageRow.course == course)
        if allocation is not None:
            query = query.where(UsageRow.allocation == allocation)
        if courses is not None:
            query = query.where(UsageRow.course.in_(sorted(courses)))
        joined = query.add_columns(GPUUseRow).outerjoin(
            GPUUseRow, GPUUseRow.usage_id == UsageRow.id
        )
        with self._sessions() as session:
            found = session.execute(joined.order_by(UsageRow.started, UsageRow.id)).all()
            return [row.interval(use.use() if use is not None else None) for row, use in found]

    def open_keys(self, kinds: Collection[str] = ("server", "job")) -> list[str]:
        """The keys of the intervals still open."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(UsageRow.key).where(
                        UsageRow.ended.is_(None), UsageRow.kind.in_(list(kinds))
                    )
                )
            )


_stores: dict[str, UsageStore] = {}


def shared_usage_store(db_url: str) -> UsageStore:
    """The one :class:`UsageStore` of this process for ``db_url`` (tables made on first use)."""
    store = _stores.get(db_url)
    if store is None:
        store = _stores[db_url] = UsageStore(db_url)
    return store


def close_shared_usage_store(db_url: str) -> None:
    """Close this process's shared store of ``db_url`` (the next use opens it anew)."""
    store = _stores.pop(db_url, None)
    if store is not None:
        store.close()
