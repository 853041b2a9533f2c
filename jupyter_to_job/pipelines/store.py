"""The pipeline tables (``pipelines``, ``pipeline_jobs``, in the job store's database) and
their reads and writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    CursorResult,
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
from ..store import Base, JobRow, utcnow
from .errors import PipelineNotFound
from .models import PipelineStatus


class PipelineRow(OwnedRequest, Base):
    """One pipeline: its request (``spec``, a CreatePipeline) and where it stands."""

    __tablename__ = "pipelines"

    pipeline_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    current_stage: Mapped[int | None] = mapped_column(Integer)
    schedule_id: Mapped[str | None] = mapped_column(String(64))
    """The schedule whose run started it (its jobs say so too); None: started by hand."""
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime)
    end_time: Mapped[datetime | None] = mapped_column(UTCDateTime)


class PipelineJobRow(Base):
    """One job of a pipeline: its admitted request and, once its stage started, its job."""

    __tablename__ = "pipeline_jobs"
    __table_args__ = (
        UniqueConstraint("pipeline_id", "stage_index", "job_index", name="uq_pipeline_job"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    pipeline_id: Mapped[str] = mapped_column(String(64), index=True)
    stage_index: Mapped[int] = mapped_column(Integer)
    job_index: Mapped[int] = mapped_column(Integer)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The CreateJob as admitted when the pipeline was made (flavor and deadline filled in)."""
    working_dir: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(16))
    """PENDING, SKIPPED, FAILED when no job could be made, else its job's last status seen."""
    status_message: Mapped[str | None] = mapped_column(Text)
    stop_reason: Mapped[str | None] = mapped_column(Text)
    """Why the pipeline stopped this job (shown while it stops and once it stopped)."""
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)


TABLES: list[Table] = [PipelineRow.__table__, PipelineJobRow.__table__]  # type: ignore[list-item]


_UNFINISHED = [PipelineStatus.RUNNING.value, PipelineStatus.STOPPING.value]


class PipelineStore(OwnedRows[PipelineRow]):
    """All reads and writes of pipeline rows and their job entries."""

    def __init__(self, engine: Engine):
        super().__init__(engine, PipelineRow, "pipeline_id", PipelineNotFound, TABLES)

    def add(self, row: PipelineRow, entries: list[PipelineJobRow]) -> None:
        with self._sessions.begin() as session:
            session.add(row)
            session.add_all(entries)

    def unfinished(self) -> list[str]:
        """The ids of the pipelines still running or stopping, oldest first."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(PipelineRow.pipeline_id)
                    .where(PipelineRow.status.in_(_UNFINISHED))
                    .order_by(PipelineRow.create_time)
                ).all()
            )

    def entries(self, pipeline_id: str) -> list[PipelineJobRow]:
        """The pipeline's jobs, by stage and place."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(PipelineJobRow)
                    .where(PipelineJobRow.pipeline_id == pipeline_id)
                    .order_by(PipelineJobRow.stage_index, PipelineJobRow.job_index)
                ).all()
            )

    def update(self, key: str, **values: Any) -> None:
        values["update_time"] = utcnow()
        super().update(key, **values)

    def update_entry(self, entry_id: int, **values: Any) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(PipelineJobRow).where(PipelineJobRow.id == entry_id).values(**values)
            )

    def finish(self, pipeline_id: str, values: dict[str, Any]) -> bool:
        """End an unfinished pipeline with ``values``; False when it had ended already."""
        with self._sessions.begin() as session:
            result = session.execute(
                update(PipelineRow)
                .where(PipelineRow.pipeline_id == pipeline_id, PipelineRow.status.in_(_UNFINISHED))
                .values(**values)
            )
            return cast(CursorResult[Any], result).rowcount == 1

    def jobs(self, job_ids: list[str]) -> dict[str, JobRow]:
        """The jobs made so far, in one query."""
        if not job_ids:
            return {}
        with self._sessions() as session:
            rows = session.scalars(select(JobRow).where(JobRow.job_id.in_(job_ids)))
            return {row.job_id: row for row in rows}
