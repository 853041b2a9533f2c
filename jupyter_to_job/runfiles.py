"""The files of one job directory, shared by the runner and every executor.

Design notes: docs/design/jobs.md, "jupyter_to_job.runfiles".
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from .models import JobErrorInfo, JobStatus, OutputFormat

SPEC_VERSION = 1
STATUS_VERSION = 1

# Runner exit codes (also the job's exit_code when the runner reports itself).
EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_INVALID_JOB = 2
EXIT_STOPPED = 143  # 128 + SIGTERM, the shell's convention for "terminated"

# In a Kubernetes pod the job directory is not the service's, so the runner also reports
# its final status through the pod: as the container's termination message (at most
# 4 KiB) and as the log's last line, which starts with STATUS_MARKER. The kubelet's
# FallbackToLogsOnError takes at most the last 2 KiB of the log, hence the smaller limit.
PIPELINE_DIR_VARIABLE = "JUPYTER_TO_JOB_PIPELINE_DIR"
"""A pipeline job's shared folder (:mod:`jupyter_to_job.pipelines`): absolute, or relative to
the kernel's folder (a pod, where the service does not know the mount path); the runner makes
it and gives the kernel its absolute path."""

STATUS_MARKER = "[job] final status: "
COMPACT_STATUS_BYTES = 2000


@dataclass(frozen=True)
class JobFiles:
    """Paths inside one job directory."""

    directory: Path

    @property
    def spec(self) -> Path:
        return self.directory / "job.json"

    @property
    def input_notebook(self) -> Path:
        return self.directory / "input.ipynb"

    @property
    def status(self) -> Path:
        return self.directory / "status.json"

    @property
    def work(self) -> Path:
        return self.directory / "work"

    def output(self, fmt: str) -> Path:
        """``output.ipynb`` or ``output.html``."""
        if fmt not in ("ipynb", "html"):
            raise ValueError(f"unknown output format {fmt!r}")
        return self.directory / f"output.{fmt}"


class RunnerSpec(BaseModel):
    """``job.json``: what the runner executes and how."""

    model_config = ConfigDict(extra="ignore")

    version: int = SPEC_VERSION
    job_id: str
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    kernel_name: str | None = None
    cell_timeout_seconds: int | None = None
    output_formats: list[OutputFormat] = ["ipynb"]  # pydantic copies mutable defaults
    working_dir: str | None = None
    """Absolute path for the kernel's working directory; None: ``work/`` in the job dir."""
    kernel_startup_timeout: int = 60
    autosave_seconds: float = 30.0
    """Save the output notebook this often while a long cell runs (0: only between cells)."""
    max_log_bytes: int = 256 * 1024 * 1024
    """Stop copying cell output to the log beyond this; the output notebook keeps it all."""


class RunnerStatus(BaseModel):
    """``status.json``: the runner's progress and, at the end, its result."""

    model_config = ConfigDict(extra="ignore")

    version: int = STATUS_VERSION
    job_id: str
    state: JobStatus
    message: str | None = None
    runner_pid: int | None = None
    kernel_pid: int | None = None
    kernel_name: str | None = None
    cells_total: int | None = None
    cells_completed: int = 0
    current_cell: int | None = None
    start_time: str | None = None
    update_time: str | None = None
    end_time: str | None = None
    exit_code: int | None = None
    error: JobErrorInfo | None = None

    @property
    def final(self) -> bool:
        return self.state.is_final


def compact_status(status: RunnerStatus, limit: int = COMPACT_STATUS_BYTES) -> str:
    """``status`` as one line of JSON of at most ``limit`` bytes, for reporting through a pod.

    The traceback is left out (the log has it) and long texts are shortened.
    """
    error = status.error.model_copy(update={"traceback": ""}) if status.error else None
    for keep in (None, 600, 200, 60):
        compact = status.model_copy(
            update={
                "message": _cut(status.message, keep),
                "error": error.model_copy(update={"evalue": _cut(error.evalue, keep)})
                if error
                else None,
            }
        )
        text = compact.model_dump_json(exclude_defaults=True, exclude={"runner_pid", "kernel_pid"})
        if len(text.encode("utf-8")) <= limit:
            return text
    bare = RunnerStatus(job_id=status.job_id, state=status.state, exit_code=status.exit_code)
    return bare.model_dump_json(exclude_defaults=True)


def _cut(text: str | None, keep: int | None) -> str | None:
    if text is None or keep is None or len(text) <= keep:
        return text
    return text[:keep] + "..."


def parse_compact_status(text: str) -> RunnerStatus | None:
    """The status in a termination message or final-status log line; None if there is none.

    ``text`` may be the JSON itself, or log lines (the kubelet's fallback to the log's
    tail) whose last final-status line is read.
    """
    text = text.strip()
    if not text.startswith("{"):
        lines = [line for line in text.splitlines() if line.startswith(STATUS_MARKER)]
        if not lines:
            return None
        text = lines[-1][len(STATUS_MARKER) :]
    try:
        return RunnerStatus.model_validate_json(text)
    except ValueError:
        return None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` so that readers see the old file or the new one, never half of one."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o640)  # mkstemp makes 0600; outputs are read by the service's group
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_model(path: Path, model: BaseModel) -> None:
    atomic_write_text(path, model.model_dump_json(indent=1) + "\n")


def read_spec(files: JobFiles) -> RunnerSpec:
    return RunnerSpec.model_validate_json(files.spec.read_text(encoding="utf-8"))


MAX_STATUS_BYTES = 1024 * 1024


class NotAJobFile(OSError):
    """A path in a job's folder that is not a plain file the job wrote there."""


def open_job_file(path: Path) -> BinaryIO:
    """Open a file that a job wrote, for reading by the service.

    A job may run as its owner, who then owns its folder and can put anything there: a
    symbolic link to the hub's cookie secret, a hard link, a FIFO that never answers. The
    service (often root) therefore opens only regular files with a single link, never
    following a symbolic link, and without blocking on a FIFO.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise NotAJobFile(errno.EPERM, "not a plain file written by the job", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def job_file_size(path: Path) -> int | None:
    """The size of a plain file in a job's folder; None when missing or not a plain file."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def read_status(files: JobFiles) -> RunnerStatus | None:
    """The runner's last status, or None when it has written none (or it is unreadable)."""
    try:
        with open_job_file(files.status) as stream:
            text = stream.read(MAX_STATUS_BYTES + 1)
        if len(text) > MAX_STATUS_BYTES:
            return None
        data: Any = json.loads(text.decode("utf-8"))
        return RunnerStatus.model_validate(data)
    except (OSError, ValueError, RecursionError):  # the job's own file: it may write anything
        return None
