"""Scenario: the job service works on the cluster as its own service account, and needs
nothing beyond the Role that ``hub_config/kubernetes/job-service.yaml`` gives it.

The API server's audit log says who made each request. (Every scenario in this folder
also checks, after it ends, that none of the job service's requests was refused:
``job_service_refused_nothing`` in the conftest.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import yaml

from jupyter_to_job.k8s_objects import job_object_name
from jupyter_to_job.models import CreateJob, JobStatus
from tests.support.job_managers import ManagerFactory, finished
from tests.support.notebooks import notebook, wait_for_file

from .conftest import JobServiceAudit

JOB_SERVICE = Path(__file__).resolve().parents[2] / "hub_config" / "kubernetes" / "job-service.yaml"


def granted() -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every rule the job service's Roles and ClusterRole give."""
    rules = set()
    for doc in yaml.safe_load_all(JOB_SERVICE.read_text()):
        if doc and doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        rules |= {(group, resource, verb) for verb in rule["verbs"]}
    return rules


async def test_the_job_service_runs_jobs_as_its_own_account_within_its_role(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_controls: Any, tmp_path: Path
) -> None:
    # Given the job service with its own credentials
    audit = JobServiceAudit(k8s_controls)
    manager = await make_k8s_manager(ttl_seconds_after_finished=600)

    # When one job completes and another is stopped by its owner
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"])
    done = await manager.create("alice", request, notebook=nbformat.writes(notebook("1 + 1")))
    held = await manager.create(
        "alice", request, notebook=nbformat.writes(notebook(wait_for_file(tmp_path / "never")))
    )
    assert (await finished(manager, done.job_id)).status is JobStatus.COMPLETED
    await manager.stop(held.job_id)
    assert (await finished(manager, held.job_id)).status is JobStatus.STOPPED

    # Then the API server saw the job service's account create, expire and delete the Jobs
    requests = audit.requests()
    made = {(r.verb, r.resource, r.subresource, r.name, r.code) for r in requests}
    for job_id in (done.job_id, held.job_id):
        assert ("create", "jobs", "", job_object_name(job_id), 201) in made
        assert ("create", "configmaps", "", job_object_name(job_id), 201) in made
        assert ("patch", "configmaps", "", job_object_name(job_id), 200) in made
    assert ("patch", "jobs", "", job_object_name(done.job_id), 200) in made  # its TTL
    assert ("delete", "jobs", "", job_object_name(held.job_id), 200) in made
    assert any(r.resource == "pods" and r.subresource == "log" for r in requests)

    # And everything it asked for is in its Role, and was allowed
    asked = {
        (r.group, r.resource + (f"/{r.subresource}" if r.subresource else ""), r.verb)
        for r in requests
    }
    assert asked - granted() == set()
    assert [r for r in requests if r.code in (401, 403)] == []
