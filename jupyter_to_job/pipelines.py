"""Pipelines: stages of notebook jobs, each stage's jobs in parallel, the stages in turn.

A pipeline (:class:`CreatePipeline`) is a list of stages; a stage is one to ten notebook
jobs, each with its own flavor and parameters. The :class:`Pipelines` orchestrator submits a
stage's jobs through :meth:`JobManager.create <jupyter_to_job.manager.JobManager.create>`
when the stage starts, so each job is admitted by the manager's capacity hook then (GPU
share, budget), as any job. The next stage starts when every job of the stage completed.
When a job fails, the other running jobs of the pipeline are stopped and the stages after
it are skipped (no job is made for them), each with a sentence saying why; the pipeline is
FAILED and says which job failed in which cell. A stop by the owner stops the running jobs
and skips the rest alike.

Stages pass files on through a *shared folder* in the owner's home (``shared_folder``,
relative to it; by default ``pipelines/<the pipeline's name>``): each job finds its
absolute path in ``$JUPYTER_TO_JOB_PIPELINE_DIR`` (the runner makes it, as the owner,
before the kernel starts), with ``$JUPYTER_TO_JOB_PIPELINE_ID`` and
``$JUPYTER_TO_JOB_PIPELINE_STAGE``. Where jobs run in pods the service does not know where
the home is mounted, so the variable arrives relative to the notebook's folder and the
runner resolves it. A job service without homes (no notebook folder) gives each pipeline a
folder of its own under the service's data.

The state is in the database (tables ``pipelines`` and ``pipeline_jobs``, next to the
jobs), never only in memory: the orchestrator follows job ends as they happen (the
manager's end listeners), looks at every unfinished pipeline once at start (a job service
restarted mid-pipeline goes on where it was), and every ``tick_seconds`` after that. Each
job is created with an idempotency token naming its pipeline, stage and place, so a
restart in the middle of a stage's submission never makes a job twice.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, cast

from pydantic import Field, JsonValue, field_validator
from sqlalchemy import (
    JSON,
    CursorResult,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    select,
    update,
)
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker
from traitlets import Float, Instance
from traitlets.config import LoggingConfigurable

from gpuspawner.core.databases import UTCDateTime

from .describe import iso_utc
from .errors import JobError
from .executors import LocalExecutor
from .job_admission import JobTicket
from .manager import JobManager
from .models import (
    MAX_DEADLINE_SECONDS,
    CreateJob,
    JobErrorInfo,
    JobNotify,
    JobStatus,
    NotebookJobChecks,
    WireModel,
    _check_parameters,
    check_relative_folder,
    check_short_name,
)
from .notifications import PipelineEnd
from .runfiles import PIPELINE_DIR_VARIABLE
from .snapshot import notebook_snapshot
from .store import Base, JobRow, add_missing_columns, utcnow

MAX_STAGES = 10
MAX_JOBS_PER_STAGE = 10
MAX_STAGE_NAME = 100
MAX_PIPELINE_NAME = 255
PIPELINE_ID_VARIABLE = "JUPYTER_TO_JOB_PIPELINE_ID"
PIPELINE_STAGE_VARIABLE = "JUPYTER_TO_JOB_PIPELINE_STAGE"

Admit = Callable[[CreateJob, int, int], tuple[CreateJob, str | None]]
"""Checks job ``(request, stage index, job index)`` as a job create is checked: the job as
admitted, and the folder it runs in."""


def home_of(working_dir: str, input_path: str) -> str:
    """The owner's root folder, from the folder a job of notebook ``input_path`` runs in
    (its notebook's folder under that root)."""
    home = Path(working_dir)
    for _ in PurePosixPath(input_path).parent.parts:
        home = home.parent
    return os.fspath(home)


def slug(name: str) -> str:
    """A folder name for ``name``: lower case letters, digits, ``-`` and ``_``."""
    text = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    return text[:64] or "pipeline"


# -- wire models --------------------------------------------------------------------------


class PipelineJob(NotebookJobChecks):
    """One notebook job of a stage."""

    input_path: str = Field(description="The notebook, relative to the user's root folder.")
    name: str | None = Field(default=None, description="A name; defaults to the notebook's.")
    flavor: str | None = Field(default=None, description="The job flavor; None: the default.")
    parameters: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="The job's own values (the pipeline's values win over them).",
    )
    deadline_seconds: Annotated[int, Field(ge=1, le=MAX_DEADLINE_SECONDS)] | None = None
    cell_timeout_seconds: Annotated[int, Field(ge=1, le=MAX_DEADLINE_SECONDS)] | None = None
    kernel_name: str | None = None

    @property
    def label(self) -> str:
        """How sentences name the job: its name, else its notebook."""
        return self.name or self.input_path


