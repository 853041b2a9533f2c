"""What a GPU sharing back end produces, and the interface every back end implements.

A sharing back end is a pure renderer: from a :class:`~gpuspawner.policy.share.GPUShare`
and what the hub knows about the GPU the server will run on, it returns the pod-spec
changes (a :class:`PodGPUPlan`) that ask the cluster's sharing technology for that share,
and says in words what of the share it cannot enforce. No Kubernetes client imports and no
I/O: tests compare plans with literal dicts, as KubeSpawner's ``test_objects`` does for pods.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, ClassVar, Literal

from gpuspawner.policy.share import GPUShare
from gpuspawner.policy.units import format_mib

from .framework_limits import NO_GPU_ENVIRONMENT, framework_memory_limits, share_environment

# GPU Feature Discovery (GFD) node label with the GPU's product name, e.g. NVIDIA-A100-SXM4-80GB.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# GFD labels with the node's number of GPUs and each one's memory in MiB.
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
# GFD label saying how the node's device plugin shares its GPUs: none, time-slicing or mps.
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
# GFD label with the number of slots (replicas) each GPU of the node is advertised as.
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"


class UnsupportedShare(ValueError):
    """A share this back end can never give; ``message`` says why and what to do instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class PodGPUPlan:
    """The pod-spec changes that give one server its GPU share.

    Every field maps onto a KubeSpawner trait or pod field (see the reference's
    "KubeSpawner mapping cheatsheet"); empty fields leave the pod unchanged.
    """

    resource_limits: dict[str, str] = field(default_factory=dict)
    """Container ``resources.limits``, Kubernetes quantities as strings: ``{"nvidia.com/gpu": "1"}``."""
    resource_requests: dict[str, str] = field(default_factory=dict)
    """Container ``resources.requests``; extended resources default to their limits, so usually empty."""
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    scheduler_name: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    """Variables for the notebook container; they win over anything the user set (see protect.py)."""
    runtime_class_name: str | None = None
    resource_claim_templates: list[dict[str, Any]] = field(default_factory=list)
    """Full ``ResourceClaimTemplate`` manifests to create before the pod (DRA)."""
    pod_resource_claims: list[dict[str, Any]] = field(default_factory=list)
    """Entries for the pod's ``spec.resourceClaims`` (DRA)."""
    container_claims: list[dict[str, Any]] = field(default_factory=list)
    """Entries for the notebook container's ``resources.claims`` (DRA)."""
    unhonoured: list[str] = field(default_factory=list)
    """Sentences: what of the share this back end cannot enforce (shown to admins and instructors)."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data, for tests and for logging what a spawn asked for."""
        return asdict(self)


def cpu_only_plan() -> PodGPUPlan:
    """The plan for a server without a GPU: no GPU resources, and no GPU visible at all.

    CUDA images set ``NVIDIA_VISIBLE_DEVICES=all``; where the NVIDIA runtime is the default,
    a pod that asks for no GPU would otherwise see every GPU of its node.
    """
    return PodGPUPlan(environment=dict(NO_GPU_ENVIRONMENT))


def model_matches(gpu_model: str, wanted: Sequence[str]) -> bool:
    """True when ``wanted`` is empty or one of its names is a case-insensitive part of the model."""
    if not wanted:
        return True
    ours = gpu_model.lower()
    return any(name.lower() in ours for name in wanted)


def product_label_value(gpu_model: str) -> str:
    """The ``nvidia.com/gpu.product`` value GFD gives a GPU model name.

    Same rule as GFD's ``sanitise`` (k8s-device-plugin ``internal/lm/resource.go``): drop
    characters other than letters, digits, ``-_.`` and spaces, then join words with ``-``,
    so ``NVIDIA A100-SXM4-80GB`` becomes ``NVIDIA-A100-SXM4-80GB``.
    """
    kept = re.sub(r"[^A-Za-z0-9\-_. ]", "", gpu_model)
    return "-".join(kept.split())


