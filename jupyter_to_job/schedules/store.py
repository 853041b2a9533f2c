"""The schedule tables (``schedules``, ``schedule_runs``, in the job store's database) and
their reads and writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Engine,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    select,
    update,
)
from sqlalchemy.orm import Mapped, mapped_column

from gpuspawner.core.databases import UTCDateTime

from ..owned_rows import OwnedRequest, OwnedRows
from ..store import Base
from .errors import ScheduleNotFound
from .models import RECENT_RUNS, ScheduleStatus


class ScheduleRow(OwnedRequest, Base):
    """One schedule: its request (``spec``, a CreateSchedule) and where it stands."""

    __tablename__ = "schedules"

    schedule_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    working_dir: Mapped[str | None] = mapped_column(Text)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    failures_in_a_row: Mapped[int] = mapped_column(Integer, default=0)
    last_slot_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    next_slot_time: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime)


class ScheduleRunRow(Base):
    """One slot handled: its time is the run's key, unique per schedule."""

    __tablename__ = "schedule_runs"
    __table_args__ = (UniqueConstraint("schedule_id", "slot_time", name="uq_schedule_slot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    schedule_id: Mapped[str] = mapped_column(String(64), index=True)
    slot_time: Mapped[datetime] = mapped_column(UTCDateTime)
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    pipeline_id: Mapped[str | None] = mapped_column(String(64))
    """The pipeline of a pipeline schedule's run (its job_id stays None)."""
    outcome: Mapped[str | None] = mapped_column(String(16))
    """None while its job runs; then COMPLETED, FAILED or STOPPED."""
    message: Mapped[str | None] = mapped_column(Text)


TABLES: list[Table] = [ScheduleRow.__table__, ScheduleRunRow.__table__]  # type: ignore[list-item]


class SlotTaken(Exception):
    """Another round handled this slot first."""


class ScheduleStore(OwnedRows[ScheduleRow]):
    """All reads and writes of schedule rows and their runs."""

    def __init__(self, engine: Engine):
        super().__init__(engine, ScheduleRow, "schedule_id", ScheduleNotFound, TABLES)

    def add(self, row: ScheduleRow) -> None:
        with self._sessions.begin() as session:
            session.add(row)

    def unfinished(self) -> list[ScheduleRow]:
        """The schedules not ended (active or paused), oldest first."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(ScheduleRow)
                    .where(ScheduleRow.status != ScheduleStatus.ENDED.value)
                    .order_by(ScheduleRow.create_time)
                ).all()
            )

    def ended_with_open_runs(self) -> list[ScheduleRow]:
        """Ended schedules whose last runs have no outcome recorded yet."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(ScheduleRow).where(
                        ScheduleRow.status == ScheduleStatus.ENDED.value,
                        ScheduleRow.schedule_id.in_(
                            select(ScheduleRunRow.schedule_id).where(
                                ScheduleRunRow.outcome.is_(None)
                            )
                        ),
                    )
                ).all()
            )

    def claim(
        self, row: ScheduleRow, slot: datetime, following: datetime | None, now: datetime
    ) -> None:
        """Record ``slot`` as handled, and ``following`` as the next one due, in one
        transaction; raises :class:`SlotTaken` (or IntegrityError) when it was handled
        already (the schedule paused, deleted or taken by another scheduler meanwhile)."""
        with self._sessions.begin() as session:
            claimed = session.execute(
                update(ScheduleRow)
                .where(
                    ScheduleRow.schedule_id == row.schedule_id,
                    ScheduleRow.status == ScheduleStatus.ACTIVE.value,
                    ScheduleRow.next_slot_time == row.next_slot_time,
                )
                .values(
                    last_slot_time=slot,
                    next_slot_time=following,
                    runs=ScheduleRow.runs + 1,
                    update_time=now,
                )
            )
            if claimed.rowcount != 1:  # type: ignore[attr-defined]
                raise SlotTaken
            session.add(ScheduleRunRow(schedule_id=row.schedule_id, slot_time=slot))

    def runs(self, schedule_id: str) -> list[ScheduleRunRow]:
        """The slots handled, oldest first."""
        return self._runs(
            select(ScheduleRunRow)
            .where(ScheduleRunRow.schedule_id == schedule_id)
            .order_by(ScheduleRunRow.slot_time)
        )

    def recent_runs(self, schedule_id: str) -> list[ScheduleRunRow]:
        """The last runs, newest first."""
        return self._runs(
            select(ScheduleRunRow)
            .where(ScheduleRunRow.schedule_id == schedule_id)
            .order_by(ScheduleRunRow.slot_time.desc())
            .limit(RECENT_RUNS)
        )

    def open_runs(self, schedule_id: str) -> list[ScheduleRunRow]:
        """The runs whose outcome is not recorded yet, oldest first."""
        return self._runs(
            select(ScheduleRunRow)
            .where(
                ScheduleRunRow.schedule_id == schedule_id,
                ScheduleRunRow.outcome.is_(None),
            )
            .order_by(ScheduleRunRow.slot_time)
        )

    def _runs(self, query: Any) -> list[ScheduleRunRow]:
        with self._sessions() as session:
            return list(session.scalars(query).all())

    def schedule_of(self, job_id: str) -> str | None:
        with self._sessions() as session:
            return session.scalar(
                select(ScheduleRunRow.schedule_id).where(ScheduleRunRow.job_id == job_id)
            )

    def record_outcome(self, run_id: int, outcome: str, message: str | None) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(ScheduleRunRow)
                .where(ScheduleRunRow.id == run_id)
                .values(outcome=outcome, message=message)
            )

    def record_run(self, schedule_id: str, slot: datetime, **values: Any) -> None:
        """Set the run of ``slot``'s job or pipeline, and its outcome when it has one."""
        with self._sessions.begin() as session:
            session.execute(
                update(ScheduleRunRow)
                .where(ScheduleRunRow.schedule_id == schedule_id, ScheduleRunRow.slot_time == slot)
                .values(**values)
            )