class PipelineStage(WireModel):
    """Jobs that run at the same time; the next stage starts when all of them completed."""

    name: str = Field(description=f"1 to {MAX_STAGE_NAME} characters: 'train'.")
    jobs: list[PipelineJob] = Field(description=f"1 to {MAX_JOBS_PER_STAGE} jobs.")

    @field_validator("name")
    @classmethod
    def _stage_name(cls, value: str) -> str:
        name = check_short_name(value, "the stage name", MAX_STAGE_NAME)
        if name is None:
            raise ValueError("give the stage a name, such as 'train'")
        return name

    @field_validator("jobs")
    @classmethod
    def _job_count(cls, value: list[PipelineJob]) -> list[PipelineJob]:
        if not value:
            raise ValueError("a stage needs at least one notebook job")
        if len(value) > MAX_JOBS_PER_STAGE:
            raise ValueError(
                f"a stage runs at most {MAX_JOBS_PER_STAGE} jobs at once, not {len(value)}; "
                "split it into two stages"
            )
        return value


class CreatePipeline(WireModel):
    """Stages of notebook jobs, run one after another (see the module docstring)."""

    name: str = Field(description=f"1 to {MAX_PIPELINE_NAME} characters.")
    stages: list[PipelineStage] = Field(description=f"1 to {MAX_STAGES} stages, run in turn.")
    parameters: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Pipeline-wide values: a job gets {**job.parameters, **these}.",
    )
    shared_folder: str | None = Field(
        default=None,
        description="The folder stages pass files through, relative to the owner's home; "
        "None: 'pipelines/<the name, as a folder name>'.",
    )
    notify: JobNotify | None = Field(
        default=None, description="Whom to tell when the pipeline ends (not per job)."
    )
    template_path: str | None = Field(
        default=None, description="The template it came from (set by the server extension)."
    )

    @field_validator("name")
    @classmethod
    def _pipeline_name(cls, value: str) -> str:
        name = check_short_name(value, "the pipeline name", MAX_PIPELINE_NAME)
        if name is None:
            raise ValueError("give the pipeline a name, such as 'Train and evaluate'")
        return name

    @field_validator("stages")
    @classmethod
    def _stage_count(cls, value: list[PipelineStage]) -> list[PipelineStage]:
        if not value:
            raise ValueError("a pipeline needs at least one stage")
        if len(value) > MAX_STAGES:
            raise ValueError(f"a pipeline has at most {MAX_STAGES} stages, not {len(value)}")
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_parameters(value)

    @field_validator("shared_folder")
    @classmethod
    def _shared_folder(cls, value: str | None) -> str | None:
        return None if value is None else check_relative_folder(value, "the shared folder")

    @field_validator("template_path")
    @classmethod
    def _template_path(cls, value: str | None) -> str | None:
        return None if value is None else check_relative_folder(value, "the template path")

    @property
    def folder(self) -> str:
        """The shared folder, relative to the owner's home."""
        return self.shared_folder or f"pipelines/{slug(self.name)}"

    def job_request(self, stage: int, index: int) -> CreateJob:
        """The CreateJob of job ``index`` of stage ``stage``, pipeline-wide values applied."""
        job = self.stages[stage].jobs[index]
        return CreateJob(
            input_path=job.input_path,
            name=job.name,
            flavor=job.flavor,
            parameters={**job.parameters, **self.parameters},
            deadline_seconds=job.deadline_seconds,
            cell_timeout_seconds=job.cell_timeout_seconds,
            kernel_name=job.kernel_name,
        )


class PipelineStatus(StrEnum):
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def is_final(self) -> bool:
        return self in (PipelineStatus.COMPLETED, PipelineStatus.FAILED, PipelineStatus.STOPPED)


class StageStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    SKIPPED = "SKIPPED"


