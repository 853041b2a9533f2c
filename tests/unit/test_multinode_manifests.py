"""The Kubernetes objects of a job on several nodes, compared with literal manifests, and
how its ranks' pods are read: pure functions, no cluster (tests/jobs_k8s/test_multinode_jobs.py
runs them on the test cluster)."""

from __future__ import annotations

import copy

from gpuspawner.backends import cpu_only_plan
from jupyter_to_job.executors.pod_log import prefixed
from jupyter_to_job.executors.rank_pods import first_failed_rank, rank_failure
from jupyter_to_job.k8s_objects import make_job
from jupyter_to_job.k8s_ranks import make_rank_service, on_several_nodes
from jupyter_to_job.models import JobStatus

INDEX = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}


def one_pod_job() -> dict:
    return make_job(
        job_id="j1",
        owner="ada",
        image="jobs:1",
        plan=cpu_only_plan(),
        environment={"WORLD_SIZE": "99", "HF_HOME": "/data"},
    )


def test_a_job_on_two_nodes_is_an_indexed_job_of_two_pods_told_their_ranks():
    job = on_several_nodes(
        one_pod_job(), nodes=2, gpus_per_node=2, pinned_nodes=("gpu-node-1", "gpu-node-0")
    )
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["backoffLimit"] == 0  # a failed rank fails the Job, which stops the others
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == "j2j-j1"
    assert pod["affinity"] == {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "j2j-j1"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": ["gpu-node-0", "gpu-node-1"],
                            }
                        ]
                    }
                ]
            }
        },
    }
    env = pod["containers"][0]["env"]
    # The rank variables come last and win over the flavor's WORLD_SIZE
    assert env[-7:] == [
        {"name": "RANK", "valueFrom": INDEX},
        {"name": "NODE_RANK", "valueFrom": INDEX},
        {"name": "LOCAL_WORLD_SIZE", "value": "2"},
        {"name": "MASTER_ADDR", "value": "j2j-j1-0.j2j-j1"},
        {"name": "MASTER_PORT", "value": "29500"},
        {"name": "NNODES", "value": "2"},
        {"name": "WORLD_SIZE", "value": "2"},
    ]
    assert [item["name"] for item in env].count("WORLD_SIZE") == 1
    assert {"name": "HF_HOME", "value": "/data"} in env


def test_a_job_on_one_node_is_left_as_it_is():
    job = one_pod_job()
    before = copy.deepcopy(job)
    assert on_several_nodes(job, nodes=1, gpus_per_node=2) == before
    assert job == before


def test_the_headless_service_names_the_pods_of_the_jobs_run():
    assert make_rank_service(job_id="j1", owner="ada", run=1, namespace="jobs") == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "j2j-j1-r1",
            "namespace": "jobs",
            "labels": {
                "app.kubernetes.io/managed-by": "jupyter-to-job",
                "app.kubernetes.io/component": "notebook-job",
                "hub.jupyter.org/username": "ada",
                "jupyter-to-job/job-id": "j1",
            },
            "annotations": {"jupyter-to-job/job-id": "j1", "hub.jupyter.org/username": "ada"},
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {
                "jupyter-to-job/job-id": "j1",
                "batch.kubernetes.io/job-name": "j2j-j1-r1",
            },
            "ports": [
                {"name": "rendezvous", "port": 29500, "targetPort": 29500, "protocol": "TCP"}
            ],
        },
    }


def rank_pod(rank: int, *, exit_code: int | None = None, deleted: str | None = None, at: str = ""):
    pod: dict = {
        "metadata": {
            "name": f"j2j-j1-{rank}-abcde",
            "uid": f"uid-{rank}",
            "annotations": {"batch.kubernetes.io/job-completion-index": str(rank)},
        },
        "spec": {"nodeName": f"gpu-node-{rank}"},
        "status": {"containerStatuses": [{"name": "notebook", "state": {"running": {}}}]},
    }
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "finishedAt": at}}
        pod["status"]["containerStatuses"][0]["state"] = state
    if deleted:
        pod["metadata"]["deletionTimestamp"] = deleted
    return pod


