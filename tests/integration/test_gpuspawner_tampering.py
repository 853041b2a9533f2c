"""GPUSpawner in a real JupyterHub on the real control plane: tampered requests.

The same tampering cases as for the local spawner, through the REST API and the spawn form
of a hub whose spawner is GPUSpawner, with the hub's identity (the z2jh hub Role and
hub_config/kubernetes/rbac.yaml); every one is refused with a 4xx before the hub asks the
cluster for anything but what it reads, and none counts toward the consecutive-failure limit.
"""

from __future__ import annotations

import pytest

from ..support.hub_pages import cards
from ..support.k8s_spawners import AuditTail
from ..support.tampering import refuse_every_tampered_request, write_tampering_catalog

pytestmark = pytest.mark.integration


def test_gpuspawner_refuses_tampered_requests_without_creating_pods(
    start_hub,
    browserless_user,
    tmp_path,
    k8s_controls,
    hub_kubeconfig,
):
    # Given a cluster of two A100 nodes and a hub running GPUSpawner with HAMi sharing
    k8s_controls.add_gpu_nodes(2, gpu_count=2)
    hub_account = k8s_controls.identities["hub"].user
    audit = AuditTail(k8s_controls.plane.audit_log, hub_account)
    catalog_dir = tmp_path / "catalog"
    write_tampering_catalog(catalog_dir)
    hub = start_hub(
        f"""
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "gpuspawner.kubernetes.GPUSpawner"
c.GPUSpawner.namespace = "default"
c.GPUAdmission.catalog_path = {str(catalog_dir)!r}
c.GPUAdmission.sharing_backend = "hami"
c.Spawner.consecutive_failure_limit = 2
""",
        extra_env={"KUBECONFIG": str(hub_kubeconfig)},
    )
    sam = browserless_user(hub, "sam")
    sam.login()

    # The spawn page shows the course with its share on the cluster's GPUs
    shown = cards(sam.get_spawn_page().text)
    assert shown["ml101"]["available"] is True
    assert "1/2 of an A100-SXM4-80GB, 8 GiB" in shown["ml101"]["text"]
    assert "8 GPU seats left" in shown["ml101"]["text"]  # 4 GPUs, two halves each

    # When Sam sends each tampered request, then each is refused with a 4xx that says why
    refuse_every_tampered_request(sam)

    # And the hub only ever read the cluster (no pod, claim or template was asked for),
    # and is still running
    asked = {(r.verb, r.resource) for r in audit.requests()}
    assert ("list", "nodes") in asked  # the spawn page's GPUs came from the cluster
    assert {verb for verb, _ in asked} <= {"get", "list", "watch"}, asked
    assert k8s_controls.get("pods", "jupyter-sam", "default") is None
    assert hub.api("GET", "/").status_code == 200
    assert "Aborting due to" not in hub.log_text()
