"""The pod GPUSpawner asks for, per sharing back end, equals a literal expected manifest.

"1/4 GPU, 10 GiB, compute 25 to 100 percent" and "one whole GPU" on a test node with
an A100 80GB (GPU feature discovery labels), rendered into the pod KubeSpawner creates.
"""

from __future__ import annotations

import pytest
from jupyterhub.spawner import SpawnException

from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")

QUARTER = "{fraction: 1/4, memory: 10GiB, compute: {min: 25, max: 100}}"
WHOLE = "{count: 1}"

BACKEND_CONFIG = {
    "whole": {},
    "time-slicing": {"replicas": 4},
    "mps": {"replicas": 4},
    "mig": {"strategy": "mixed"},
    "hami": {},
    "volcano": {},
    "dra": {},
    "kai": {"queue": "{course}"},
}
# Labels every pod has whatever the back end: KubeSpawner's own, and the spawner's.
STANDARD_LABEL_PREFIXES = ("hub.jupyter.org/", "gpuspawner.", "app", "component", "heritage")


async def gpu_part_of_pod(backend: str, share: str, tmp_path) -> dict:
    GPUSpawner._inventories.clear()
    catalog = write_class_catalog(tmp_path / f"{backend}.yaml", ["ana"], share=share)
    spawner = make_gpu_spawner(
        "ana", catalog, sharing_backend=backend, sharing_backend_config=BACKEND_CONFIG[backend]
    )
    await spawner.ensure_inventory()
    decision = spawner.decide_start()
    spawner.hold_grant(decision)
    pod = spawner.api.api_client.sanitize_for_serialization(await spawner.get_pod_manifest())
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    keep = ("GPUSPAWNER_GPU", "CUDA", "NVIDIA", "XLA", "TF_", "GPUSPAWNER_TORCH")
    return {
        "limits": {
            k: v
            for k, v in container["resources"].get("limits", {}).items()
            if k not in ("cpu", "memory")
        },
        "claims": container["resources"].get("claims"),
        "nodeSelector": pod["spec"].get("nodeSelector"),
        "schedulerName": pod["spec"].get("schedulerName"),
        "labels": {
            k: v
            for k, v in pod["metadata"].get("labels", {}).items()
            if not k.startswith(STANDARD_LABEL_PREFIXES)
        },
        "resourceClaims": pod["spec"].get("resourceClaims"),
        "annotations": {
            k: v
            for k, v in pod["metadata"].get("annotations", {}).items()
            if not k.startswith(("hub.jupyter.org", "gpuspawner."))
        },
        "env": {k: v for k, v in sorted(env.items()) if k.startswith(keep)},
    }


