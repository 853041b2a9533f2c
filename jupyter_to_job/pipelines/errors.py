"""Errors of the pipeline API, each a sentence with what to do next (mapped to HTTP as job
errors are)."""

from __future__ import annotations

from ..errors import JobError


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