def mib_quantity(mib: int) -> str:
    """A Kubernetes quantity for MiB: ``10Gi`` when it is whole GiB, otherwise ``1536Mi``."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def percent(value: Fraction | float) -> int:
    """A share of 1 as a whole percentage, rounded to the nearest (2/7 is 29)."""
    return int(value * 100 + 0.5)


class SharingBackend(ABC):
    """Renders GPU shares for one sharing technology.

    Subclasses set ``name`` and ``default_resource_names`` and implement :meth:`render`;
    :meth:`check` and :meth:`models_for` are derived from it, so startup validation and
    spawning can never disagree.
    """

    name: ClassVar[str]
    default_resource_names: ClassVar[Mapping[str, str]] = {}
    """Keys the back end understands and their resource names; admins may rename any of them."""

    def __init__(
        self,
        *,
        resource_names: Mapping[str, str] | None = None,
        tolerations: Sequence[Mapping[str, Any]] = (),
        runtime_class_name: str | None = None,
    ) -> None:
        """``resource_names`` renames resources (``{"shared": "nvidia.com/gpu.shared"}``);
        ``tolerations`` and ``runtime_class_name`` are added to every GPU plan."""
        given = dict(resource_names or {})
        unknown = sorted(set(given) - set(self.default_resource_names))
        if unknown:
            valid = ", ".join(sorted(self.default_resource_names)) or "none"
            raise ValueError(
                f"The {self.name} sharing backend has no resource called {', '.join(unknown)}; "
                f"the resources it uses are: {valid}."
            )
        empty = sorted(key for key, value in given.items() if not value)
        if empty:
            raise ValueError(
                f"Give the {self.name} sharing backend a resource name for {', '.join(empty)}, "
                "or leave it out to use the default."
            )
        self.resource_names: dict[str, str] = {**self.default_resource_names, **given}
        self.tolerations = [dict(toleration) for toleration in tolerations]
        self.runtime_class_name = runtime_class_name

    # -- rendering ---------------------------------------------------------------------------

    def render(
        self,
        share: GPUShare,
        *,
        gpu_model: str | None = None,
        gpu_memory_mib: int | None = None,
        name: str,
        workload: Literal["server", "job"] = "server",
        course: str | None = None,
    ) -> PodGPUPlan:
        """The plan that gives ``share`` on a ``gpu_model`` GPU with ``gpu_memory_mib`` of memory.

        ``gpu_model`` is the GPU's name as NVML reports it (``NVIDIA A100-SXM4-80GB``), or None
        when the hub has not chosen a model; ``name`` names objects the plan creates (DRA
        claim templates); ``workload`` says whether the plan is for a notebook server or a
        job, and ``course`` is the server's course, if any (back ends with queues and
        priorities use them). Raises :class:`UnsupportedShare` for a share it can never give.
        """
        if gpu_model and not model_matches(gpu_model, share.models):
            raise UnsupportedShare(
                f"The share {share.describe()} asks for {' or '.join(share.models)}, so it cannot "
                f"be given on the {gpu_model}. Choose the GPU model with models_for()."
            )
        plan = self._render(share, gpu_model=gpu_model, gpu_memory_mib=gpu_memory_mib, name=name)
        self._add_workload(plan, workload=workload, course=course)
        return plan

    @abstractmethod
    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        """What :meth:`render` returns, for a ``gpu_model`` the share accepts."""

    def _add_workload(
        self, plan: PodGPUPlan, *, workload: Literal["server", "job"], course: str | None
    ) -> None:
        """Add what depends on the workload rather than the share (a queue, a priority);
        most back ends add nothing."""
        return None

    def cpu_only_plan(self) -> PodGPUPlan:
        """The plan for a profile without a GPU (the same for every back end)."""
        return cpu_only_plan()

    def _new_plan(self) -> PodGPUPlan:
        return PodGPUPlan(
            tolerations=[dict(toleration) for toleration in self.tolerations],
            runtime_class_name=self.runtime_class_name,
        )

    # -- startup validation ------------------------------------------------------------------

    def check(self, share: GPUShare, gpu_models: Mapping[str, int]) -> list[str]:
        """Errors for a share that can never be given on this cluster; empty when it can.

        ``gpu_models`` maps the cluster's GPU model names to their memory in MiB (empty when
        unknown). A share passes when it renders on at least one of the models it accepts;
        otherwise every model's reason is returned, one sentence each.
        """
        candidates = {m: mib for m, mib in gpu_models.items() if model_matches(m, share.models)}
        if share.models and gpu_models and not candidates:
            return [
                f"The share {share.describe()} asks for {' or '.join(share.models)}, but this "
                f"cluster's GPU models are {', '.join(sorted(gpu_models))}. Fix the model, or add "
                "the GPU model to the hub's list of cluster GPUs."
            ]
        if not candidates:
            return self._reasons(share, [(None, None)])
        reasons = self._reasons(share, list(candidates.items()))
        return reasons if len(reasons) == len(candidates) else []

    def check_configuration(self, gpu_models: Mapping[str, int]) -> list[str]:
        """Errors in the back end's own settings for this cluster's GPU models; empty when fine."""
        return []

    def models_for(self, share: GPUShare, gpu_models: Mapping[str, int]) -> list[str]:
        """The cluster GPU models this back end can give ``share`` on, in ``gpu_models`` order."""
        usable = []
        for model, memory_mib in gpu_models.items():
            if model_matches(model, share.models) and not self._reasons(
                share, [(model, memory_mib)]
            ):
                usable.append(model)
        return usable

    def _reasons(
        self, share: GPUShare, models: Sequence[tuple[str | None, int | None]]
    ) -> list[str]:
        reasons = []
        for model, memory_mib in models:
            try:
                self.render(share, gpu_model=model, gpu_memory_mib=memory_mib, name="check")
            except UnsupportedShare as error:
                reasons.append(error.message)
        return reasons

    # -- helpers for subclasses --------------------------------------------------------------

    @staticmethod
    def _add_share_environment(
        plan: PodGPUPlan,
        share: GPUShare,
        gpu_model: str | None,
        gpu_memory_mib: int | None,
        fraction: Fraction | None,
        memory_mib: int | None,
    ) -> None:
        """Describe to the server the ``fraction`` and ``memory_mib`` it actually gets."""
        plan.environment.update(
            share_environment(
                share,
                gpu_model=gpu_model,
                gpu_memory_mib=gpu_memory_mib,
                fraction=fraction,
                memory_mib=memory_mib,
            )
        )

    def _add_whole_gpu_environment(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        """Describe whole GPUs to the server: all of each GPU's compute and memory."""
        self._add_share_environment(
            plan, share, gpu_model, gpu_memory_mib, Fraction(1), gpu_memory_mib
        )

    def _add_soft_memory_limits(
        self,
        plan: PodGPUPlan,
        share: GPUShare,
        gpu_model: str | None,
        gpu_memory_mib: int | None,
        fraction: Fraction | None,
    ) -> int | None:
        """For a slice whose memory the technology does not isolate: the share's memory, else
        ``fraction`` of the device, described to the server and kept by framework soft limits.

        Returns that memory in MiB, or None when neither the share nor the device says it.
        """
        memory = share.memory_mib
        if memory is None and gpu_memory_mib is not None:
            assert fraction is not None  # a slice without memory has a fraction
            memory = int(fraction * gpu_memory_mib)
        self._add_share_environment(plan, share, gpu_model, gpu_memory_mib, fraction, memory)
        if memory is not None and gpu_memory_mib is not None:
            # Frameworks see the whole device as the GPU's total, so the fractions are of it.
            plan.environment.update(framework_memory_limits(memory, gpu_memory_mib))
        return memory

    def _refuse_memory_beyond_device(
        self, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        if share.memory_mib is None or gpu_memory_mib is None:
            return
        if share.memory_mib > gpu_memory_mib:
            gpu = gpu_model or "this GPU"
            raise UnsupportedShare(
                f"The share {share.describe()} asks for {format_mib(share.memory_mib)} of GPU "
                f"memory, more than the {format_mib(gpu_memory_mib)} of {gpu}. Lower the memory, "
                "or limit the profile to a GPU model with more memory."
            )


class NodeLabelBackend(SharingBackend):
    """A back end that steers pods to GPU models with GPU Feature Discovery node labels."""

    def __init__(self, *, gfd_labels: bool = True, **common: Any) -> None:
        """``gfd_labels=False`` turns off node selection by GFD labels (clusters without GFD)."""
        super().__init__(**common)
        self.gfd_labels = gfd_labels

    def _select_model(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, suffix: str = ""
    ) -> None:
        """Pin the pod to ``gpu_model`` nodes, or say why a model limit cannot be applied."""
        if self.gfd_labels and gpu_model:
            plan.node_selector[GPU_PRODUCT_LABEL] = product_label_value(gpu_model) + suffix
            return
        if not share.models:
            return
        wanted = " or ".join(share.models)
        if not self.gfd_labels:
            plan.unhonoured.append(
                f"The GPU model limit ({wanted}) is not applied: node selection by GPU Feature "
                "Discovery labels is turned off, so the server may start on any GPU model."
            )
        else:
            plan.unhonoured.append(
                f"The GPU model limit ({wanted}) is not applied: no GPU model was chosen for this "
                "server, so it may start on any GPU model. List the cluster's GPU models in the "
                "hub configuration."
            )

    def _render_whole(
        self,
        share: GPUShare,
        *,
        gpu_model: str | None,
        gpu_memory_mib: int | None,
        node_selector: Mapping[str, str] | None = None,
    ) -> PodGPUPlan:
        """``count`` whole GPUs of the ``gpu`` resource on ``gpu_model`` nodes."""
        plan = self._new_plan()
        plan.resource_limits[self.resource_names["gpu"]] = str(share.count)
        self._select_model(plan, share, gpu_model)
        plan.node_selector.update(node_selector or {})
        self._add_whole_gpu_environment(plan, share, gpu_model, gpu_memory_mib)
        return plan
