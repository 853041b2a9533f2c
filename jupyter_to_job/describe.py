"""Stored jobs as the API shows them: :class:`DescribeJob` and the job's output files."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import cast

from .models import DescribeJob, JobErrorInfo, JobGPU, JobOutput, OutputFormat
from .runfiles import JobFiles, job_file_size
from .store import JobAttemptsRow, JobRow


def iso_utc(moment: datetime | None) -> str | None:
    """``2024-05-06T10:15:00.123Z`` (the wire format of every time)."""
    if moment is None:
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def job_outputs(row: JobRow, files: JobFiles) -> list[tuple[JobOutput, Path]]:
    """The outputs written so far, named for download: ``train-3f2a1b4c.ipynb``."""
    stem = PurePosixPath(row.input_path).stem
    found = []
    for fmt in row.output_formats or ["ipynb"]:
        path = files.output(fmt)
        size = job_file_size(path)
        if size is None:
            continue
        name = f"{stem}-{row.job_id[:8]}.{fmt}"
        found.append((JobOutput(name=name, format=cast(OutputFormat, fmt), size=size), path))
    return found


# What a job's description shows as its row keeps it (the rest is converted below).
_AS_STORED = (
    "job_id",
    "owner",
    "name",
    "flavor",
    "status_message",
    "exit_code",
    "cells_total",
    "current_cell",
    "input_path",
    "deadline_seconds",
    "cell_timeout_seconds",
    "kernel_name",
    "pipeline_id",
    "schedule_id",
    "rerun_of",
)


def describe_job(
    row: JobRow,
    files: JobFiles,
    *,
    log_size: int,
    queue_position: int | None,
    attempts: JobAttemptsRow | None = None,
) -> DescribeJob:
    gpu = None
    if row.gpu:
        gpu = JobGPU(
            description=row.gpu.get("description", ""),
            device_ids=list(row.gpu.get("device_ids", [])),
        )
    return DescribeJob(
        **{field: getattr(row, field) for field in _AS_STORED},
        status=row.job_status,
        create_time=iso_utc(row.create_time) or "",
        update_time=iso_utc(row.update_time) or "",
        start_time=iso_utc(row.start_time),
        end_time=iso_utc(row.end_time),
        error=JobErrorInfo.model_validate(row.error) if row.error else None,
        cells_completed=row.cells_completed or 0,
        queue_position=queue_position,
        outputs=[output for output, _ in job_outputs(row, files)],
        log_size=log_size,
        parameters=row.parameters or {},
        output_formats=cast(list[OutputFormat], row.output_formats or ["ipynb"]),
        gpu=gpu,
        nodes=int((row.gpu or {}).get("nodes") or 1),
        attempt=attempts.attempt if attempts is not None else 1,
        max_attempts=attempts.max_attempts if attempts is not None else 1,
        checkpoint_folder=attempts.checkpoint_folder if attempts is not None else None,
    )
