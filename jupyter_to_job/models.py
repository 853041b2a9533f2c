"""Wire models of the job API (mirrored one-to-one by TypeScript ``I*`` interfaces).

Design notes: docs/design/jobs.md, "jupyter_to_job.models".
"""

from __future__ import annotations

import json
import keyword
import re
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

MAX_NAME_LENGTH = 100
MAX_PATH_LENGTH = 1024
MAX_PARAMETERS = 100
MAX_PARAMETERS_BYTES = 64 * 1024
MAX_DEADLINE_SECONDS = 30 * 24 * 3600
MAX_LIST_ITEMS = 100

_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TOKEN = re.compile(r"^[\x21-\x7e]{1,128}$")  # printable ASCII, no spaces
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class EndsAsAJob:
    """For a status enum whose final values are a job's: COMPLETED, FAILED, STOPPED."""

    @property
    def is_final(self) -> bool:
        """True once the job (or pipeline) can change no more."""
        return self in FINAL_STATUSES


class JobStatus(EndsAsAJob, StrEnum):
    """Where a job is in its life.

    CREATED → QUEUED → RUNNING → (STOPPING →) COMPLETED | FAILED | STOPPED.
    """

    CREATED = "CREATED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def is_active(self) -> bool:
        """True while the job holds a process (and possibly a GPU share)."""
        return self in (JobStatus.RUNNING, JobStatus.STOPPING)


FINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED})

OutputFormat = Literal["ipynb", "html"]


def _notebook_and_html() -> list[OutputFormat]:
    return ["ipynb", "html"]


def _notebook_only() -> list[OutputFormat]:
    return ["ipynb"]


class WireModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_relative_notebook_path(value: str) -> str:
    if len(value) > MAX_PATH_LENGTH:
        raise ValueError(f"the notebook path is longer than {MAX_PATH_LENGTH} characters")
    if not value or _CONTROL.search(value):
        raise ValueError("the notebook path is empty or contains control characters")
    if "\\" in value:
        raise ValueError("use / to separate folders in the notebook path")
    path = PurePosixPath(value)
    if path.is_absolute() or value.startswith("~"):
        raise ValueError(
            "the notebook path must be relative to your home folder, such as 'project/train.ipynb'"
        )
    if ".." in path.parts:
        raise ValueError("the notebook path must not contain '..'")
    if path.suffix != ".ipynb" or not path.stem:
        raise ValueError("only notebooks (files ending in .ipynb) can run as jobs")
    return path.as_posix()


def check_relative_folder(
    value: str, what: str, below: str = "your home folder", example: str = "pipelines/x"
) -> str:
    """``value`` as a folder under ``below``, or ValueError with a sentence naming ``what``."""
    if len(value) > MAX_PATH_LENGTH:
        raise ValueError(f"{what} is longer than {MAX_PATH_LENGTH} characters")
    if not value.strip() or _CONTROL.search(value):
        raise ValueError(f"{what} is empty or contains control characters")
    if "\\" in value:
        raise ValueError(f"use / to separate folders in {what}")
    path = PurePosixPath(value)
    if path.is_absolute() or value.startswith("~"):
        raise ValueError(f"{what} must be relative to {below}, such as '{example}'")
    if ".." in path.parts:
        raise ValueError(f"{what} must not contain '..'")
    if path.as_posix() == ".":
        raise ValueError(f"{what} must be a folder below {below}, such as '{example}'")
    return path.as_posix()


