"""Job managers in the test process: the factory fixtures' type and waiting for a job's end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable

from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import DescribeJob

from . import WAIT

ManagerFactory = Callable[..., Awaitable[JobManager]]
"""``await make_manager(**settings)``: a started manager, shut down after the test."""


async def finished(manager: JobManager, job_id: str, *, timeout: float = WAIT) -> DescribeJob:
    """The job once it is final (bounded, so a broken test fails instead of hanging)."""
    return await asyncio.wait_for(manager.wait(job_id), timeout)


async def shut_down(managers: Iterable[JobManager], *, timeout: float = WAIT) -> None:
    """Shut down each manager still open, stopping its jobs; what outlives this is left to
    the process clean-up that follows (kill_leftovers, kill_kernels)."""
    for manager in managers:
        if not manager.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(manager.shutdown(stop_jobs=True), timeout)
