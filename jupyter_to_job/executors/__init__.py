"""Where jobs run: :class:`JobExecutor` is the contract, :class:`LocalExecutor` local processes."""

from .base import FinalState, JobExecutor, JobOutcome, StopReason, final_state
from .local import LocalExecutor

__all__ = [
    "FinalState",
    "JobExecutor",
    "JobOutcome",
    "LocalExecutor",
    "StopReason",
    "final_state",
]