def test_the_rank_that_failed_first_is_the_one_named():
    # Rank 1 was deleted by hand; the Job controller then stopped rank 0 (exit 143, later)
    pods = {
        "uid-0": rank_pod(0, exit_code=143, deleted="2030-01-01T00:00:09Z"),
        "uid-1": rank_pod(1, exit_code=143, deleted="2030-01-01T00:00:05Z"),
    }
    failed = first_failed_rank(pods, gone={"uid-1"})
    assert failed is pods["uid-1"]
    verdict = rank_failure(failed)
    assert verdict.status is JobStatus.FAILED
    assert verdict.message.startswith(
        "rank 1 (pod j2j-j1-1-abcde on gpu-node-1) failed: its pod was deleted; the other "
        "ranks were stopped."
    )
    assert verdict.error is not None and verdict.error.ename == "RankFailed"


def test_within_one_second_the_rank_the_watch_saw_fail_first_is_the_one_named():
    # Rank 1 deleted by hand and rank 0 stopped by the Job controller in the same second
    # (the API's times are whole seconds); the pod watch saw rank 1's deletion first
    pods = {
        "uid-0": rank_pod(0, deleted="2030-01-01T00:00:05Z"),
        "uid-1": rank_pod(1, deleted="2030-01-01T00:00:05Z"),
    }
    failed = first_failed_rank(pods, gone=set(), seen={"uid-1": 0, "uid-0": 1})
    assert failed is pods["uid-1"]
    # and when the watch saw rank 0 go first, rank 0 is the one
    assert first_failed_rank(pods, gone=set(), seen={"uid-0": 0, "uid-1": 1}) is pods["uid-0"]


def test_a_rank_whose_runner_failed_is_named_with_its_exit_code():
    pods = {
        "uid-0": rank_pod(0),
        "uid-1": rank_pod(1, exit_code=1, at="2030-01-01T00:00:03Z"),
    }
    verdict = rank_failure(first_failed_rank(pods, gone=set()))
    assert "failed: its runner ended with exit code 1;" in verdict.message
    assert verdict.exit_code == 1


def test_ranks_that_all_succeeded_name_none():
    pods = {"uid-0": rank_pod(0, exit_code=0), "uid-1": rank_pod(1, exit_code=0)}
    assert first_failed_rank(pods, gone=set()) is None


def test_each_line_of_a_rank_is_prefixed_and_a_one_pod_job_is_not():
    block = b"[cell 0] a\rb\n\n[job] done\n"
    assert prefixed(block, b"[rank 1] ") == (
        b"[rank 1] [cell 0] a\rb\n[rank 1] \n[rank 1] [job] done\n"
    )
    assert prefixed(block, b"") == block


def test_with_a_checkpoint_a_rank_taken_away_fails_the_whole_job_for_the_executor_to_requeue():
    from jupyter_to_job.k8s_objects import PodCheckpoint

    one_pod = make_job(
        job_id="j1",
        owner="ada",
        image="jobs:1",
        plan=cpu_only_plan(),
        checkpoint=PodCheckpoint(path="/home/jovyan/checkpoints", retries=2),
    )
    # One pod alone is replaced when taken away, counted toward its retries
    assert one_pod["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Count"
    job = on_several_nodes(one_pod, nodes=2, gpus_per_node=1)
    # Several are not: one replaced rank would rejoin peers that went on
    assert job["spec"]["podFailurePolicy"] == {
        "rules": [
            {
                "action": "FailJob",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "notebook", "operator": "NotIn", "values": [0]},
            },
        ]
    }
    assert one_pod["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Count"  # not changed


def test_an_earlier_attempts_pod_taken_back_by_the_queue_names_no_failed_rank():
    earlier = rank_pod(1, exit_code=143, deleted="2030-01-01T00:00:05Z")
    earlier["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    later = rank_pod(1, exit_code=0)
    later["metadata"].update(uid="uid-1b", creationTimestamp="2030-01-01T00:01:00Z")
    pods = {"uid-0": rank_pod(0, exit_code=0), "uid-1": earlier, "uid-1b": later}
    assert first_failed_rank(pods, gone={"uid-1"}) is None
