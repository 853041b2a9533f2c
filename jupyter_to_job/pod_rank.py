"""What the runner in a Kubernetes pod learns of its place in the job: its attempt, counted
in the job's checkpoint folder, and its rank among the pods of a job on several nodes (the
Job sets ``RANK`` and ``WORLD_SIZE``; only rank 0 sends the job's outputs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol

from .runfiles import atomic_write_text

CHECKPOINT_VARIABLE = "JUPYTER_TO_JOB_CHECKPOINT_DIR"
ATTEMPT_VARIABLE = "JUPYTER_TO_JOB_ATTEMPT"
ATTEMPT_FILE = ".jupyter-to-job-attempt.json"
"""Where a Kubernetes job's runs count themselves, in its checkpoint folder (rank 0's;
rank N's is ``.jupyter-to-job-attempt-rank-N.json``)."""


class _Log(Protocol):
    def job(self, line: str) -> None: ...


def runner_rank() -> int:
    """This pod's rank in a job on several nodes (``RANK``, set from its completion index
    only there); 0 for a one-pod job."""
    if int(os.environ.get("WORLD_SIZE") or 1) <= 1:
        return 0
    value = os.environ.get("RANK", "0")
    return int(value) if value.isdigit() else 0


def sends_outputs(log: _Log) -> bool:
    """Whether this runner sends the job's outputs: rank 0's are the job's; the other ranks
    say so in the log and keep theirs in their pods."""
    rank = runner_rank()
    if rank:
        log.job(f"the executed notebook of rank {rank} stays in its pod; rank 0's is the job's")
    return rank == 0


def count_attempt(folder: Path) -> int:
    """This run's attempt number (from 1), counted in ``folder``: one more than the last
    run of the same job (``$JUPYTER_TO_JOB_ID``) and rank recorded there, 1 for another
    job's.

    A job's pods share only its checkpoint folder (their environment is their Job's
    template), so a pod started again after a disruption learns its attempt there; each
    rank of a job on several nodes counts its own.
    """
    job_id = os.environ.get("JUPYTER_TO_JOB_ID", "")
    rank = runner_rank()
    record = folder / (
        ATTEMPT_FILE.replace(".json", f"-rank-{rank}.json") if rank else ATTEMPT_FILE
    )
    try:
        previous = json.loads(record.read_text(encoding="utf-8"))
        attempt = int(previous["attempt"]) + 1 if previous.get("job_id") == job_id else 1
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        attempt = 1
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(record, json.dumps({"job_id": job_id, "attempt": attempt}) + "\n")
    except OSError:
        pass  # the notebook finds out for itself when it writes its checkpoint
    return attempt
