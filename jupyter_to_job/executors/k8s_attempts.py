"""How a job's Kubernetes pods ended, judged: pure functions of the pods and the Job.

Out of memory, preempted, deleted outside the service, placed nowhere, taken back by the
queue, and which earlier attempts of a job with a checkpoint are still to be counted. The
executor reads the API and keeps the store; these decide (docs/kubernetes-executor.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import JobErrorInfo, JobStatus
from ..retries import attempt_memory, exhausted
from ..runfiles import RunnerStatus
from ..store import JobAttemptsRow
from .base import FinalState, JobOutcome, _progress
from .pod_status import NODE_LOSS, container_state, disruption, job_failure_reason
from .rank_pods import first_failed_rank, rank_failure, rank_of

OUT_OF_MEMORY = "out of memory (the container was killed at its memory limit)"
UNSEEN_ATTEMPT = "the cluster took its pod away while the job service was not following it"


def _ended_alone(status: RunnerStatus | None) -> bool:
    """The runner reported its own end (not a stop)."""
    return status is not None and status.final and status.state is not JobStatus.STOPPED


def _cell(outcome: JobOutcome) -> int | None:
    status = outcome.status
    cell = status.current_cell if status and status.current_cell is not None else None
    return cell if cell is not None else outcome.last_cell


def ran_out_of_memory(
    outcome: JobOutcome, pod: dict[str, Any], terminated: dict[str, Any] | None
) -> bool:
    """The container was killed at its memory limit: OOMKilled, or exit code 137 that
    nobody asked for (no stop, no runner's end, no deletion)."""
    status = outcome.status
    if not terminated or (status and status.final and status.state is JobStatus.COMPLETED):
        return False
    return terminated.get("reason") == "OOMKilled" or (
        terminated.get("exitCode") == 137
        and outcome.stop_reason is None
        and not _ended_alone(status)
        and not pod.get("metadata", {}).get("deletionTimestamp")
    )


def out_of_memory_verdict(outcome: JobOutcome) -> FinalState:
    """The job failed out of memory, saying what to do."""
    return FinalState(
        JobStatus.FAILED,
        f"The job ran {OUT_OF_MEMORY} {_progress(outcome.status)}; the log keeps its "
        "output up to then. Choose a flavor with more memory, or use less.",
        JobErrorInfo(cell_index=_cell(outcome), ename="OutOfMemory", evalue=OUT_OF_MEMORY),
        137,
    )


def runner_decides(outcome: JobOutcome) -> bool:
    """A stop, or the runner's own end: ``final_state`` judges, not the cluster."""
    return outcome.stop_reason is not None or _ended_alone(outcome.status)


def disruption_of(
    pod: dict[str, Any], disrupted: dict[str, tuple[str, str]]
) -> tuple[str, str] | None:
    """The disruption (reason, words) that ended ``pod``; without a pod (taken away before
    it ran, or gone without a trace), the last one marked."""
    if pod:
        return disrupted.get(pod["metadata"]["uid"])
    return next(reversed(disrupted.values()), None)


def preempted_verdict(outcome: JobOutcome, disrupted: tuple[str, str], again: str) -> FinalState:
    """The job failed because the cluster took its pod away; ``again`` says what to do."""
    reason, words = disrupted
    return FinalState(
        JobStatus.FAILED,
        f"The job was preempted: {words}. It stopped {_progress(outcome.status)}; the log and "
        f"the output notebook keep what it did until then. {again}",
        JobErrorInfo(
            cell_index=_cell(outcome),
            ename="NodeLost" if reason in NODE_LOSS else "Preempted",
            evalue=f"{reason}: {words}",
        ),
        outcome.exit_code,
    )


def deleted_verdict(
    outcome: JobOutcome, pod: dict[str, Any], job: dict[str, Any] | None, gone: set[str]
) -> FinalState | None:
    """The job failed because its pod or Job was deleted outside the job service; None if
    neither was."""
    deleted = (
        not pod
        or pod["metadata"]["uid"] in gone
        or bool(pod["metadata"].get("deletionTimestamp"))
        or job is None
    )
    if not deleted:
        return None
    what = "Job" if job is None else "pod"
    return FinalState(
        JobStatus.FAILED,
        f"The job's Kubernetes {what} was deleted outside the job service (by an admin, "
        f"or the cluster evicting it) {_progress(outcome.status)}; the log keeps its output "
        "up to then. Run the job again.",
        JobErrorInfo(
            cell_index=_cell(outcome),
            ename=f"{what.capitalize()}Deleted",
            evalue=f"the Kubernetes {what} was deleted",
        ),
        outcome.exit_code,
    )


def start_failure(ename: str, reason: str, scheduling_timeout_seconds: float) -> FinalState:
    """The job failed before its container ran: placed nowhere in time (``Unschedulable``)
    or its container could not start."""
    if ename == "Unschedulable":
        message = (
            f"The cluster could not place the job within "
            f"{scheduling_timeout_seconds:g} s: {reason}. Try again later, or choose "
            "a flavor with a smaller GPU share; tell the hub admins if this persists."
        )
    else:
        message = (
            f"The job's container could not start ({reason}). Check the flavor's image, "
            "or tell the hub admins."
        )
    return FinalState(JobStatus.FAILED, message, JobErrorInfo(ename=ename, evalue=reason))


def attempts_before(
    pod: dict[str, Any],
    pods: dict[str, dict[str, Any]],
    disrupted: dict[str, tuple[str, str]],
    job_status: dict[str, Any],
    *,
    job_name: str,
    run: int,
) -> tuple[list[tuple[str, str]], int]:
    """The attempts that ended before ``pod``, as (reason, key), and the Job's count of
    failed pods: the earlier pods seen (oldest first, with their reasons), then one for each
    failed pod the Job counted beyond them (replaced while the service was down)."""
    created = pod["metadata"]["creationTimestamp"]
    earlier = sorted(
        (p for p in pods.values() if p["metadata"]["creationTimestamp"] < created),
        key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]),
    )
    ended: list[tuple[str, str]] = []
    for before in earlier:
        uid = before["metadata"]["uid"]
        words = disrupted.get(uid) or disruption(before)
        ended.append((words[1] if words else "its pod ended before its notebook did", uid))
    failed = int(job_status.get("failed") or 0) + len(
        (job_status.get("uncountedTerminatedPods") or {}).get("failed") or []
    )
    if (pod.get("status") or {}).get("phase") == "Failed":
        failed -= 1  # this pod's own failure, found after a restart, is no earlier attempt
    of_job = f" of {job_name}" if run else ""  # the first Job's keys as they were
    ended += [
        (UNSEEN_ATTEMPT, f"failed pod {n}{of_job}") for n in range(len(ended) + 1, failed + 1)
    ]
    return ended, failed


