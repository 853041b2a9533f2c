"""Wire models of the pipeline API (mirrored by ``pipelines/pipelineModels.ts``): a pipeline's
request, its stages and jobs, and how it stands."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, field_validator

from ..models import (
    MAX_DEADLINE_SECONDS,
    CreateJob,
    EndsAsAJob,
    JobErrorInfo,
    JobNotify,
    NotebookJobChecks,
    WireModel,
    _check_parameters,
    check_relative_folder,
    check_short_name,
)

MAX_STAGES = 10
MAX_JOBS_PER_STAGE = 10
MAX_STAGE_NAME = 100
MAX_PIPELINE_NAME = 255


def slug(name: str) -> str:
    """A folder name for ``name``: lower case letters, digits, ``-`` and ``_``."""
    text = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    return text[:64] or "pipeline"


def _required_name(value: str, what: str, limit: int, example: str) -> str:
    """The stage's or pipeline's (``what``) name, checked; a sentence when it is blank."""
    name = check_short_name(value, f"the {what} name", limit)
    if name is None:
        raise ValueError(f"give the {what} a name, such as {example!r}")
    return name


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
        return _required_name(value, "stage", MAX_STAGE_NAME, "train")

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
    """Stages of notebook jobs, run one after another (docs/jobs-pipelines.md)."""

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
        return _required_name(value, "pipeline", MAX_PIPELINE_NAME, "Train and evaluate")

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


class PipelineStatus(EndsAsAJob, StrEnum):
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


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