def check_short_name(value: str | None, what: str, limit: int) -> str | None:
    """``value`` stripped (None when blank), or ValueError: longer than ``limit``, control
    characters."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if len(value) > limit:
        raise ValueError(f"{what} is longer than {limit} characters")
    if _CONTROL.search(value):
        raise ValueError(f"{what} contains control characters")
    return value


def check_identifier(value: str | None) -> str | None:
    """``value`` when it is a flavor, kernel or job id-like name (or None), else ValueError."""
    if value is not None and not _IDENTIFIER.match(value):
        raise ValueError(
            "use letters, digits, '.', '_' and '-' (at most 64 characters, "
            "starting with a letter or digit)"
        )
    return value


def _check_parameters(value: dict[str, Any]) -> dict[str, Any]:
    if len(value) > MAX_PARAMETERS:
        raise ValueError(f"a job takes at most {MAX_PARAMETERS} parameters")
    for name in value:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(
                f"parameter name {name[:40]!r} is not a valid variable name "
                "(letters, digits and _, not starting with a digit)"
            )
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"parameters must be plain JSON values ({error})") from None
    if len(text.encode()) > MAX_PARAMETERS_BYTES:
        raise ValueError(
            f"the parameters take more than {MAX_PARAMETERS_BYTES // 1024} KiB; "
            "pass large inputs as a file instead"
        )
    return value


NotifyEvent = Literal["completed", "failed", "stopped"]
MAX_WEBHOOK_URL_LENGTH = 2048
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _all_events() -> list[NotifyEvent]:
    return ["completed", "failed", "stopped"]


def check_webhook_url(value: str | None) -> str | None:
    """A webhook address must be https (http only to this machine, for tests and tunnels)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > MAX_WEBHOOK_URL_LENGTH or _CONTROL.search(value):
        raise ValueError(
            f"the webhook URL must be at most {MAX_WEBHOOK_URL_LENGTH} characters, "
            "without spaces or control characters"
        )
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or not host or parts.username or parts.password:
        raise ValueError(
            "the webhook URL is not a valid address; write it as 'https://example.org/hook', "
            "without a user name or password in it"
        )
    if parts.scheme == "https" or (parts.scheme == "http" and host in _LOCAL_HOSTS):
        return value
    raise ValueError(
        "the webhook URL must start with https:// (http:// is allowed only to localhost), "
        "so that the job's details are not sent in the clear"
    )


class JobNotify(WireModel):
    """Whom to tell when a job ends: by mail to its owner, by a signed webhook, or both."""

    email: bool = Field(default=False, description="Mail the owner when the job ends.")
    webhook_url: str | None = Field(
        default=None,
        description="POST a signed JSON summary here when the job ends: https only "
        "(http only to localhost).",
    )
    on: list[NotifyEvent] = Field(
        default_factory=_all_events,
        description="Which endings to tell: completed, failed, stopped.",
    )

    @field_validator("webhook_url")
    @classmethod
    def _webhook(cls, value: str | None) -> str | None:
        return check_webhook_url(value)

    @field_validator("on")
    @classmethod
    def _events(cls, value: list[NotifyEvent]) -> list[NotifyEvent]:
        return [event for event in _all_events() if event in value]

    def wants(self, status: JobStatus) -> bool:
        """True when a job ending in ``status`` is to be told to someone."""
        return (self.email or self.webhook_url is not None) and status.value.lower() in self.on


class NotificationSettings(WireModel):
    """``GET/PUT api/notification-settings``: the caller's default for jobs without ``notify``.

    The webhook secret is shown once, in the answer to the PUT that creates it (or to a PUT
    with ``rotate_secret``); afterwards only ``webhook_secret_set`` says one exists.
    """

    default: JobNotify = Field(
        default_factory=JobNotify,
        description="Used by jobs created without 'notify'; nothing is sent by default.",
    )
    rotate_secret: bool = Field(
        default=False, description="PUT only: make a new webhook secret (the old one stops)."
    )
    webhook_secret_set: bool = Field(
        default=False, description="Read only: a webhook secret exists for the caller."
    )
    webhook_secret: str | None = Field(
        default=None,
        description="Read only, shown once: the secret the webhooks' signatures use.",
    )


MAX_JOB_RETRIES = 100
"""The most retries a request may ask for at all (``c.JobManager.max_job_retries`` is lower)."""


class JobCheckpoint(WireModel):
    """A checkpoint folder, and how often a job killed from outside is started again.

    The folder is relative to the notebook's folder (the owner's home in the job service);
    the runner finds its absolute path in ``$JUPYTER_TO_JOB_CHECKPOINT_DIR`` and the attempt
    number (from 1) in ``$JUPYTER_TO_JOB_ATTEMPT``.
    """

    folder: str = Field(
        description="Where the job keeps its checkpoints, relative to the notebook's folder: "
        "'checkpoints/train'."
    )
    retries: Annotated[int, Field(ge=0, le=MAX_JOB_RETRIES)] = Field(
        default=0,
        description="Start the job again this many times at most when it is killed from "
        "outside (not when it fails by itself or is stopped).",
    )

    @field_validator("folder")
    @classmethod
    def _folder(cls, value: str) -> str:
        return check_relative_folder(
            value, "the checkpoint folder", "the notebook's folder", "checkpoints/train"
        )


class NotebookJobChecks(WireModel):
    """The checks of a notebook job's own fields, for CreateJob and a pipeline's jobs (each
    declares the fields, in its own words): a relative notebook path, a short name, flavor
    and kernel ids, and the parameters' limits."""

    @field_validator("input_path", check_fields=False)
    @classmethod
    def _relative_notebook(cls, value: str) -> str:
        return _check_relative_notebook_path(value)

    @field_validator("name", check_fields=False)
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return check_short_name(value, "the job name", MAX_NAME_LENGTH)

    @field_validator("flavor", "kernel_name", check_fields=False)
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        return check_identifier(value)

    @field_validator("parameters", check_fields=False)
    @classmethod
    def _parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_parameters(value)


