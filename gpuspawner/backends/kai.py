"""KAI-scheduler (NVIDIA's open-source Run:ai scheduler): shares, fair queues and priorities.

Design notes: docs/design/backends.md, "gpuspawner.backends.kai".
"""

from __future__ import annotations

import re
import string
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar, Literal

from gpuspawner.policy.share import GPUShare

from .base import NodeLabelBackend, PodGPUPlan, UnsupportedShare
from .framework_limits import memory_not_isolated

QUEUE_LABEL = "kai.scheduler/queue"
PRIORITY_LABEL = "priorityClassName"
FRACTION_ANNOTATION = "gpu-fraction"
MEMORY_ANNOTATION = "gpu-memory"
SCHEDULER_NAME = "kai-scheduler"
DEFAULT_QUEUE = "default-queue"
"""The queue KAI's quick start creates."""
SERVER_PRIORITY_CLASS = "build"
"""KAI's built-in class for interactive work: value 100, so not preemptible."""
JOB_PRIORITY_CLASS = "train"
"""KAI's built-in class for training: value 50, so preemptible."""

# A PriorityClass or Queue name that is also a label value: a lowercase DNS name, <= 63.
OBJECT_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")


def kai_fraction(fraction: Fraction) -> str:
    """``fraction`` in hundredths, rounded down (at least 0.01): ``"0.25"``, ``"0.5"``, ``"0.33"``."""
    hundredths = max(1, int(fraction * 100))
    return str(Decimal(hundredths) / 100)


def _check_name(what: str, value: str) -> None:
    if not OBJECT_NAME.match(value):
        raise ValueError(
            f"The KAI-scheduler {what} must be a lowercase name of letters, digits, '-' and "
            f"'.', at most 63 characters, got {value!r}."
        )


class KAISchedulerBackend(NodeLabelBackend):
    """``make_backend("kai", queue="{course}")``: slices, queues and priorities by KAI-scheduler."""

    name: ClassVar[str] = "kai"
    default_resource_names = {"gpu": "nvidia.com/gpu"}

    def __init__(
        self,
        *,
        queue: str = DEFAULT_QUEUE,
        queue_without_course: str = DEFAULT_QUEUE,
        server_priority_class: str | None = SERVER_PRIORITY_CLASS,
        job_priority_class: str | None = JOB_PRIORITY_CLASS,
        scheduler_name: str = SCHEDULER_NAME,
        **common: Any,
    ) -> None:
        """``queue``: the KAI queue of every pod, or a pattern with ``{course}`` for one queue
        per course (``"course-{course}"``); ``queue_without_course``: the queue of what has no
        course (jobs, standing profiles) when ``queue`` names ``{course}``;
        ``server_priority_class``/``job_priority_class``: the priority classes of notebook
        servers and of jobs (None leaves KAI's default, ``train``, which is preemptible)."""
        fields = {f for _, f, _, _ in string.Formatter().parse(queue) if f is not None}
        if fields - {"course"}:
            raise ValueError(
                "The KAI-scheduler queue may name only {course}, for one queue per course, "
                f"got {queue!r}."
            )
        _check_name("queue", queue.replace("{course}", "c"))
        _check_name("queue_without_course", queue_without_course)
        for what, value in (
            ("server_priority_class", server_priority_class),
            ("job_priority_class", job_priority_class),
        ):
            if value is not None:
                _check_name(what, value)
        super().__init__(**common)
        self.queue = queue
        self.queue_without_course = queue_without_course
        self.priority_classes = {"server": server_priority_class, "job": job_priority_class}
        self.scheduler_name = scheduler_name

    def queue_for(self, course: str | None) -> str:
        """The KAI queue of a workload of ``course`` (None: no course)."""
        if "{course}" not in self.queue:
            return self.queue
        if course is None:
            return self.queue_without_course
        queue = self.queue.replace("{course}", course)
        if not OBJECT_NAME.match(queue):
            raise UnsupportedShare(
                f"The KAI-scheduler queue {queue!r} of the course {course} is not a valid queue "
                "name (at most 63 lowercase letters, digits, '-' and '.'). Ask the hub admins "
                "to shorten the queue pattern or the course id."
            )
        return queue

    def _add_workload(
        self, plan: PodGPUPlan, *, workload: Literal["server", "job"], course: str | None
    ) -> None:
        plan.labels[QUEUE_LABEL] = self.queue_for(course)
        priority = self.priority_classes[workload]
        if priority:
            plan.labels[PRIORITY_LABEL] = priority

    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        if share.is_whole:
            plan = self._render_whole(share, gpu_model=gpu_model, gpu_memory_mib=gpu_memory_mib)
        else:
            plan = self._new_plan()
            self._select_model(plan, share, gpu_model)
            self._add_slice(plan, share, gpu_model, gpu_memory_mib)
        plan.scheduler_name = self.scheduler_name
        return plan

    def _add_slice(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        self._refuse_memory_beyond_device(share, gpu_model, gpu_memory_mib)
        fraction, memory_mib = share.fraction, share.memory_mib
        if fraction == 1:
            # All of one GPU's turns with a memory limit: KAI's fractions stop below 1.
            plan.resource_limits[self.resource_names["gpu"]] = "1"
        elif fraction is None or (
            memory_mib is not None
            and gpu_memory_mib is not None
            and memory_mib > fraction * gpu_memory_mib
        ):
            assert memory_mib is not None
            plan.annotations[MEMORY_ANNOTATION] = str(memory_mib)
        else:
            asked = kai_fraction(fraction)
            plan.annotations[FRACTION_ANNOTATION] = asked
            if Fraction(asked) != fraction:
                plan.unhonoured.append(
                    f"KAI-scheduler takes GPU fractions in hundredths, so this share is placed "
                    f"as {asked} of a GPU."
                )
        memory = self._add_soft_memory_limits(plan, share, gpu_model, gpu_memory_mib, fraction)
        if memory is not None and gpu_memory_mib is not None:
            plan.unhonoured.append(memory_not_isolated("KAI-scheduler", memory))
        else:
            plan.unhonoured.append(
                "GPU memory is not isolated by KAI-scheduler, and no memory limit is set for "
                "PyTorch, JAX or TensorFlow because the GPU's memory size is unknown."
            )
        if share.compute_min_pct:
            plan.unhonoured.append(
                f"A compute minimum of {share.compute_min_pct}% is not guaranteed: KAI-scheduler "
                "shares a GPU by its memory, and the servers on it take turns for compute."
            )
        if share.compute_max_pct is not None and share.compute_max_pct < 100:
            plan.unhonoured.append(
                f"A compute maximum of {share.compute_max_pct}% is not enforced by "
                "KAI-scheduler: a server alone on the GPU can use all of it."
            )
