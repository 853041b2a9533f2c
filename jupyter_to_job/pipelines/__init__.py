"""Pipelines: stages of notebook jobs, each stage's jobs in parallel, the stages in turn.

Laid out as the jobs are: ``models`` (wire models), ``errors``, ``store`` (tables and their
reads and writes), ``describe`` and ``engine`` (:class:`Pipelines`); docs/jobs-pipelines.md
tells how a pipeline runs.
"""

from .engine import PIPELINE_ID_VARIABLE, PIPELINE_STAGE_VARIABLE, Admit, Pipelines, home_of
from .errors import PipelineNotDeletable, PipelineNotFound, PipelineNotStoppable
from .models import (
    MAX_JOBS_PER_STAGE,
    MAX_PIPELINE_NAME,
    MAX_STAGE_NAME,
    MAX_STAGES,
    CreatePipeline,
    DescribePipeline,
    DescribePipelineJob,
    DescribeStage,
    ListPipelinesResponse,
    PipelineJob,
    PipelineJobStatus,
    PipelineStage,
    PipelineStatus,
    StageStatus,
    UpdatePipeline,
)

__all__ = [
    "MAX_JOBS_PER_STAGE",
    "MAX_PIPELINE_NAME",
    "MAX_STAGES",
    "MAX_STAGE_NAME",
    "PIPELINE_ID_VARIABLE",
    "PIPELINE_STAGE_VARIABLE",
    "Admit",
    "CreatePipeline",
    "DescribePipeline",
    "DescribePipelineJob",
    "DescribeStage",
    "ListPipelinesResponse",
    "PipelineJob",
    "PipelineJobStatus",
    "PipelineNotDeletable",
    "PipelineNotFound",
    "PipelineNotStoppable",
    "PipelineStage",
    "PipelineStatus",
    "Pipelines",
    "StageStatus",
    "UpdatePipeline",
    "home_of",
]