def suspended_since(job: dict[str, Any], pod: dict[str, Any]) -> bool:
    """The Job is suspended again, or was suspended or resumed since ``pod`` was made: the
    queue (Kueue) took the job back while the pod ran."""
    made = pod["metadata"]["creationTimestamp"]
    suspended = next(
        (c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == "Suspended"),
        None,
    )
    return bool((job.get("spec") or {}).get("suspend")) or bool(
        suspended and (suspended.get("lastTransitionTime") or "") > made
    )


def newest_unfollowed(
    pods: dict[str, dict[str, Any]], followed: set[str], gone: set[str]
) -> dict[str, Any] | None:
    """The newest pod not followed yet: present, or gone after its container started."""
    candidates = [
        pod
        for uid, pod in pods.items()
        if uid not in followed
        and (uid not in gone or {"running", "terminated"} & set(container_state(pod)))
    ]
    return max(candidates, key=lambda p: p["metadata"]["creationTimestamp"], default=None)


def rerun_line(run: int, requeued: str | None, backoff_limit: int) -> str:
    """The log's separator before run ``run`` of a job without a checkpoint: admitted
    again by the cluster's GPU queue, or retried by ``backoff_limit`` alone."""
    if requeued:
        return (
            f"---- run {run}: the cluster's GPU queue "
            "admitted the job again, and it runs from the start ----"
        )
    return (
        f"---- run {run} of {backoff_limit + 1}: "
        "its pod failed, and the cluster runs the job again from "
        "the start ----"
    )


