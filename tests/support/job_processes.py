"""Job runners and kernels a test session started and left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from jupyter_to_job.runfiles import JobFiles, read_status

SESSION_START = time.time()


def kill_leftovers(root: Path) -> None:
    """Kill runners and kernels this session started that are still alive."""
    kill_job_processes(root.glob("jobs/*/status.json"))


def kill_job_processes(status_files: Iterable[Path]) -> None:
    """Kill the runner and kernel each status file names, if this session started them."""
    for status_file in status_files:
        status = read_status(JobFiles(status_file.parent))
        if status is None:
            continue
        for pid in (status.runner_pid, status.kernel_pid):
            if pid is None:
                continue
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if psutil.Process(pid).create_time() >= SESSION_START - 1:
                    os.killpg(pid, signal.SIGKILL)