PENDING = "PENDING"
SKIPPED = "SKIPPED"
PipelineJobStatus = Literal[
    "PENDING",
    "SKIPPED",
    "CREATED",
    "QUEUED",
    "RUNNING",
    "STOPPING",
    "COMPLETED",
    "FAILED",
    "STOPPED",
]
"""PENDING and SKIPPED: no job was made (yet, or at all); else its job's status."""


class DescribePipelineJob(WireModel):
    input_path: str
    name: str | None = None
    flavor: str | None = None
    flavor_title: str | None = Field(
        default=None, description="The flavor's title for people; None: no such flavor now."
    )
    parameters: dict[str, JsonValue] = Field(default_factory=dict, description="As it ran.")
    job_id: str | None = Field(default=None, description="None while PENDING, or SKIPPED.")
    status: PipelineJobStatus
    status_message: str | None = None
    error: JobErrorInfo | None = None
    cells_completed: int = 0
    cells_total: int | None = None


class DescribeStage(WireModel):
    name: str
    status: StageStatus
    status_message: str | None = None
    jobs: list[DescribePipelineJob]


class DescribePipeline(WireModel):
    pipeline_id: str
    owner: str
    name: str
    status: PipelineStatus
    status_message: str | None = Field(
        default=None, description="Why it failed or stopped, naming the job and the cell."
    )
    create_time: str
    update_time: str
    end_time: str | None = None
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    shared_folder: str = Field(description="Relative to the owner's home.")
    template_path: str | None = None
    current_stage: int | None = Field(default=None, description="The running stage's index.")
    stages: list[DescribeStage]
    own: bool = False
    can_stop: bool = False
    can_delete: bool = False
    can_rerun: bool = False


class ListPipelinesResponse(WireModel):
    pipelines: list[DescribePipeline] = Field(description="Newest first.")


class UpdatePipeline(WireModel):
    """PATCH: ``{"status": "STOPPED"}`` stops the running jobs and skips the rest."""

    status: Literal["STOPPED"]


class PipelineNotFound(JobError):
    status = 404
    code = "not-found"

    def __init__(self, pipeline_id: str):
        super().__init__(
            f"There is no pipeline {pipeline_id[:64]!r}. It may have been deleted; reload the "
            "pipeline list."
        )


class PipelineNotDeletable(JobError):
    status = 409
    code = "not-finished"


class PipelineNotStoppable(JobError):
    status = 409
    code = "already-finished"


# -- the tables (in the job store's database) ----------------------------------------------


class PipelineRow(Base):
    """One pipeline: its request (``spec``, a CreatePipeline) and where it stands."""

    __tablename__ = "pipelines"

    pipeline_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), index=True)
    status_message: Mapped[str | None] = mapped_column(Text)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
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


# -- the orchestrator ------------------------------------------------------------------------