def memory_for_attempt(memory: int | None, attempts: JobAttemptsRow | None) -> int | None:
    """The memory of a job's next Job: ``memory`` (the flavor's), or the larger memory an
    earlier attempt that ran out of it was given."""
    more = attempt_memory(attempts.history) if attempts else None
    if more is not None and more > (memory or 0):
        return more  # an earlier attempt ran out of the flavor's memory
    return memory


def retries_used_up(attempts: JobAttemptsRow | None, job: dict[str, Any] | None) -> bool:
    """A job with retries whose Job failed because its last allowed attempt was taken
    away (the disruptions counted past ``backoffLimit``)."""
    return (
        attempts is not None
        and attempts.max_attempts > 1
        and job_failure_reason(job) == "BackoffLimitExceeded"
    )


def current_run(attempts: JobAttemptsRow | None) -> tuple[int, int]:
    """Which of a job's Kubernetes Jobs is the current one (0: its first), and the job's
    attempt that its first pod is. Each entry that queued the job again (no ``ended`` pod of
    its own) started a new Job: an out-of-memory retry (docs/kubernetes-executor.md)."""
    again = [e for e in (attempts.history if attempts else ()) if "ended" not in e]
    return len(again), int(again[-1]["attempt"]) + 1 if again else 1


@dataclass(frozen=True)
class Judgement:
    """What only the cluster can say of how a job ended: ``verdict`` (None: the runner's
    ``final_state`` judges), the rank's disruption that ended a job on several nodes, whether
    it ran out of memory, and a line for the log (its retries used up)."""

    verdict: FinalState | None
    rank_taken: tuple[str, str] | None = None
    out_of_memory: bool = False
    line: str | None = None


def judge(
    outcome: JobOutcome,
    pod: dict[str, Any],
    terminated: dict[str, Any] | None,
    job: dict[str, Any] | None,
    *,
    pods: dict[str, dict[str, Any]],
    rank_pods: dict[str, dict[str, Any]],
    gone: set[str],
    disrupted: dict[str, tuple[str, str]],
    attempts: JobAttemptsRow | None,
    seen_failing: dict[str, int] | None = None,
) -> Judgement:
    """How the job of ``pod`` (rank 0's, or its one pod) ended, as only the cluster can say:
    a rank failed, out of memory, preempted, deleted (``seen_failing``: the order the pod
    watch saw pods fail in, see :func:`.rank_pods.first_failed_rank`)."""
    failed = first_failed_rank({**pods, **rank_pods}, gone, seen_failing)
    if rank_pods and outcome.stop_reason is None and job_failure_reason(job) and failed:
        taken = disruption_of(failed, disrupted)
        if rank_of(failed) or taken:
            return Judgement(rank_failure(failed, taken), rank_taken=taken)
    if ran_out_of_memory(outcome, pod, terminated):
        return Judgement(out_of_memory_verdict(outcome), out_of_memory=True)
    if runner_decides(outcome):
        return Judgement(None)
    taken = disruption_of(pod, disrupted)
    if taken is not None:
        again, line = "Run the job again.", None
        if attempts is not None and retries_used_up(attempts, job):
            again = line = exhausted(attempts.max_attempts)
        return Judgement(preempted_verdict(outcome, taken, again), line=line)
    return Judgement(deleted_verdict(outcome, pod, job, gone))
