"""Scenarios: GPUs are claimed through DRA with NVIDIA's DRA driver."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import kubernetes_asyncio.client as k8s
import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.policy.share import GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, WHOLE

QUARTER_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "jupyter-alice-gpu"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": "cel.bind(product, "
                                        "device.attributes['gpu.nvidia.com'].productName"
                                        ".replace(' ', '-'), product == 'A100-SXM4-80GB' "
                                        "|| product.endsWith('-A100-SXM4-80GB'))"
                                    }
                                },
                                {
                                    "cel": {
                                        "expression": "device.capacity['gpu.nvidia.com'].memory"
                                        ".compareTo(quantity('10Gi')) >= 0"
                                    }
                                },
                            ],
                        },
                    }
                ],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {
                            "driver": "gpu.nvidia.com",
                            "parameters": {
                                "apiVersion": "resource.nvidia.com/v1beta1",
                                "kind": "GpuConfig",
                                "sharing": {
                                    "strategy": "MPS",
                                    "mpsConfig": {
                                        "defaultActiveThreadPercentage": 25,
                                        "defaultPinnedDeviceMemoryLimit": "10Gi",
                                    },
                                },
                            },
                        },
                    }
                ],
            }
        }
    },
}


def test_given_a_quarter_gpu_with_10_gib_then_a_claim_template_with_mps_limits():
    plan = make_backend("dra").render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice-gpu"
    )

    assert plan.to_dict() == {
        "resource_limits": {},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {},
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "1/4",
            "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [QUARTER_TEMPLATE],
        "pod_resource_claims": [{"name": "gpu", "resourceClaimTemplateName": "jupyter-alice-gpu"}],
        "container_claims": [{"name": "gpu"}],
        "unhonoured": [
            "Other servers cannot share this GPU: each server's ResourceClaim is allocated a "
            "whole GPU, and the MPS settings only divide it among this server's own processes.",
            "Compute cannot burst above 25%: MPS caps this server at 25% of the GPU's threads, "
            "so the 100% maximum is never reached.",
        ],
    }


def test_given_one_whole_gpu_then_a_claim_for_one_device_of_that_model():
    plan = make_backend("dra").render(
        WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice-gpu"
    )

    assert plan.to_dict() == {
        "resource_limits": {},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {},
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1 whole NVIDIA A100-SXM4-80GB, 80 GiB",
            "GPUSPAWNER_GPU_FRACTION": "1/1",
            "GPUSPAWNER_GPU_MEMORY_MIB": "81920",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "jupyter-alice-gpu"},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {
                                        "deviceClassName": "gpu.nvidia.com",
                                        "allocationMode": "ExactCount",
                                        "count": 1,
                                        "selectors": [
                                            {
                                                "cel": {
                                                    "expression": "cel.bind(product, "
                                                    "device.attributes['gpu.nvidia.com']"
                                                    ".productName.replace(' ', '-'), "
                                                    "product == 'A100-SXM4-80GB' || "
                                                    "product.endsWith('-A100-SXM4-80GB'))"
                                                }
                                            }
                                        ],
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
        "pod_resource_claims": [{"name": "gpu", "resourceClaimTemplateName": "jupyter-alice-gpu"}],
        "container_claims": [{"name": "gpu"}],
        "unhonoured": [],
    }


def assert_fields_known(data: Any, type_name: str) -> None:
    """Every key of ``data`` is a field of the kubernetes_asyncio model ``type_name``."""
    if type_name.startswith("list["):
        for item in data:
            assert_fields_known(item, type_name[5:-1])
        return
    model = getattr(k8s, type_name, None)
    if model is None:  # str, int, object (the driver's opaque parameters), dict(...)
        return
    by_json_name = {json: python for python, json in model.attribute_map.items()}
    for key, value in data.items():
        assert key in by_json_name, f"{type_name} has no field {key}"
        assert_fields_known(value, model.openapi_types[by_json_name[key]])


def test_the_plan_uses_only_fields_the_kubernetes_api_has():
    plan = make_backend("dra").render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice-gpu"
    )

    assert_fields_known(plan.resource_claim_templates[0], "V1ResourceClaimTemplate")
    assert_fields_known(plan.pod_resource_claims, "list[V1PodResourceClaim]")
    assert_fields_known(plan.container_claims, "list[CoreV1ResourceClaim]")


def test_given_time_slicing_then_the_claim_carries_it_and_memory_is_only_soft():
    backend = make_backend("dra", sharing_strategy="TimeSlicing", time_slicing_interval="Short")

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="t")

    config = plan.resource_claim_templates[0]["spec"]["spec"]["devices"]["config"]
    assert config[0]["opaque"]["parameters"]["sharing"] == {
        "strategy": "TimeSlicing",
        "timeSlicingConfig": {"interval": "Short"},
    }
    assert plan.unhonoured[1] == (
        "GPU memory is not isolated by time-slicing: the 10 GiB limit is applied only through "
        "PyTorch, JAX and TensorFlow settings, which a notebook can change."
    )


def test_given_a_fraction_on_an_unknown_gpu_then_no_memory_limit_and_that_is_said():
    share = GPUShare(fraction=Fraction(1, 2), models=("A100", "H100"))

    plan = make_backend("dra").render(share, name="t")

    request = plan.resource_claim_templates[0]["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["selectors"] == [
        {
            "cel": {
                "expression": "device.attributes['gpu.nvidia.com'].productName"
                ".replace(' ', '-').contains('A100') || "
                "device.attributes['gpu.nvidia.com'].productName"
                ".replace(' ', '-').contains('H100')"
            }
        }
    ]
    parameters = plan.resource_claim_templates[0]["spec"]["spec"]["devices"]["config"][0]
    assert parameters["opaque"]["parameters"]["sharing"] == {
        "strategy": "MPS",
        "mpsConfig": {"defaultActiveThreadPercentage": 50},
    }
    assert plan.unhonoured[1] == (
        "No MPS memory limit is set: the share has no memory amount and the GPU's memory size "
        "is unknown."
    )


def test_given_only_memory_then_the_server_is_told_its_memory_and_frameworks_keep_to_it():
    share = GPUShare(memory_mib=20 * 1024)

    plan = make_backend("dra").render(
        share, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="t"
    )

    assert "GPUSPAWNER_GPU_FRACTION" not in plan.environment
    assert plan.environment["GPUSPAWNER_GPU_MEMORY_MIB"] == "20480"
    assert plan.environment["GPUSPAWNER_TORCH_MEMORY_FRACTION"] == "0.250"
    parameters = plan.resource_claim_templates[0]["spec"]["spec"]["devices"]["config"][0]
    assert parameters["opaque"]["parameters"]["sharing"] == {
        "strategy": "MPS",
        "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "20Gi"},
    }


@pytest.mark.parametrize(
    ("gpu_model", "model"),
    [
        # The hub's model from GFD's label NVIDIA-H100-80GB-HBM3; NVML and the driver say
        # "NVIDIA H100 80GB HBM3", which the old contains('NVIDIA H100-80GB-HBM3') missed.
        ("NVIDIA H100-80GB-HBM3", "H100-80GB-HBM3"),
        # GFD's label Tesla-T4: the driver says "Tesla T4", without NVIDIA in front.
        ("NVIDIA Tesla-T4", "Tesla-T4"),
        ("NVIDIA L4", "L4"),
    ],
)
def test_given_a_gpu_model_then_the_claim_asks_for_its_name_in_the_labels_spelling(
    gpu_model, model
):
    plan = make_backend("dra").render(WHOLE, gpu_model=gpu_model, name="t")

    request = plan.resource_claim_templates[0]["spec"]["spec"]["devices"]["requests"][0]
    # The device's name, spaces as dashes, is the model or ends with "-<model>": an L4
    # claim is not given an L40S
    assert request["exactly"]["selectors"] == [
        {
            "cel": {
                "expression": "cel.bind(product, device.attributes['gpu.nvidia.com']"
                f".productName.replace(' ', '-'), product == '{model}' "
                f"|| product.endsWith('-{model}'))"
            }
        }
    ]


def test_given_more_memory_than_the_gpu_then_no_claim_is_made():
    with pytest.raises(UnsupportedShare, match="asks for 96 GiB of GPU memory"):
        make_backend("dra").render(
            GPUShare(memory_mib=96 * 1024),
            gpu_model=A100_80GB,
            gpu_memory_mib=A100_80GB_MIB,
            name="t",
        )


def test_given_a_renamed_device_class_then_the_claim_uses_it():
    backend = make_backend("dra", resource_names={"device_class": "shared-gpu.example.com"})

    plan = backend.render(WHOLE, name="t")

    request = plan.resource_claim_templates[0]["spec"]["spec"]["devices"]["requests"][0]
    assert request == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "shared-gpu.example.com",
            "allocationMode": "ExactCount",
            "count": 1,
        },
    }


def test_given_a_kubernetes_1_33_cluster_then_the_template_is_written_in_v1beta2():
    backend = make_backend("dra", claim_api_version="resource.k8s.io/v1beta2")

    plan = backend.render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice-gpu"
    )

    # v1beta2 has v1's shape: only the version differs
    assert plan.resource_claim_templates == [
        {**QUARTER_TEMPLATE, "apiVersion": "resource.k8s.io/v1beta2"}
    ]


def test_given_a_kubernetes_1_32_cluster_then_the_v1beta1_request_holds_the_device_fields():
    backend = make_backend("dra", claim_api_version="resource.k8s.io/v1beta1")

    plan = backend.render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice-gpu"
    )

    v1_template: Any = QUARTER_TEMPLATE
    v1_devices = v1_template["spec"]["spec"]["devices"]
    exactly = v1_devices["requests"][0]["exactly"]
    assert plan.resource_claim_templates == [
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "jupyter-alice-gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", **exactly}],
                        "config": v1_devices["config"],
                    }
                }
            },
        }
    ]
    assert plan.pod_resource_claims == [
        {"name": "gpu", "resourceClaimTemplateName": "jupyter-alice-gpu"}
    ]


def test_given_an_api_version_no_kubernetes_serves_then_the_error_lists_those_that_are():
    with pytest.raises(ValueError) as error:
        make_backend("dra", claim_api_version="resource.k8s.io/v1alpha3")

    assert str(error.value) == (
        "The DRA claim API version must be one of resource.k8s.io/v1, resource.k8s.io/v1beta2, "
        "resource.k8s.io/v1beta1 (the one the cluster serves), got 'resource.k8s.io/v1alpha3'."
    )