def _first_lower(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


class Pipelines(LoggingConfigurable):
    """Keeps pipelines and runs their stages through the job manager (see the module
    docstring)."""

    tick_seconds = Float(
        10.0,
        help="""Seconds between two looks at every unfinished pipeline, besides the look
        each job end triggers at once (a safety net; a stage starts at most this late).

        Example: ``c.Pipelines.tick_seconds = 30``.
        """,
    ).tag(config=True)

    manager = Instance(JobManager)

    def __init__(self, *, manager: JobManager, **kwargs: Any):
        super().__init__(manager=manager, **kwargs)
        self._sessions = sessionmaker(manager.store.engine, expire_on_commit=False)
        self._lock = asyncio.Lock()
        self._task: asyncio.Future[None] | None = None
        self._follow_ups: set[asyncio.Future[None]] = set()
        self.folder = Path(manager.root_dir) / "pipelines"
        self._listening = False
        self._closed = True

    # -- lifecycle ------------------------------------------------------------------------

    def create_tables(self) -> None:
        Base.metadata.create_all(self.manager.store.engine, tables=TABLES)
        add_missing_columns(self.manager.store.engine, PipelineRow.__table__)  # type: ignore[arg-type]

    def start(self) -> None:
        """Create the tables, follow job ends, and look at every unfinished pipeline now
        and every ``tick_seconds`` (call it after the manager's ``start``)."""
        self.create_tables()
        self._closed = False
        if not self._listening:
            self.manager.add_end_listener(self._job_ended)
            self._listening = True
        self._task = asyncio.ensure_future(self._loop())

    async def close(self) -> None:
        """Stop following (before the manager shuts down); the pipelines go on at the next
        start."""
        self._closed = True
        tasks = [task for task in (self._task, *self._follow_ups) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        self._follow_ups.clear()

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # a database hiccup must not end the pipelines for good
                self.log.exception("Looking at the pipelines failed; the next round tries again")
            await asyncio.sleep(self.tick_seconds)

    async def tick(self) -> None:
        """Move every unfinished pipeline on as far as its jobs allow."""
        with self._sessions() as session:
            ids = session.scalars(
                select(PipelineRow.pipeline_id)
                .where(
                    PipelineRow.status.in_(
                        [PipelineStatus.RUNNING.value, PipelineStatus.STOPPING.value]
                    )
                )
                .order_by(PipelineRow.create_time)
            ).all()
        for pipeline_id in ids:
            try:
                await self.advance(pipeline_id)
            except Exception:
                self.log.exception("Pipeline %s: this round failed", pipeline_id)

    def _job_ended(self, row: JobRow) -> None:
        if row.pipeline_id is None or self._closed or self.manager.closed:
            return
        task = asyncio.ensure_future(self.advance(row.pipeline_id))
        self._follow_ups.add(task)
        task.add_done_callback(self._follow_ups.discard)
        task.add_done_callback(self._log_failure)

    def _log_failure(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("A pipeline could not go on", exc_info=task.exception())

    # -- create, read, stop, delete ---------------------------------------------------------

    def _notebook_path(self, pipeline_id: str, stage: int, index: int) -> Path:
        return self.folder / pipeline_id / f"{stage}-{index}.ipynb"

    async def create(
        self,
        owner: str,
        request: CreatePipeline,
        *,
        notebooks: Mapping[str, dict[str, Any] | str | bytes] | None = None,
        source_root: str | os.PathLike[str] | None = None,
        admit: Admit | None = None,
        schedule_id: str | None = None,
    ) -> DescribePipeline:
        """Save a pipeline for ``owner`` and start its first stage.

        Each notebook is ``notebooks[input_path]`` or else read from
        ``source_root/input_path``, snapshot now (later edits do not change the pipeline).
        ``admit`` checks each job as a job create is checked (the job service's
        :meth:`JobsAPI.admitted_request`) and gives the folder it runs in; without it, each
        job runs beside its notebook under ``source_root``. Each job's flavor is also checked
        by the manager's capacity hook (``validate``: could it ever start here?). Raises a
        job error (400 for a missing notebook, 409 for a refusal, or the admission's own)
        before anything is saved. ``schedule_id``: the schedule whose run this is.
        """
        pipeline_id = str(uuid.uuid4())
        entries: list[PipelineJobRow] = []
        contents: list[bytes] = []
        for stage_index, stage in enumerate(request.stages):
            for job_index, job in enumerate(stage.jobs):
                job_request = request.job_request(stage_index, job_index)
                if admit is not None:
                    job_request, working_dir = admit(job_request, stage_index, job_index)
                elif source_root is not None:
                    parent = PurePosixPath(job.input_path).parent.parts
                    working_dir = os.path.join(os.fspath(source_root), *parent)
                else:
                    working_dir = None
                # A flavor that could never start here (too large, budget used up) is
                # refused now, as a job create is, rather than when its stage starts.
                self.manager.capacity.validate(
                    JobTicket(f"{pipeline_id}-{stage_index}-{job_index}", owner, job_request.flavor)
                )
                content = notebook_snapshot(
                    job.input_path,
                    (notebooks or {}).get(job.input_path),
                    source_root,
                    max_bytes=self.manager.max_notebook_bytes,
                )
                contents.append(content)
                entries.append(
                    PipelineJobRow(
                        pipeline_id=pipeline_id,
                        stage_index=stage_index,
                        job_index=job_index,
                        request=job_request.model_dump(mode="json"),
                        working_dir=working_dir,
                        status=PENDING,
                    )
                )
        for entry, content in zip(entries, contents, strict=True):
            path = self._notebook_path(pipeline_id, entry.stage_index, entry.job_index)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        now = utcnow()
        row = PipelineRow(
            pipeline_id=pipeline_id,
            owner=owner,
            name=request.name,
            status=PipelineStatus.RUNNING.value,
            spec=request.model_dump(mode="json"),
            current_stage=0,
            schedule_id=schedule_id,
            create_time=now,
            update_time=now,
        )
        with self._sessions.begin() as session:
            session.add(row)
            session.add_all(entries)
        self.log.info("Pipeline %s (%r) of %s created", pipeline_id, request.name, owner)
        await self.advance(pipeline_id)
        return self.describe(pipeline_id)

    def _row(self, pipeline_id: str, owner: str | None) -> PipelineRow:
        with self._sessions() as session:
            row = session.get(PipelineRow, pipeline_id)
        if row is None or (owner is not None and row.owner != owner):
            raise PipelineNotFound(pipeline_id)
        return row

    def _entries(self, pipeline_id: str) -> list[PipelineJobRow]:
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(PipelineJobRow)
                    .where(PipelineJobRow.pipeline_id == pipeline_id)
                    .order_by(PipelineJobRow.stage_index, PipelineJobRow.job_index)
                ).all()
            )

    def describe(self, pipeline_id: str, *, owner: str | None = None) -> DescribePipeline:
        """The pipeline ``pipeline_id``; with ``owner``, only if it is theirs."""
        return self._model(self._row(pipeline_id, owner))

    def list_pipelines(self, owner: str) -> list[DescribePipeline]:
        """``owner``'s pipelines, newest first."""
        with self._sessions() as session:
            rows = session.scalars(
                select(PipelineRow)
                .where(PipelineRow.owner == owner)
                .order_by(PipelineRow.create_time.desc())
            ).all()
        return [self._model(row) for row in rows]

    async def stop(self, pipeline_id: str, *, owner: str | None = None) -> DescribePipeline:
        """Stop the running jobs and skip the stages not started; the pipeline is STOPPING
        until its running jobs have stopped, then STOPPED."""
        async with self._lock:
            row = self._row(pipeline_id, owner)
            status = PipelineStatus(row.status)
            if status.is_final:
                raise PipelineNotStoppable(
                    f"The pipeline {row.name!r} has already finished ({status.value.lower()}); "
                    "there is nothing to stop."
                )
            if status is PipelineStatus.RUNNING:
                self._update(
                    pipeline_id,
                    status=PipelineStatus.STOPPING.value,
                    status_message="Stopped by its owner: the running jobs were stopped and "
                    "the rest skipped.",
                )
                await self._wind_down(
                    pipeline_id,
                    stop_reason="Stopped with the pipeline, by its owner.",
                    skip_reason="Skipped: the pipeline was stopped by its owner.",
                )
            await self._advance(pipeline_id)
        return self.describe(pipeline_id)

    def delete(self, pipeline_id: str, *, owner: str | None = None) -> None:
        """Delete a finished pipeline; its jobs stay (with their outputs and logs)."""
        row = self._row(pipeline_id, owner)
        if not PipelineStatus(row.status).is_final:
            raise PipelineNotDeletable(
                f"The pipeline {row.name!r} is still {row.status.lower()}; stop it first, "
                "then delete it."
            )
        with self._sessions.begin() as session:
            session.execute(delete(PipelineJobRow).where(PipelineJobRow.pipeline_id == pipeline_id))
            session.execute(delete(PipelineRow).where(PipelineRow.pipeline_id == pipeline_id))
        shutil.rmtree(self.folder / pipeline_id, ignore_errors=True)

    def refusal(self, pipeline_id: str) -> str | None:
        """Why a job of the pipeline was refused outright by the admission (a grant that
        expired, a flavor no longer the owner's); None when none was."""
        for entry in self._entries(pipeline_id):
            error = entry.error
            if error is None and entry.job_id is not None:
                job = self.manager.store.get(entry.job_id)
                error = job.error if job is not None else None
            if error and error.get("ename") == "JobRefused":
                return str(error.get("evalue") or "")
        return None

    # -- moving on --------------------------------------------------------------------------

    async def advance(self, pipeline_id: str) -> None:
        """Look at the pipeline's jobs and move it on: start the next stage when the current
        one completed, stop and skip the rest when a job failed, end it when all is done."""
        async with self._lock:
            await self._advance(pipeline_id)

    async def _advance(self, pipeline_id: str) -> None:
        for _ in range(MAX_STAGES + 1):  # each turn starts a stage or returns
            with self._sessions() as session:
                row = session.get(PipelineRow, pipeline_id)
            if row is None:
                return
            status = PipelineStatus(row.status)
            entries = self._entries(pipeline_id)
            self._refresh(entries)
            if status.is_final:
                return
            if status is PipelineStatus.STOPPING:
                if all(self._settled(entry) for entry in entries):
                    self._finish(pipeline_id, PipelineStatus.STOPPED)
                return
            stage = row.current_stage or 0
            spec = CreatePipeline.model_validate(row.spec)
            current = [entry for entry in entries if entry.stage_index == stage]
            waiting = [entry for entry in current if entry.status == PENDING]
            if waiting:
                await self._submit(row, spec, waiting)
                entries = self._entries(pipeline_id)
                self._refresh(entries)
                current = [entry for entry in entries if entry.stage_index == stage]
            broken = next((e for e in current if e.status in _BROKEN), None)
            if broken is not None:
                await self._fail(row, spec, broken)
                return
            if not all(entry.status == JobStatus.COMPLETED.value for entry in current):
                return  # the stage runs on
            if stage + 1 >= len(spec.stages):
                self._finish(pipeline_id, PipelineStatus.COMPLETED)
                return
            self._update(pipeline_id, current_stage=stage + 1)
            self.log.info(
                "Pipeline %s: stage %d done, stage %d starts", pipeline_id, stage, stage + 1
            )

    def _refresh(self, entries: list[PipelineJobRow]) -> None:
        """Copy each made job's status into its entry (a deleted job counts as failed)."""
        for entry in entries:
            if entry.job_id is None or entry.status == SKIPPED:
                continue
            job = self.manager.store.get(entry.job_id)
            if job is None:
                if entry.status not in _FINAL_JOB:
                    values = {
                        "status": JobStatus.FAILED.value,
                        "status_message": "Its job was deleted before it ended.",
                    }
                    self._update_entry(entry.id, **values)
                    entry.status, entry.status_message = values["status"], values["status_message"]
                continue
            if job.status != entry.status:
                self._update_entry(entry.id, status=job.status)
                entry.status = job.status

    @staticmethod
    def _settled(entry: PipelineJobRow) -> bool:
        return entry.status in _FINAL_JOB or entry.status in (PENDING, SKIPPED)

    def _environment(
        self, row: PipelineRow, spec: CreatePipeline, entry: PipelineJobRow
    ) -> dict[str, str]:
        """The job's pipeline variables: its shared folder, the pipeline, the stage."""
        input_path = PurePosixPath(entry.request["input_path"])
        if not issubclass(self.manager.executor_class, LocalExecutor):
            # A pod: the home's mount path is the executor's; the runner resolves it.
            shared = posixpath.relpath(spec.folder, input_path.parent.as_posix())
        elif entry.working_dir:
            home = Path(home_of(entry.working_dir, input_path.as_posix()))
            shared = os.fspath(home.joinpath(*PurePosixPath(spec.folder).parts))
        else:  # no home folder here: one of the pipeline's own
            shared = os.fspath(self.folder / row.pipeline_id / "shared")
        return {
            PIPELINE_DIR_VARIABLE: shared,
            PIPELINE_ID_VARIABLE: row.pipeline_id,
            PIPELINE_STAGE_VARIABLE: spec.stages[entry.stage_index].name,
        }

    async def _submit(
        self, row: PipelineRow, spec: CreatePipeline, entries: list[PipelineJobRow]
    ) -> None:
        """Create the jobs of a stage that starts; a job that cannot be made is FAILED."""
        for entry in entries:
            request = CreateJob.model_validate(entry.request).model_copy(
                update={
                    "idempotency_token": f"pipeline:{row.pipeline_id}:"
                    f"{entry.stage_index}:{entry.job_index}",
                    # The pipeline is told about once, as a whole (see _notify).
                    "notify": JobNotify(),
                }
            )
            try:
                notebook = self._notebook_path(
                    row.pipeline_id, entry.stage_index, entry.job_index
                ).read_bytes()
                created = await self.manager.create(
                    row.owner,
                    request,
                    notebook=notebook,
                    working_dir=entry.working_dir,
                    pipeline_id=row.pipeline_id,
                    schedule_id=row.schedule_id,
                    environment=self._environment(row, spec, entry),
                )
            except (JobError, OSError) as error:
                message = getattr(error, "message", None) or str(error)
                sentence = f"The job could not be created: {message}"
                self._update_entry(
                    entry.id,
                    status=JobStatus.FAILED.value,
                    status_message=sentence,
                    error=JobErrorInfo(ename="JobRefused", evalue=message).model_dump(),
                )
                self.log.warning("Pipeline %s: %s", row.pipeline_id, sentence)
                continue
            self._update_entry(entry.id, job_id=created.job_id, status=created.job.status.value)

    async def _fail(self, row: PipelineRow, spec: CreatePipeline, broken: PipelineJobRow) -> None:
        """A job of the current stage failed (or was stopped by hand): stop the others, skip
        the stages after it, and say which job failed where."""
        stage = spec.stages[broken.stage_index].name
        label = spec.stages[broken.stage_index].jobs[broken.job_index].label
        job = self.manager.store.get(broken.job_id) if broken.job_id else None
        why = (job.status_message if job is not None else None) or broken.status_message
        if broken.status == JobStatus.STOPPED.value and not broken.stop_reason:
            status = PipelineStatus.STOPPED
            message = (
                f"{label!r} of stage {stage!r} was stopped, so the pipeline stopped. "
                "The rest was stopped or skipped."
            )
            stop_reason = f"Stopped because {label!r} of stage {stage!r} was stopped."
            skip_reason = f"Skipped because {label!r} of stage {stage!r} was stopped."
        else:
            status = PipelineStatus.FAILED
            detail = (
                f"in {label!r}, {_first_lower(why.rstrip('.'))}" if why else f"{label!r} failed"
            )
            message = f"Stage {stage!r} failed: {detail}. The rest was stopped or skipped."
            stop_reason = f"Stopped because {label!r} of stage {stage!r} failed."
            skip_reason = f"Skipped because stage {stage!r} failed."
        await self._wind_down(row.pipeline_id, stop_reason=stop_reason, skip_reason=skip_reason)
        self._finish(row.pipeline_id, status, message)
        self.log.info("Pipeline %s: %s", row.pipeline_id, message)

    async def _wind_down(self, pipeline_id: str, *, stop_reason: str, skip_reason: str) -> None:
        """Skip the jobs not made yet and stop those that run (each with its reason)."""
        for entry in self._entries(pipeline_id):
            if entry.status == PENDING:
                self._update_entry(entry.id, status=SKIPPED, status_message=skip_reason)
                continue
            if entry.job_id is None or entry.status in _FINAL_JOB:
                continue
            self._update_entry(entry.id, stop_reason=stop_reason)
            try:
                await self.manager.stop(entry.job_id)
            except JobError:  # it ended meanwhile, or was deleted
                pass

    def _finish(self, pipeline_id: str, status: PipelineStatus, message: str | None = None) -> None:
        """End the pipeline (once: a conditional update) and tell its owner."""
        now = utcnow()
        values: dict[str, Any] = {"status": status.value, "end_time": now, "update_time": now}
        if status is PipelineStatus.COMPLETED:
            values["current_stage"] = None
            values["status_message"] = "Every stage completed."
        elif message is not None:
            values["status_message"] = message
        with self._sessions.begin() as session:
            result = session.execute(
                update(PipelineRow)
                .where(
                    PipelineRow.pipeline_id == pipeline_id,
                    PipelineRow.status.in_(
                        [PipelineStatus.RUNNING.value, PipelineStatus.STOPPING.value]
                    ),
                )
                .values(**values)
            )
            ended = cast(CursorResult[Any], result).rowcount == 1
        if ended:
            self._notify(pipeline_id)

    def _notify(self, pipeline_id: str) -> None:
        with self._sessions() as session:
            row = session.get(PipelineRow, pipeline_id)
        if row is None or row.end_time is None:
            return
        spec = CreatePipeline.model_validate(row.spec)
        end = PipelineEnd(
            pipeline_id=row.pipeline_id,
            name=row.name,
            owner=row.owner,
            status=row.status,
            reason=row.status_message,
            create_time=row.create_time,
            end_time=row.end_time,
        )
        self.manager.notifier.pipeline_ended(end, spec.notify)

    def _update(self, pipeline_id: str, **values: Any) -> None:
        values["update_time"] = utcnow()
        with self._sessions.begin() as session:
            session.execute(
                update(PipelineRow).where(PipelineRow.pipeline_id == pipeline_id).values(**values)
            )

    def _update_entry(self, entry_id: int, **values: Any) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(PipelineJobRow).where(PipelineJobRow.id == entry_id).values(**values)
            )

    # -- describing -------------------------------------------------------------------------

    def _model(self, row: PipelineRow) -> DescribePipeline:
        spec = CreatePipeline.model_validate(row.spec)
        entries = self._entries(row.pipeline_id)
        made = self._jobs([entry.job_id for entry in entries if entry.job_id])
        status = PipelineStatus(row.status)
        stages = []
        for stage_index, stage in enumerate(spec.stages):
            jobs = [
                self._job_model(stage.jobs[entry.job_index], entry, made.get(entry.job_id or ""))
                for entry in entries
                if entry.stage_index == stage_index
            ]
            stages.append(_stage_model(stage.name, jobs))
        return DescribePipeline(
            pipeline_id=row.pipeline_id,
            owner=row.owner,
            name=row.name,
            status=status,
            status_message=row.status_message,
            create_time=iso_utc(row.create_time) or "",
            update_time=iso_utc(row.update_time) or "",
            end_time=iso_utc(row.end_time),
            parameters=spec.parameters,
            shared_folder=spec.folder,
            template_path=spec.template_path,
            current_stage=None if status.is_final else row.current_stage,
            stages=stages,
            own=True,
            can_stop=not status.is_final,
            can_delete=status.is_final,
            can_rerun=True,
        )

    def _jobs(self, job_ids: list[str]) -> dict[str, JobRow]:
        """The jobs made so far, in one query."""
        if not job_ids:
            return {}
        with self._sessions() as session:
            rows = session.scalars(select(JobRow).where(JobRow.job_id.in_(job_ids)))
            return {row.job_id: row for row in rows}

    @staticmethod
    def _job_model(
        job: PipelineJob, entry: PipelineJobRow, found: JobRow | None
    ) -> DescribePipelineJob:
        request = entry.request
        model = DescribePipelineJob(
            input_path=job.input_path,
            name=job.name,
            flavor=request.get("flavor"),
            parameters=request.get("parameters") or {},
            job_id=entry.job_id,
            status=entry.status,  # type: ignore[arg-type]
            status_message=entry.status_message,
            error=JobErrorInfo.model_validate(entry.error) if entry.error else None,
        )
        if found is None:
            return model
        stopped = found.job_status in (JobStatus.STOPPING, JobStatus.STOPPED)
        return model.model_copy(
            update={
                "status": found.status,
                "status_message": entry.stop_reason
                if stopped and entry.stop_reason
                else found.status_message,
                "error": JobErrorInfo.model_validate(found.error) if found.error else None,
                "cells_completed": found.cells_completed or 0,
                "cells_total": found.cells_total,
            }
        )


