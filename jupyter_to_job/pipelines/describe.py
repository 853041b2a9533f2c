"""A pipeline as its owner sees it (:class:`DescribePipeline`), from its rows and its jobs'."""

from __future__ import annotations

from ..describe import iso_utc
from ..models import JobErrorInfo, JobStatus
from ..store import JobRow
from .models import (
    PENDING,
    SKIPPED,
    CreatePipeline,
    DescribePipeline,
    DescribePipelineJob,
    DescribeStage,
    PipelineJob,
    PipelineStatus,
    StageStatus,
)
from .store import PipelineJobRow, PipelineRow


def describe_pipeline(
    row: PipelineRow, entries: list[PipelineJobRow], made: dict[str, JobRow]
) -> DescribePipeline:
    """The pipeline ``row`` with its job ``entries`` and the jobs ``made`` so far (by id)."""
    spec = CreatePipeline.model_validate(row.spec)
    status = PipelineStatus(row.status)
    stages = []
    for stage_index, stage in enumerate(spec.stages):
        jobs = [
            _job_model(stage.jobs[entry.job_index], entry, made.get(entry.job_id or ""))
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
