"""Errors of the pipeline API, each a sentence with what to do next (mapped to HTTP as job
errors are)."""

from __future__ import annotations

from ..errors import JobNotDeletable, JobNotStoppable, NotFound


class PipelineNotFound(NotFound):
    def __init__(self, pipeline_id: str):
        super().__init__("pipeline", pipeline_id)


class PipelineNotDeletable(JobNotDeletable):
    """The pipeline still runs (409 ``not-finished``)."""


class PipelineNotStoppable(JobNotStoppable):
    """The pipeline has already finished (409 ``already-finished``)."""
