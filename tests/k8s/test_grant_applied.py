"""GPUSpawner applies the admission's Grant as it is: nothing is decided twice."""

from __future__ import annotations

import pytest

from gpuspawner.core import admission as grant_module
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import UserIdentity
from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")


async def test_gpuspawner_applies_the_grant_without_deciding_again(
    tmp_path, monkeypatch, k8s_controls
):
    # Given ana's class server granted on the test cluster's GPUs
    k8s_controls.add_gpu_nodes(1, gpu_count=2)
    GPUSpawner._inventories.clear()
    spawner = make_gpu_spawner("ana", write_class_catalog(tmp_path / "c.yaml", ["ana"]))
    await spawner.ensure_inventory()
    with spawner.capacity_transaction() as pool:
        grant = spawner.admission.grant_server(
            pool,
            UserIdentity("ana"),
            "ml101",
            key=spawner.allocation_key,
            now=spawner.now(),
            object_name=spawner.pod_name,
        )

    # When the catalog and the back end are gone (any second decision would fail)
    def no_second_decision(*args, **kwargs):
        raise AssertionError("decided again")

    monkeypatch.setattr(GPUAdmission, "catalog", no_second_decision)
    monkeypatch.setattr(grant_module, "make_backend", no_second_decision)
    spawner.hold_grant(grant)

    # Then the pod gets the grant's share, node and variables as they are
    assert grant.plan is not None and grant.node is not None
    pod = await spawner.get_pod_manifest()
    container = pod.spec.containers[0]
    for name, value in grant.plan.resource_limits.items():
        assert container.resources.limits[name] == value
    assert pod.spec.node_selector["kubernetes.io/hostname"] == grant.node
    env = {variable.name: variable.value for variable in container.env}
    for name, value in grant.environment.items():
        assert env[name] == value
    assert pod.metadata.labels["gpuspawner.campus-gpu-hub.org/profile"] == "ml101"
