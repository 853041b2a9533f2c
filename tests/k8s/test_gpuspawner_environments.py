"""GPUSpawner on the real control plane: the environment a student picks is the pod's image.

A course offers two images; the pick is checked against what the course offers and against
the CUDA version GPU Feature Discovery reports for the node, before any pod is created.
"""

from __future__ import annotations

import kubernetes_validate
import pytest
from jupyterhub.spawner import SpawnException

from gpuspawner.spawners.kubernetes import GPUSpawner, devices_from_nodes
from tests.support.k8s_emulator.nodes import gpu_node
from tests.support.k8s_spawners import IMAGE, class_catalog, make_gpu_spawner

pytestmark = pytest.mark.usefixtures("kubespawner_env")

PYTORCH = "quay.io/campus/pytorch-notebook:2.4"
TENSORFLOW = "quay.io/campus/tensorflow-notebook:2.17"
ENVIRONMENTS = f"""\
environments:
  - id: pytorch
    title: PyTorch 2.4
    description: For the deep learning labs.
    image: {PYTORCH}
  - id: tensorflow
    title: TensorFlow 2.17
    description: For the Keras exercises.
    image: {TENSORFLOW}
    requires: {{cuda: "12.3"}}
"""
# What GPU Feature Discovery says of a node whose driver supports CUDA 12.2.
CUDA_12_2 = {
    "nvidia.com/cuda.driver-version.major": "535",
    "nvidia.com/cuda.driver-version.minor": "104",
    "nvidia.com/cuda.driver-version.revision": "05",
    "nvidia.com/cuda.runtime-version.major": "12",
    "nvidia.com/cuda.runtime-version.minor": "2",
}


@pytest.fixture(autouse=True)
def fresh_inventory():
    """Each test is a fresh hub: no capacity view carried over between tests."""
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


@pytest.fixture
def catalog(tmp_path):
    """ML101, in class now for ana, a quarter GPU, offering PyTorch then TensorFlow."""
    path = tmp_path / "catalog.yaml"
    path.write_text(
        class_catalog(
            ["ana"],
            seats=10,
            course_lines="    environments: [pytorch, tensorflow]\n",
            sections=ENVIRONMENTS,
        )
    )
    return path


def spawner_choosing(catalog, environment: object = None) -> GPUSpawner:
    spawner = make_gpu_spawner("ana", catalog)
    if environment is not None:
        spawner.user_options = {"profile": "ml101", "environment": environment}
    return spawner


async def test_the_student_picks_the_second_environment_and_the_pod_runs_its_image(
    k8s_controls, catalog
):
    # Given a GPU node shared four ways, and ML101 offering PyTorch then TensorFlow
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})

    # When Ana picks TensorFlow and starts
    spawner = spawner_choosing(catalog, "tensorflow")
    await spawner.start()

    # Then the pod the cluster runs has TensorFlow's image, with her GPU share
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    container = pod["spec"]["containers"][0]
    assert container["image"] == TENSORFLOW
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # And the pod, as GPUSpawner renders it, is valid for the Kubernetes versions we support
    manifest = spawner.api.api_client.sanitize_for_serialization(await spawner.get_pod_manifest())
    assert manifest["spec"]["containers"][0]["image"] == TENSORFLOW
    for version in ("1.32", "1.33", "1.34"):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Pod", **manifest}, version, strict=True
        )

    # When she stops and starts again without choosing
    await spawner.stop()
    spawner.user_options = {"profile": "ml101"}
    await spawner.start()

    # Then the first environment's image runs: the last pick did not stick to the spawner
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    assert pod["spec"]["containers"][0]["image"] == PYTORCH
    await spawner.stop()
    # And after a stop the spawner's image is the configured one again
    assert spawner.image == IMAGE


async def test_a_tampered_environment_is_refused_before_any_pod_is_made(k8s_controls, catalog):
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})

    for asked, status, words in [
        ("root-shell", 403, "ML101 does not offer the environment 'root-shell'. Choose one"),
        ({"image": "evil:latest"}, 400, "must be one of the environment ids on the start page"),
    ]:
        spawner = spawner_choosing(catalog, asked)
        with pytest.raises(SpawnException) as refused:
            await spawner.start()
        assert refused.value.status_code == status
        assert words in refused.value.message
        assert k8s_controls.get("pods", spawner.pod_name, "default") is None
        assert spawner.capacity_pool.allocations == {}


async def test_an_environment_the_nodes_driver_cannot_run_is_refused_and_the_other_starts(
    k8s_controls, catalog
):
    # Given a node whose driver, as GPU Feature Discovery reports it, supports CUDA 12.2
    k8s_controls.add_gpu_nodes(
        1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4}, labels=CUDA_12_2
    )

    # When Ana picks TensorFlow, which needs CUDA 12.3
    spawner = spawner_choosing(catalog, "tensorflow")
    with pytest.raises(SpawnException) as refused:
        await spawner.start()

    # Then she is told why and what to do, no pod is made and no slice stays booked
    assert refused.value.status_code == 409
    assert refused.value.message.startswith(
        "The environment TensorFlow 2.17 needs CUDA 12.3 or newer, and none of the GPUs ML101 "
        "can use here can run it (GPU 0 (A100-SXM4-80GB, 80 GiB): its driver supports CUDA "
        "12.2). Choose another environment"
    )
    assert k8s_controls.get("pods", spawner.pod_name, "default") is None
    assert spawner.capacity_pool.allocations == {}

    # And PyTorch, which needs nothing more, starts on that node
    spawner.user_options = {"profile": "ml101", "environment": "pytorch"}
    await spawner.start()
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    assert pod["spec"]["containers"][0]["image"] == PYTORCH
    await spawner.stop()


def test_the_driver_and_cuda_versions_come_from_gpu_feature_discovery_labels():
    older = gpu_node(
        "old-node",
        gpu_count=1,
        labels={
            "nvidia.com/cuda.driver.major": "470",
            "nvidia.com/cuda.driver.minor": "82",
            "nvidia.com/cuda.driver.rev": "01",
            "nvidia.com/cuda.runtime.major": "11",
            "nvidia.com/cuda.runtime.minor": "4",
        },
    )
    newer = gpu_node("new-node", gpu_count=1, labels=CUDA_12_2)
    unlabelled = gpu_node("plain-node", gpu_count=1)

    devices = {d.id: d for d in devices_from_nodes([older, newer, unlabelled])}

    assert (devices["old-node/0"].driver, devices["old-node/0"].cuda) == ("470.82.01", "11.4")
    assert (devices["new-node/0"].driver, devices["new-node/0"].cuda) == ("535.104.05", "12.2")
    assert (devices["plain-node/0"].driver, devices["plain-node/0"].cuda) == (None, None)
