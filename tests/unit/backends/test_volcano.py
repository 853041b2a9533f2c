"""Scenarios: Volcano schedules vGPU slices enforced by HAMi-core."""

from __future__ import annotations

from gpuspawner.backends import make_backend

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, WHOLE


def test_given_a_quarter_gpu_with_10_gib_then_volcano_vgpu_resources_and_scheduler():
    plan = make_backend("volcano").render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice"
    )

    assert plan.to_dict() == {
        "resource_limits": {
            "volcano.sh/vgpu-number": "1",
            "volcano.sh/vgpu-memory": "10240",
            "volcano.sh/vgpu-cores": "25",
        },
        "resource_requests": {},
        "annotations": {"volcano.sh/vgpu-mode": "hami-core"},
        "labels": {},
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [],
        "scheduler_name": "volcano",
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "1/4",
            "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [
            "Volcano vGPU reserves no compute: the 25% minimum is a limit Volcano vGPU applies "
            "to every server on the GPU while they compete, and a long kernel that is already "
            "running is not interrupted.",
            "Compute above 25% (up to 100%) is available only while no other server on the same "
            "GPU is computing.",
        ],
    }


def test_given_one_whole_gpu_then_all_its_memory_and_cores_are_asked_for():
    plan = make_backend("volcano").render(
        WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x"
    )

    assert plan.to_dict() == {
        "resource_limits": {
            "volcano.sh/vgpu-number": "1",
            "volcano.sh/vgpu-memory-percentage": "100",
            "volcano.sh/vgpu-cores": "100",
        },
        "resource_requests": {},
        "annotations": {"volcano.sh/vgpu-mode": "hami-core"},
        "labels": {},
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [],
        "scheduler_name": "volcano",
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1 whole NVIDIA A100-SXM4-80GB, 80 GiB",
            "GPUSPAWNER_GPU_FRACTION": "1/1",
            "GPUSPAWNER_GPU_MEMORY_MIB": "81920",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [],
    }


def test_given_a_queue_and_renamed_resources_then_they_are_used():
    backend = make_backend(
        "volcano",
        queue="ml101",
        mode=None,
        resource_names={"number": "volcano.sh/gpu-number"},
    )

    plan = backend.render(QUARTER, name="x")

    assert plan.annotations == {"scheduling.volcano.sh/queue-name": "ml101"}
    assert plan.resource_limits == {
        "volcano.sh/gpu-number": "1",
        "volcano.sh/vgpu-memory": "10240",
        "volcano.sh/vgpu-cores": "25",
    }