class CreateJob(NotebookJobChecks):
    """A request to run a saved notebook as a job."""

    input_path: str = Field(
        description="The notebook, relative to the user's root folder: 'project/train.ipynb'."
    )
    name: str | None = Field(
        default=None,
        description="A name for the job list; defaults to the notebook's name.",
    )
    flavor: str | None = Field(
        default=None,
        description="The job flavor (GPU share and resources) to run on; None: the default.",
    )
    parameters: dict[str, JsonValue] = Field(
        default_factory=dict,
        description=(
            "Values injected after the cell tagged 'parameters', as papermill does; "
            "JSON values only, at most 100 names and 64 KiB."
        ),
    )
    deadline_seconds: Annotated[int, Field(ge=1, le=MAX_DEADLINE_SECONDS)] | None = Field(
        default=None, description="Stop the whole job (and fail it) after this many seconds."
    )
    cell_timeout_seconds: Annotated[int, Field(ge=1, le=MAX_DEADLINE_SECONDS)] | None = Field(
        default=None, description="Fail the job when one cell runs longer than this."
    )
    output_formats: list[OutputFormat] = Field(
        default_factory=_notebook_and_html,
        description="Files to produce; the executed notebook (ipynb) is always kept.",
    )
    idempotency_token: str | None = Field(
        default=None,
        description=(
            "A client-chosen key: a second create with the same token (same owner) returns the "
            "first job instead of starting another."
        ),
    )
    kernel_name: str | None = Field(
        default=None, description="The kernel to run with; defaults to the notebook's kernel."
    )
    rerun_of: str | None = Field(
        default=None,
        description=(
            "The job this one runs again (the Jobs panel's Rerun); only one's own jobs can be "
            "rerun: another user's is a 403 that names its owner. A rerun sent without a "
            "notebook runs the notebook snapshot of that job, as it ran then."
        ),
    )
    notify: JobNotify | None = Field(
        default=None,
        description="Whom to tell when the job ends; None: the owner's default "
        "(api/notification-settings).",
    )
    checkpoint: JobCheckpoint | None = Field(
        default=None,
        description="A checkpoint folder and retries: a job killed from outside starts again "
        "from it; None: no checkpoint, never started again.",
    )

    @field_validator("rerun_of")
    @classmethod
    def _rerun_of(cls, value: str | None) -> str | None:
        return check_identifier(value)

    @field_validator("output_formats")
    @classmethod
    def _formats(cls, value: list[OutputFormat]) -> list[OutputFormat]:
        wanted = {"ipynb", *value}
        return [fmt for fmt in _notebook_and_html() if fmt in wanted]

    @field_validator("idempotency_token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        if value is not None and not _TOKEN.match(value):
            raise ValueError("the idempotency token must be 1 to 128 printable ASCII characters")
        return value

    @model_validator(mode="after")
    def _default_name(self) -> CreateJob:
        if self.name is None:
            self.name = PurePosixPath(self.input_path).stem[:MAX_NAME_LENGTH]
        return self


class JobErrorInfo(WireModel):
    """Why a job failed, as the notebook reported it."""

    cell_index: int | None = Field(
        default=None, description="0-based index of the failing cell in the executed notebook."
    )
    ename: str
    evalue: str
    traceback: str = Field(default="", description="Plain text, without terminal colours.")


class JobOutput(WireModel):
    """One file a job produced."""

    name: str = Field(description="The name to download it under: 'train-3f2a1b4c.ipynb'.")
    format: OutputFormat
    size: int


class JobGPU(WireModel):
    """The GPU share a job holds (or held)."""

    description: str = Field(description="In words: '1/4 of an RTX 4090, 6 GiB'.")
    device_ids: list[str] = Field(default_factory=list)


class DescribeJob(WireModel):
    """Everything the job list and the job page show about one job."""

    job_id: str
    owner: str
    name: str
    flavor: str | None = None
    status: JobStatus
    status_message: str | None = Field(
        default=None, description="A sentence for people: why it is queued, failed or stopped."
    )
    create_time: str
    update_time: str
    start_time: str | None = None
    end_time: str | None = None
    exit_code: int | None = Field(default=None, description="The job process's exit code.")
    error: JobErrorInfo | None = None
    cells_completed: int = 0
    cells_total: int | None = Field(default=None, description="Code cells to run; None: unknown.")
    current_cell: int | None = Field(
        default=None, description="Index of the cell running now (executed-notebook numbering)."
    )
    queue_position: int | None = Field(
        default=None, description="1 for the next job to start; None unless QUEUED."
    )
    outputs: list[JobOutput] = Field(default_factory=list)
    log_size: int = Field(default=0, description="Bytes of log kept so far.")
    input_path: str
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    deadline_seconds: int | None = None
    cell_timeout_seconds: int | None = None
    output_formats: list[OutputFormat] = Field(default_factory=_notebook_only)
    kernel_name: str | None = None
    gpu: JobGPU | None = None
    nodes: int = Field(
        default=1,
        description="The pods the job runs as, one per node (1 but for a flavor on several "
        "nodes, whose log lines start with '[rank N] ').",
    )
    attempt: int = Field(default=1, description="The run under way or the last one (from 1).")
    max_attempts: int = Field(
        default=1, description="Runs allowed in all: 1 plus the checkpoint's retries."
    )
    checkpoint_folder: str | None = Field(
        default=None, description="The checkpoint folder asked for, relative to the notebook's."
    )
    pipeline_id: str | None = Field(
        default=None, description="The pipeline whose stage started this job; None: none."
    )
    schedule_id: str | None = Field(
        default=None, description="The schedule whose run started this job; None: none."
    )
    rerun_of: str | None = Field(
        default=None,
        description="The job this one runs again (Rerun), whose notebook snapshot it ran.",
    )
    flavor_title: str | None = Field(
        default=None,
        description="The flavor's title for people: 'One whole GPU'; None: no such flavor now.",
    )
    own: bool = Field(
        default=False, description="True when the job is the caller's own (computed per caller)."
    )
    can_stop: bool = Field(
        default=False,
        description="The caller may stop it while it is unfinished: its owner or a hub admin, "
        "not an instructor who only reads it.",
    )
    can_delete: bool = Field(
        default=False, description="The caller may delete it once it is finished (as can_stop)."
    )
    can_rerun: bool = Field(
        default=False,
        description="The caller may run it again: only its owner, from their own files.",
    )


class CreateJobResponse(WireModel):
    """The answer to a create: the job, and whether this request created it."""

    job_id: str
    created: bool = Field(
        description="False when an earlier request with the same idempotency token made the job."
    )
    job: DescribeJob


SortField = Literal["create_time", "name", "status"]
SortOrder = Literal["asc", "desc"]


class ListJobsQuery(WireModel):
    """Filters, order and page of a job listing."""

    owner: str | None = Field(default=None, description="Only this user's jobs; None: all.")
    status: JobStatus | None = None
    name: str | None = Field(
        default=None, max_length=MAX_NAME_LENGTH, description="Case-insensitive part of the name."
    )
    sort_by: SortField = "create_time"
    sort_order: SortOrder = "desc"
    max_items: int = Field(default=50, ge=1, le=MAX_LIST_ITEMS)
    next_token: str | None = Field(
        default=None, max_length=1024, description="Opaque; from the previous page."
    )


class ListJobsResponse(WireModel):
    jobs: list[DescribeJob]
    next_token: str | None = Field(default=None, description="None on the last page.")
    total_count: int = Field(description="Jobs matching the filters, over all pages.")


class JobLogChunk(WireModel):
    """A piece of a job's log.

    ``offset`` and ``next_offset`` count bytes; pass ``next_offset`` back to read
    on. ``data`` always ends on a whole UTF-8 character.
    """

    job_id: str
    offset: int
    next_offset: int
    size: int = Field(description="Bytes in the whole log when this chunk was read.")
    data: str
    complete: bool = Field(
        description="True when the job has finished and this chunk reaches the end of its log."
    )


class UpdateJob(WireModel):
    """A change to a job: only stopping it, as ``{"status": "STOPPED"}``."""

    status: Literal["STOPPED"] = Field(
        description="STOPPED: stop a queued job at once, a running one after its current cell."
    )


class JobFlavorInfo(WireModel):
    """One job flavor as the caller sees it in the Run as Job dialog."""

    id: str
    title: str
    description: str = ""
    gpu: str | None = Field(
        default=None, description="The GPU share in words: '1/4 of a GPU, 6 GiB'; None: no GPU."
    )
    resources: str = Field(default="", description="CPU and memory in words: '2 CPUs, 4 GiB'.")
    available: bool
    reason: str = Field(description="Why the caller may use it ('through ML101') or not.")
    default: bool = Field(default=False, description="Used when a job names no flavor.")
    default_deadline_seconds: int
    max_deadline_seconds: int
    max_running_per_user: int
    running: int = Field(default=0, description="Jobs running on this flavor now (everyone's).")
    queued: int = Field(default=0, description="Jobs waiting for this flavor (everyone's).")
    budget: str | None = Field(
        default=None,
        description="The GPU-hours the caller has left on it: '4.5 of your 6 GPU-hours left "
        "this week (renews Monday 00:00, Europe/Zurich)'; None: no budget applies.",
    )
    budget_pattern: str | None = Field(
        default=None,
        description="`budget` with each moment it names as '{0}', '{1}' ('... left this week "
        "(renews {0})'), for a page to tell `budget_moments` in its reader's own zone.",
    )
    budget_moments: list[str] = Field(
        default_factory=list,
        description="The moments `budget_pattern` names, in order (ISO 8601, UTC).",
    )
    budget_exhausted: bool = Field(
        default=False, description="True when no GPU-hours are left: a job would be refused."
    )
    starts_now: bool | None = Field(
        default=None,
        description="Whether a job of the caller's would start now (True) or wait in the queue "
        "(False), as things stand; None: not known here.",
    )
    forecast: str | None = Field(
        default=None,
        description="Why it would start now or wait, in a sentence: 'Starts now on a free GPU.', "
        "'Your own server (...) holds the GPU this job needs, ...'.",
    )


class ListFlavorsResponse(WireModel):
    flavors: list[JobFlavorInfo]


class JobFeatures(WireModel):
    """What this job back end supports, so the UI hides what it cannot honour."""

    follow_logs: bool = True
    html_output: bool = True
    deadline: bool = True
    parameters: bool = True
    stop: bool = True
    delete: bool = True
    idempotency_token: bool = True
    queue: bool = True
    gpu_flavors: bool = False
    save_outputs: bool = False
    """The server extension can write an output into the user's files."""
    notify_email: bool = False
    """The job service can mail a job's owner when it ends (``CreateJob.notify``)."""


class JobServiceConfig(WireModel):
    """``GET api/config``: how jobs run here and what the back end supports."""

    mode: Literal["hub", "standalone"]
    version: str
    features: JobFeatures
    max_notebook_bytes: int


class SaveOutput(WireModel):
    """Write a job's output into the user's files (server extension only)."""

    path: str = Field(description="Where, relative to the server's root: 'results/train.ipynb'.")
    overwrite: bool = False


class SavedOutput(WireModel):
    path: str
    size: int


class NotebookParameter(WireModel):
    """A variable of a notebook's cell tagged 'parameters', as papermill infers it."""

    name: str
    inferred_type_name: str
    default: str = Field(description="The default as written in the cell: '0.01'.")
    help: str = ""


class NotebookParameters(WireModel):
    path: str
    parameters: list[NotebookParameter]


class ServerSession(WireModel):
    """The GPU share and session end of the user's server, for the Lab status bar."""

    profile: str | None = None
    gpu_share: str | None = None
    session_end: str | None = None
    class_end: str | None = None


class FieldProblem(WireModel):
    field: str
    message: str


class ErrorResponse(WireModel):
    """Every 4xx and 5xx answer of the job API."""

    message: str = Field(description="A sentence for people, with what to do next.")
    reason: str = Field(description="A short machine label: 'not-found', 'invalid', 'full'...")
    errors: list[FieldProblem] | None = Field(
        default=None, description="For a 400 on a request body: each field that is wrong."
    )


WIRE_MODELS: tuple[type[BaseModel], ...] = (
    CreateJob,
    CreateJobResponse,
    DescribeJob,
    ErrorResponse,
    FieldProblem,
    JobCheckpoint,
    JobErrorInfo,
    JobFeatures,
    JobFlavorInfo,
    JobGPU,
    JobLogChunk,
    JobNotify,
    JobOutput,
    JobServiceConfig,
    ListFlavorsResponse,
    ListJobsQuery,
    ListJobsResponse,
    NotebookParameter,
    NotebookParameters,
    NotificationSettings,
    SaveOutput,
    SavedOutput,
    ServerSession,
    UpdateJob,
)


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON schema of every wire model, by model name (for drift checks)."""
    schemas: dict[str, dict[str, Any]] = {
        model.__name__: model.model_json_schema() for model in WIRE_MODELS
    }
    schemas["JobStatus"] = {
        "title": "JobStatus",
        "type": "string",
        "enum": [status.value for status in JobStatus],
    }
    return schemas
