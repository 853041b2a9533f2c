"""How a job's Kubernetes pod ended, judged without a cluster (executors/k8s_attempts.py).

The same judgements run through the KubernetesExecutor on a real control plane in
tests/jobs_k8s; these scenarios pin the pure functions' words and choices.
"""

from __future__ import annotations

from jupyter_to_job.executors.base import JobOutcome, StopReason
from jupyter_to_job.executors.k8s_attempts import (
    OUT_OF_MEMORY,
    attempts_before,
    deleted_verdict,
    out_of_memory_verdict,
    ran_out_of_memory,
    suspended_since,
)
from jupyter_to_job.models import JobStatus
from jupyter_to_job.runfiles import RunnerStatus


def pod(uid: str, created: str, **status: object) -> dict:
    return {
        "metadata": {"uid": uid, "name": f"pod-{uid}", "creationTimestamp": created},
        "status": dict(status),
    }


def running(cells_completed: int = 1) -> RunnerStatus:
    return RunnerStatus(
        job_id="j1", state=JobStatus.RUNNING, cells_total=3, cells_completed=cells_completed
    )


def test_a_container_killed_at_its_limit_ran_out_of_memory_and_is_told_so():
    # Given a container the kernel killed (OOMKilled) in the second of three cells
    outcome = JobOutcome(running(), exit_code=137, last_cell=1)
    terminated = {"reason": "OOMKilled", "exitCode": 137}

    # Then it ran out of memory, and its owner reads what to do
    assert ran_out_of_memory(outcome, pod("a", "t1"), terminated)
    verdict = out_of_memory_verdict(outcome)
    assert verdict.status is JobStatus.FAILED
    assert verdict.message == (
        f"The job ran {OUT_OF_MEMORY} after 1 of 3 code cells; the log keeps its output up "
        "to then. Choose a flavor with more memory, or use less."
    )
    assert (verdict.error.ename, verdict.error.cell_index, verdict.exit_code) == (
        "OutOfMemory",
        1,
        137,
    )


def test_exit_137_is_out_of_memory_only_when_nobody_asked_for_it():
    terminated = {"reason": "Error", "exitCode": 137}
    # Unasked: out of memory
    assert ran_out_of_memory(JobOutcome(running(), exit_code=137), pod("a", "t1"), terminated)
    # Stopped by its owner, or its pod deleted: not out of memory
    stopped = JobOutcome(running(), exit_code=137, stop_reason=StopReason.REQUEST)
    assert not ran_out_of_memory(stopped, pod("a", "t1"), terminated)
    deleted = pod("a", "t1")
    deleted["metadata"]["deletionTimestamp"] = "t2"
    assert not ran_out_of_memory(JobOutcome(running(), exit_code=137), deleted, terminated)


def test_a_pod_deleted_outside_the_service_fails_the_job_saying_so():
    gone = pod("a", "t1")
    verdict = deleted_verdict(JobOutcome(running()), gone, {"metadata": {}}, {"a"})
    assert verdict is not None
    assert verdict.error.ename == "PodDeleted"
    assert verdict.message.startswith("The job's Kubernetes pod was deleted outside")
    # A pod still there and a Job still there: nothing to say
    assert deleted_verdict(JobOutcome(running()), gone, {"metadata": {}}, set()) is None


def test_earlier_attempts_are_the_pods_seen_then_the_jobs_count_of_failed_pods():
    # Given the third pod of a Job that counted two failed pods, one of which this
    # service saw being preempted
    first = pod("a", "t1")
    third = pod("c", "t3")
    pods = {"a": first, "c": third}
    disrupted = {"a": ("Preempted", "a higher-priority pod took its GPU")}

    ended, failed = attempts_before(third, pods, disrupted, {"failed": 2}, job_name="job-j1", run=0)

    # Then the seen pod counts with its reason, and one more for the pod nobody saw
    assert failed == 2
    assert ended == [
        ("a higher-priority pod took its GPU", "a"),
        (
            "the cluster took its pod away while the job service was not following it",
            "failed pod 2",
        ),
    ]


def test_a_job_suspended_again_since_its_pod_started_was_taken_back_by_the_queue():
    started = pod("a", "2026-01-01T10:00:00Z")
    resumed = {
        "spec": {"suspend": False},
        "status": {
            "conditions": [{"type": "Suspended", "lastTransitionTime": "2026-01-01T10:05:00Z"}]
        },
    }
    assert suspended_since({"spec": {"suspend": True}}, started)
    assert suspended_since(resumed, started)
    assert not suspended_since({"spec": {}}, started)
