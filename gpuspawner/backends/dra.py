"""Dynamic Resource Allocation with NVIDIA's DRA driver: a ResourceClaimTemplate per server.

Design notes: docs/design/backends.md, "gpuspawner.backends.dra".
"""

from __future__ import annotations

from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare

from .base import PodGPUPlan, SharingBackend, mib_quantity, product_label_value
from .framework_limits import memory_not_isolated

SHARING_STRATEGIES = ("MPS", "TimeSlicing")
CLAIM_API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
"""The ``resource.k8s.io`` versions a ResourceClaimTemplate can be written in, newest first."""
TIME_SLICING_INTERVALS = ("Default", "Short", "Medium", "Long")
CLAIM = "gpu"
"""The name of the claim in the pod, and of the request in the claim."""


def _cel_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def product_selector(driver: str, gpu_model: str | None, models: tuple[str, ...]) -> str | None:
    """The CEL expression that picks devices of ``gpu_model`` (the model chosen for the
    share), else of one of the catalog's ``models``; None when neither says a model."""
    name = f"device.attributes[{_cel_string(driver)}].productName.replace(' ', '-')"
    if gpu_model:
        model = product_label_value(gpu_model.removeprefix("NVIDIA "))
        exact, suffix = _cel_string(model), _cel_string(f"-{model}")
        return f"cel.bind(product, {name}, product == {exact} || product.endsWith({suffix}))"
    if models:
        return " || ".join(
            f"{name}.contains({_cel_string(product_label_value(m))})" for m in models
        )
    return None


