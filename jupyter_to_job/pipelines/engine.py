"""The pipeline engine: :class:`Pipelines` keeps pipelines and runs their stages through the
job manager, one stage after another (how and why: docs/jobs-pipelines.md)."""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from traitlets import Float, Instance
from traitlets.config import LoggingConfigurable

from ..errors import JobError
from ..executors import LocalExecutor
from ..job_admission import JobTicket
from ..manager import JobManager
from ..models import CreateJob, JobErrorInfo, JobNotify, JobStatus
from ..runfiles import PIPELINE_DIR_VARIABLE
from ..snapshot import notebook_snapshot
from ..store import JobRow, utcnow
from .describe import describe_pipeline
from .errors import PipelineNotDeletable, PipelineNotStoppable
from .models import (
    MAX_STAGES,
    PENDING,
    SKIPPED,
    CreatePipeline,
    DescribePipeline,
    PipelineStatus,
)
from .store import PipelineJobRow, PipelineRow, PipelineStore

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


def _first_lower(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


class Pipelines(LoggingConfigurable):
    """Keeps pipelines and runs their stages through the job manager (docs/jobs-pipelines.md)."""

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
        self.store = PipelineStore(manager.store.engine)
        self._lock = asyncio.Lock()
        self._task: asyncio.Future[None] | None = None
        self._follow_ups: set[asyncio.Future[None]] = set()
        self.folder = Path(manager.root_dir) / "pipelines"
        self._listening = False
        self._closed = True

    # -- lifecycle ------------------------------------------------------------------------

    def create_tables(self) -> None:
        self.store.create_tables(PipelineRow.__table__)  # type: ignore[arg-type]

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
        for pipeline_id in self.store.unfinished():
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
        self.store.add(row, entries)
        self.log.info("Pipeline %s (%r) of %s created", pipeline_id, request.name, owner)
        await self.advance(pipeline_id)
        return self.describe(pipeline_id)

    def describe(self, pipeline_id: str, *, owner: str | None = None) -> DescribePipeline:
        """The pipeline ``pipeline_id``; with ``owner``, only if it is theirs."""
        return self._model(self.store.get(pipeline_id, owner))

    def list_pipelines(self, owner: str) -> list[DescribePipeline]:
        """``owner``'s pipelines, newest first."""
        return [self._model(row) for row in self.store.of_owner(owner)]

    async def stop(self, pipeline_id: str, *, owner: str | None = None) -> DescribePipeline:
        """Stop the running jobs and skip the stages not started; the pipeline is STOPPING
        until its running jobs have stopped, then STOPPED."""
        async with self._lock:
            row = self.store.get(pipeline_id, owner)
            status = PipelineStatus(row.status)
            if status.is_final:
                raise PipelineNotStoppable(
                    f"The pipeline {row.name!r} has already finished ({status.value.lower()}); "
                    "there is nothing to stop."
                )
            if status is PipelineStatus.RUNNING:
                self.store.update(
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
        row = self.store.get(pipeline_id, owner)
        if not PipelineStatus(row.status).is_final:
            raise PipelineNotDeletable(
                f"The pipeline {row.name!r} is still {row.status.lower()}; stop it first, "
                "then delete it."
            )
        self.store.delete(pipeline_id)
        shutil.rmtree(self.folder / pipeline_id, ignore_errors=True)

    def refusal(self, pipeline_id: str) -> str | None:
        """Why a job of the pipeline was refused outright by the admission (a grant that
        expired, a flavor no longer the owner's); None when none was."""
        for entry in self.store.entries(pipeline_id):
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
            row = self.store.find(pipeline_id)
            if row is None:
                return
            status = PipelineStatus(row.status)
            entries = self.store.entries(pipeline_id)
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
                entries = self.store.entries(pipeline_id)
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
            self.store.update(pipeline_id, current_stage=stage + 1)
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
                    self.store.update_entry(entry.id, **values)
                    entry.status, entry.status_message = values["status"], values["status_message"]
                continue
            if job.status != entry.status:
                self.store.update_entry(entry.id, status=job.status)
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
                self.store.update_entry(
                    entry.id,
                    status=JobStatus.FAILED.value,
                    status_message=sentence,
                    error=JobErrorInfo(ename="JobRefused", evalue=message).model_dump(),
                )
                self.log.warning("Pipeline %s: %s", row.pipeline_id, sentence)
                continue
            self.store.update_entry(
                entry.id, job_id=created.job_id, status=created.job.status.value
            )

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
        for entry in self.store.entries(pipeline_id):
            if entry.status == PENDING:
                self.store.update_entry(entry.id, status=SKIPPED, status_message=skip_reason)
                continue
            if entry.job_id is None or entry.status in _FINAL_JOB:
                continue
            self.store.update_entry(entry.id, stop_reason=stop_reason)
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
        if self.store.finish(pipeline_id, values):
            self._notify(pipeline_id)

    def _notify(self, pipeline_id: str) -> None:
        row = self.store.find(pipeline_id)
        if row is None or row.end_time is None:
            return
        spec = CreatePipeline.model_validate(row.spec)
        self.manager.notifier.pipeline_ended(row, spec.notify)

    # -- describing -------------------------------------------------------------------------

    def _model(self, row: PipelineRow) -> DescribePipeline:
        entries = self.store.entries(row.pipeline_id)
        made = self.store.jobs([entry.job_id for entry in entries if entry.job_id])
        return describe_pipeline(row, entries, made)


_FINAL_JOB = frozenset(status.value for status in JobStatus if status.is_final)
_BROKEN = frozenset({JobStatus.FAILED.value, JobStatus.STOPPED.value})
