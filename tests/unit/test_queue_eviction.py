"""Why the cluster's job queue took a running job's GPU back, in its owner's words.

The Workloads are shaped as Kueue v0.17 writes them (seen on the test cluster's Kueue:
tests/jobs_k8s/test_kueue_job_preemption.py)."""

from __future__ import annotations

from gpuspawner.spawners.kubernetes import COURSE_LABEL
from jupyter_to_job.executors import queue_eviction
from jupyter_to_job.executors.queue_eviction import (
    Eviction,
    eviction_of,
    eviction_sentence,
    preemptor_uid,
    preemptor_words,
)

MESSAGE = (
    "Preempted to accommodate a workload (UID: 27488848-08ce-4340-aca1-05bf25ae5db6, "
    "JobUID: 4088ed0d-c80b-4204-a0a5-68d8904f440b) due to prioritization in the "
    "ClusterQueue; preemptor path: /cq; preemptee path: /cq"
)


def evicted(reason: str, *, preempted: str | None = None, active: bool = True) -> dict:
    conditions = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending"},
        {"type": "Evicted", "status": "True", "reason": reason, "message": MESSAGE},
    ]
    if preempted:
        conditions.append(
            {"type": "Preempted", "status": "True", "reason": preempted, "message": MESSAGE}
        )
    return {"spec": {"active": active}, "status": {"conditions": conditions}}


def test_the_eviction_and_the_preemptor_are_read_from_the_workload():
    found = eviction_of(evicted("Preempted", preempted="InClusterQueue"))
    assert (found.reason, found.preemption, found.requeued) == (
        "Preempted",
        "InClusterQueue",
        True,
    )
    assert eviction_of({"status": {"conditions": []}}) is None
    assert preemptor_uid(MESSAGE) == "4088ed0d-c80b-4204-a0a5-68d8904f440b"
    assert preemptor_uid("The workload is deactivated") is None


def test_who_took_the_gpu_is_said_from_the_preemptors_labels():
    # GPUSpawner's course label, as the hub writes it on a class server's pod
    assert queue_eviction.COURSE_LABEL == COURSE_LABEL
    assert preemptor_words("Pod", {COURSE_LABEL: "ml101"}) == "a server of the class ml101"
    assert preemptor_words("Pod", {"component": "singleuser-server"}) == "a user's server"
    assert preemptor_words("Job", {}) == "another job"
    assert preemptor_words("Pod", {}) == "other work"


def test_the_jobs_panel_says_what_happened_and_what_comes_next():
    by_class = Eviction("Preempted", MESSAGE, "InClusterQueue", "a server of the class ml101")
    assert eviction_sentence(by_class, "research-jobs", checkpoint=False) == (
        "The job was preempted: the cluster's GPU queue gave its GPU to a server of the class "
        "ml101, which comes first in the queue (a higher priority). It waits in the queue "
        "research-jobs and runs again from the start when a GPU is free; the log keeps what "
        "it did until then."
    )
    assert "runs again, with its checkpoint folder, when a GPU is free" in eviction_sentence(
        by_class, "research-jobs", checkpoint=True
    )
    stopped = Eviction("ClusterQueueStopped", "The ClusterQueue is stopped")
    assert eviction_sentence(stopped, "research-jobs", checkpoint=False).startswith(
        "The job was stopped: the cluster's GPU queue stopped it because the hub admins "
        "stopped the queue. It waits in the queue research-jobs"
    )
    out = Eviction("Deactivated", "The workload is deactivated", requeued=False)
    assert eviction_sentence(out, "research-jobs", checkpoint=False) == (
        "The job was stopped: the cluster's GPU queue stopped it because the hub admins took "
        "it out of the queue. It is no longer in the queue research-jobs, so it will not run "
        "again unless the hub admins put it back; the log keeps what it did until then. Stop "
        "it, and run it again later."
    )
    # Without the Workload (the job service may not read it), what the Job itself shows
    assert eviction_sentence(None, "research-jobs", checkpoint=False).startswith(
        "The job was preempted: the cluster's GPU queue took its GPU back for work that comes "
        "first. It waits"
    )