HOST = {"kubernetes.io/hostname": "gpu-node-0"}
PRODUCT = {**HOST, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
QUARTER_SHARE = "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%"
WHOLE_SHARE = "1 whole NVIDIA A100-SXM4-80GB, 80 GiB"
SOFT_LIMITS_10_OF_80 = {
    "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
}
QUARTER_ENV = {
    "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
    "GPUSPAWNER_GPU_FRACTION": "1/4",
    "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
    "GPUSPAWNER_GPU_SHARE": QUARTER_SHARE,
}
WHOLE_ENV = {
    "GPUSPAWNER_GPU_FRACTION": "1/1",
    "GPUSPAWNER_GPU_MEMORY_MIB": "81920",
    "GPUSPAWNER_GPU_SHARE": WHOLE_SHARE,
}


def pod(
    limits=None, selector=None, scheduler=None, annotations=None, env=None, dra=False, labels=None
):
    return {
        "limits": limits or {},
        "claims": [{"name": "gpu"}] if dra else None,
        "nodeSelector": selector or HOST,
        "schedulerName": scheduler,
        "labels": labels or {},
        "resourceClaims": (
            [{"name": "gpu", "resourceClaimTemplateName": "jupyter-ana-gpu"}] if dra else None
        ),
        "annotations": annotations or {},
        "env": env or {},
    }


SHARED = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED", "nvidia.com/gpu.replicas": "4"}
EXPECTED = {
    ("whole", "whole"): pod({"nvidia.com/gpu": "1"}, PRODUCT, env=WHOLE_ENV),
    ("time-slicing", "quarter"): pod(
        {"nvidia.com/gpu": "1"},
        {**HOST, **SHARED, "nvidia.com/gpu.sharing-strategy": "time-slicing"},
        env={**QUARTER_ENV, **SOFT_LIMITS_10_OF_80},
    ),
    ("time-slicing", "whole"): pod(
        {"nvidia.com/gpu": "1"},
        {**PRODUCT, "nvidia.com/gpu.sharing-strategy": "none"},
        env=WHOLE_ENV,
    ),
    # MPS: each client gets the slot's fixed quarter of memory (20 GiB) and compute.
    ("mps", "quarter"): pod(
        {"nvidia.com/gpu": "1"},
        {**HOST, **SHARED, "nvidia.com/gpu.sharing-strategy": "mps"},
        env={
            **QUARTER_ENV,
            "GPUSPAWNER_GPU_MEMORY_MIB": "20480",
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.250",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.250",
        },
    ),
    ("mps", "whole"): pod(
        {"nvidia.com/gpu": "1"},
        {**PRODUCT, "nvidia.com/gpu.sharing-strategy": "none"},
        env=WHOLE_ENV,
    ),
    # MIG: the smallest A100-80GB profile with >= 10 GiB and >= 1/4 of the compute.
    ("mig", "quarter"): pod(
        {"nvidia.com/mig-2g.20gb": "1"},
        PRODUCT,
        env={
            **QUARTER_ENV,
            "GPUSPAWNER_GPU_FRACTION": "2/7",
            "GPUSPAWNER_GPU_MEMORY_MIB": "20480",
            "GPUSPAWNER_GPU_MIG_PROFILE": "2g.20gb",
        },
    ),
    ("mig", "whole"): pod({"nvidia.com/gpu": "1"}, PRODUCT, env=WHOLE_ENV),
    ("hami", "quarter"): pod(
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "25", "nvidia.com/gpumem": "10240"},
        scheduler="hami-scheduler",
        annotations={
            "hami.io/gpu-scheduler-policy": "binpack",
            "nvidia.com/use-gputype": "NVIDIA A100-SXM4-80GB",
        },
        env=QUARTER_ENV,
    ),
    ("hami", "whole"): pod(
        {"nvidia.com/gpu": "1"},
        scheduler="hami-scheduler",
        annotations={
            "hami.io/gpu-scheduler-policy": "binpack",
            "nvidia.com/use-gputype": "NVIDIA A100-SXM4-80GB",
        },
        env=WHOLE_ENV,
    ),
    ("volcano", "quarter"): pod(
        {
            "volcano.sh/vgpu-cores": "25",
            "volcano.sh/vgpu-memory": "10240",
            "volcano.sh/vgpu-number": "1",
        },
        PRODUCT,
        scheduler="volcano",
        annotations={"volcano.sh/vgpu-mode": "hami-core"},
        env=QUARTER_ENV,
    ),
    ("volcano", "whole"): pod(
        {
            "volcano.sh/vgpu-cores": "100",
            "volcano.sh/vgpu-memory-percentage": "100",
            "volcano.sh/vgpu-number": "1",
        },
        PRODUCT,
        scheduler="volcano",
        annotations={"volcano.sh/vgpu-mode": "hami-core"},
        env=WHOLE_ENV,
    ),
    ("dra", "quarter"): pod(env={**QUARTER_ENV, **SOFT_LIMITS_10_OF_80}, dra=True),
    ("dra", "whole"): pod(env=WHOLE_ENV, dra=True),
    # KAI: the course's queue, a priority class that is never preempted, a memory fraction.
    ("kai", "quarter"): pod(
        selector=PRODUCT,
        scheduler="kai-scheduler",
        annotations={"gpu-fraction": "0.25"},
        labels={"kai.scheduler/queue": "ml101", "priorityClassName": "build"},
        env={**QUARTER_ENV, **SOFT_LIMITS_10_OF_80},
    ),
    ("kai", "whole"): pod(
        {"nvidia.com/gpu": "1"},
        PRODUCT,
        scheduler="kai-scheduler",
        labels={"kai.scheduler/queue": "ml101", "priorityClassName": "build"},
        env=WHOLE_ENV,
    ),
}


@pytest.mark.parametrize("backend, size", sorted(EXPECTED), ids="-".join)
async def test_the_pod_for_a_share_equals_the_expected_manifest(
    k8s_controls, tmp_path, backend, size
):
    # Given an A100 80GB node described by GPU feature discovery labels
    k8s_controls.add_gpu_nodes(1, gpu_count=2, mig_capable=True)
    # When a student's course share is rendered into the pod GPUSpawner would create
    part = await gpu_part_of_pod(backend, QUARTER if size == "quarter" else WHOLE, tmp_path)
    # Then it is exactly the expected manifest
    assert part == EXPECTED[backend, size]


async def test_a_fraction_on_a_whole_gpu_only_cluster_is_refused_not_a_broken_pod(
    k8s_controls, tmp_path
):
    k8s_controls.add_gpu_nodes(1, gpu_count=2)
    with pytest.raises(SpawnException) as refused:
        await gpu_part_of_pod("whole", QUARTER, tmp_path)
    assert refused.value.status_code == 409
    assert "This cluster gives out whole GPUs only" in refused.value.message