class DRABackend(SharingBackend):
    """``make_backend("dra")``; ``sharing_strategy="TimeSlicing"`` instead of MPS for slices."""

    name: ClassVar[str] = "dra"
    default_resource_names = {"device_class": "gpu.nvidia.com", "driver": "gpu.nvidia.com"}

    def __init__(
        self,
        *,
        sharing_strategy: str = "MPS",
        time_slicing_interval: str = "Default",
        config_api_version: str = "resource.nvidia.com/v1beta1",
        claim_api_version: str = "resource.k8s.io/v1",
        **common: Any,
    ) -> None:
        """``resource_names`` renames the DeviceClass (``device_class``) and the driver whose
        attributes the selectors read and whose opaque config the claim carries (``driver``);
        ``claim_api_version``: the ``resource.k8s.io`` version the cluster serves
        (``resource.k8s.io/v1beta1`` on Kubernetes 1.32, ``v1beta2`` on 1.33)."""
        if claim_api_version not in CLAIM_API_VERSIONS:
            raise ValueError(
                "The DRA claim API version must be one of "
                f"{', '.join(CLAIM_API_VERSIONS)} (the one the cluster serves), "
                f"got {claim_api_version!r}."
            )
        if sharing_strategy not in SHARING_STRATEGIES:
            raise ValueError(
                f"The DRA sharing strategy must be MPS or TimeSlicing, got {sharing_strategy!r}."
            )
        if time_slicing_interval not in TIME_SLICING_INTERVALS:
            raise ValueError(
                "The DRA time-slicing interval must be one of "
                f"{', '.join(TIME_SLICING_INTERVALS)}, got {time_slicing_interval!r}."
            )
        super().__init__(**common)
        self.sharing_strategy = sharing_strategy
        self.time_slicing_interval = time_slicing_interval
        self.config_api_version = config_api_version
        self.claim_api_version = claim_api_version

    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        driver = _cel_string(self.resource_names["driver"])
        selectors = []
        expression = product_selector(self.resource_names["driver"], gpu_model, share.models)
        if expression:
            selectors.append({"cel": {"expression": expression}})

        plan = self._new_plan()
        if share.is_whole:
            count = share.count
            config = None
            self._add_whole_gpu_environment(plan, share, gpu_model, gpu_memory_mib)
        else:
            self._refuse_memory_beyond_device(share, gpu_model, gpu_memory_mib)
            count = 1
            if share.memory_mib is not None:
                minimum = _cel_string(mib_quantity(share.memory_mib))
                selectors.append(
                    {
                        "cel": {
                            "expression": f"device.capacity[{driver}].memory"
                            f".compareTo(quantity({minimum})) >= 0"
                        }
                    }
                )
            config = self._sharing_config(plan, share, gpu_model, gpu_memory_mib)

        exactly: dict[str, Any] = {
            "deviceClassName": self.resource_names["device_class"],
            "allocationMode": "ExactCount",
            "count": count,
        }
        if selectors:
            exactly["selectors"] = selectors
        if self.claim_api_version == "resource.k8s.io/v1beta1":
            request = {"name": CLAIM, **exactly}
        else:
            request = {"name": CLAIM, "exactly": exactly}
        devices: dict[str, Any] = {"requests": [request]}
        if config is not None:
            devices["config"] = [
                {
                    "requests": [CLAIM],
                    "opaque": {"driver": self.resource_names["driver"], "parameters": config},
                }
            ]
        plan.resource_claim_templates.append(
            {
                "apiVersion": self.claim_api_version,
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name},
                "spec": {"spec": {"devices": devices}},
            }
        )
        plan.pod_resource_claims.append({"name": CLAIM, "resourceClaimTemplateName": name})
        plan.container_claims.append({"name": CLAIM})
        return plan

    def _sharing_config(
        self,
        plan: PodGPUPlan,
        share: GPUShare,
        gpu_model: str | None,
        gpu_memory_mib: int | None,
    ) -> dict[str, Any]:
        """The driver's GpuConfig for a slice; adds the slice's environment and notes to ``plan``."""
        # The claim's device is the whole GPU, which is what frameworks see as its total.
        memory = self._add_soft_memory_limits(
            plan, share, gpu_model, gpu_memory_mib, share.fraction
        )
        technology = "MPS" if self.sharing_strategy == "MPS" else "time-slicing"
        plan.unhonoured.append(
            "Other servers cannot share this GPU: each server's ResourceClaim is allocated a "
            f"whole GPU, and the {technology} settings only divide it among this server's own "
            "processes."
        )
        if self.sharing_strategy == "TimeSlicing":
            self._time_slicing_notes(plan, share, memory)
            return {
                "apiVersion": self.config_api_version,
                "kind": "GpuConfig",
                "sharing": {
                    "strategy": "TimeSlicing",
                    "timeSlicingConfig": {"interval": self.time_slicing_interval},
                },
            }
        mps: dict[str, Any] = {}
        if share.compute_min_pct:
            threads: int | None = share.compute_min_pct
        elif share.fraction is not None:
            threads = max(1, int(share.fraction * 100))
        else:
            threads = None
        if threads is not None and threads < 100:
            mps["defaultActiveThreadPercentage"] = threads
            ceiling = share.compute_max_pct
            if ceiling is not None and ceiling > threads:
                plan.unhonoured.append(
                    f"Compute cannot burst above {threads}%: MPS caps this server at {threads}% "
                    f"of the GPU's threads, so the {ceiling}% maximum is never reached."
                )
            elif ceiling is not None and ceiling < threads:
                plan.unhonoured.append(
                    f"A compute maximum of {ceiling}% is not applied: MPS caps this server at "
                    f"{threads}% of the GPU's threads."
                )
        if memory is not None:
            mps["defaultPinnedDeviceMemoryLimit"] = mib_quantity(memory)
        else:
            plan.unhonoured.append(
                "No MPS memory limit is set: the share has no memory amount and the GPU's "
                "memory size is unknown."
            )
        sharing: dict[str, Any] = {"strategy": "MPS"}
        if mps:
            sharing["mpsConfig"] = mps
        return {"apiVersion": self.config_api_version, "kind": "GpuConfig", "sharing": sharing}

    @staticmethod
    def _time_slicing_notes(plan: PodGPUPlan, share: GPUShare, memory: int | None) -> None:
        if memory is not None:
            plan.unhonoured.append(memory_not_isolated("time-slicing", memory))
        if share.compute_max_pct is not None and share.compute_max_pct < 100:
            plan.unhonoured.append(
                f"A compute maximum of {share.compute_max_pct}% is not enforced by time-slicing."
            )
