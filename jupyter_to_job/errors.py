"""Errors a job's owner can see, each a full sentence with what to do next.

Every class carries the HTTP status and the machine-readable reason code the REST layer
answers with, so handlers map them in one place instead of pasting a try/except into each
handler.
"""

from __future__ import annotations


class JobError(Exception):
    """Base of every user-facing job error."""

    status = 400
    code = "invalid"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidJobRequest(JobError):
    """The request cannot be accepted as written (bad path, unreadable notebook, bad token)."""

    status = 400


class NotFound(JobError):
    """No such job, pipeline or schedule (``what``), or not the asker's."""

    status = 404
    code = "not-found"

    def __init__(self, what: str, key: str):
        super().__init__(
            f"There is no {what} {key[:64]!r}. It may have been deleted; reload the {what} list."
        )


class JobNotFound(NotFound):
    """No such job (one that exists but is not the asker's is a 403 in the job API)."""

    def __init__(self, job_id: str):
        super().__init__("job", job_id)
        self.job_id = job_id


class JobNotStoppable(JobError):
    """The job has already finished."""

    status = 409
    code = "already-finished"


class JobNotDeletable(JobError):
    """The job is still queued or running."""

    status = 409
    code = "not-finished"


class OutputNotFound(JobError):
    """The job has no such output (not requested, or not written yet)."""

    status = 404
    code = "no-output"


class JobRefused(JobError):
    """The job can never run as asked (unknown flavor, larger than any GPU here)."""

    status = 409

    def __init__(self, message: str, *, code: str = "refused"):
        super().__init__(message)
        self.code = code


class JobQueueFull(JobError):
    """The owner already has as many queued jobs as one person may have."""

    status = 429
    code = "queue-full"