_FINAL_JOB = frozenset(status.value for status in JobStatus if status.is_final)
_BROKEN = frozenset({JobStatus.FAILED.value, JobStatus.STOPPED.value})


def _stage_model(name: str, jobs: list[DescribePipelineJob]) -> DescribeStage:
    """A stage's status and sentence, from its jobs'."""
    statuses = {job.status for job in jobs}
    failed = next((job for job in jobs if job.status == JobStatus.FAILED.value), None)
    if failed is not None:
        label = failed.name or failed.input_path
        why = failed.status_message or "it failed"
        return DescribeStage(
            name=name,
            status=StageStatus.FAILED,
            status_message=f"{label!r}: {why}",
            jobs=jobs,
        )
    if statuses == {JobStatus.COMPLETED.value}:
        return DescribeStage(name=name, status=StageStatus.COMPLETED, jobs=jobs)
    if statuses == {SKIPPED}:
        return DescribeStage(
            name=name, status=StageStatus.SKIPPED, status_message=jobs[0].status_message, jobs=jobs
        )
    if statuses == {PENDING}:
        return DescribeStage(name=name, status=StageStatus.PENDING, jobs=jobs)
    if statuses & {"CREATED", "QUEUED", "RUNNING", "STOPPING", PENDING}:
        return DescribeStage(name=name, status=StageStatus.RUNNING, jobs=jobs)
    stopped = next((job for job in jobs if job.status == JobStatus.STOPPED.value), None)
    return DescribeStage(
        name=name,
        status=StageStatus.STOPPED,
        status_message=stopped.status_message if stopped else None,
        jobs=jobs,
    )
