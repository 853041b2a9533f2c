"""A Grant: what one admission granted (a server's profile or a job's flavor, its GPU slice,
its session end), rendered for where it runs: a pod plan on Kubernetes, an environment on
one machine. :class:`~gpuspawner.core.admission.GPUAdmission` decides and renders
(:func:`render_grant`); spawners and executors apply the Grant as it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..accounting.budgets import Charge
from ..backends.base import PodGPUPlan, SharingBackend, UnsupportedShare, cpu_only_plan
from ..policy import Allocation, CapacityPool, Refusal, UserIdentity
from ..policy.catalog_fields import is_protected_variable
from ..policy.catalog_models import JobFlavor, SoftwareEnvironment
from ..policy.entitlements import Profile
from ..policy.local_share import local_share_environment
from ..policy.storage import Mount
from .cgroups import ResourceLimits

SHARE_HOOKS = str(Path(__file__).parent.parent / "share_hooks")
"""The folder whose ``sitecustomize`` applies ``GPUSPAWNER_TORCH_MEMORY_FRACTION``."""
SITE_PATHS = ("LD_LIBRARY_PATH", "PYTHONPATH")
"""The host's library and package paths: the admin's, kept under every share (a catalog
may not set them)."""


Target = Literal["local", "kubernetes"]


@dataclass(frozen=True)
class Grant:
    """A granted start of a server or a job, rendered for where it runs (plain data)."""

    kind: Literal["server", "job"]
    key: str
    """The allocation key in the capacity pool (``server:<user>/<name>``, ``job:<id>``)."""
    owner: str
    subject: str
    """The profile id (servers) or flavor id (jobs)."""
    title: str
    target: Target
    course_id: str | None = None
    allocation: Allocation | None = None
    share_description: str = "No GPU"
    """The GPU share in words, with the GPU it is on: "1/4 of an NVIDIA T4 (4 GiB)"."""
    share_summary: str = "no GPU"
    """The share alone, for the progress line before the GPU's label: "1/4 of a GPU"."""
    gpu_labels: tuple[str, ...] = ()
    """The GPUs held, as people read them ("node-a GPU 0: T4")."""
    node: str | None = None
    """Kubernetes: the node of the GPU the pool chose (``kubernetes.io/hostname``)."""
    nodes: int = 1
    """A job on several nodes: how many pods (one per node) hold the share each; the
    allocation holds the GPUs of all of them."""
    image: str | None = None
    python: str | None = None
    environment_id: str | None = None
    """The environment chosen among those the profile offers (None: it offers none)."""
    environment_title: str | None = None
    default_url: str | None = None
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    oom_retry_memory: int | None = None
    """A job flavor's ``oom_retry_memory`` in bytes: the memory of the next attempt of a job
    with a checkpoint that ran out of ``limits.memory_bytes`` (None: such a job ends)."""
    variables: dict[str, str] = field(default_factory=dict)
    """The catalog's own variables for the profile or flavor (no protected one)."""
    environment: dict[str, str] = field(default_factory=dict)
    """The variables that give and describe the GPU share (``GPUSPAWNER_*`` included); they
    win over every other variable."""
    plan: PodGPUPlan | None = None
    """Kubernetes: the pod changes that give the share (``environment`` is in it too)."""
    storage: tuple[Mount, ...] = ()
    """The folders the catalog mounts into the server (see ``policy/storage.py``)."""
    volumes: tuple[dict[str, Any], ...] = ()
    volume_mounts: tuple[dict[str, Any], ...] = ()
    """Kubernetes: the pod volumes and container mounts of ``storage``."""
    session_end: datetime | None = None
    class_end: datetime | None = None
    prewarmed: bool = False
    charge: Charge = field(default_factory=Charge)
    """The course or research allocation its GPU-hours count toward (the usage record)."""

    @property
    def describe(self) -> str:
        """One line for progress messages and logs."""
        title = self.title + (f" ({self.environment_title})" if self.environment_title else "")
        if self.allocation is None:
            return f"{title}: no GPU"
        where = ", ".join(self.gpu_labels)
        return f"{title}: {self.share_summary}" + (f" on {where}" if where else "")

    def environment_over(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (the admin's and user's variables) with this grant applied on top.

        Nothing in ``base`` may loosen or misdescribe the share: its protected variables
        go (JupyterHub's own and the host's library and package paths stay), the catalog's
        variables come next, the share's last. Locally, a memory fraction brings the hook
        that applies it on import, first on ``PYTHONPATH``, before the site's entries.
        """
        env = {
            name: value
            for name, value in base.items()
            if not is_protected_variable(name)
            or name.startswith("JUPYTERHUB_")
            or name in SITE_PATHS
        }
        env.update(self.variables)
        share = dict(self.environment)
        if self.target == "local" and "GPUSPAWNER_TORCH_MEMORY_FRACTION" in share:
            # The hooks first, then the site's own path (site packages on PYTHONPATH, as
            # environment modules on HPC systems set it): a share never loses the site.
            share["PYTHONPATH"] = paths_first(SHARE_HOOKS, base.get("PYTHONPATH"))
        env.update(share)
        return env

    def job_record(self) -> dict[str, Any] | None:
        """What a job's row keeps of its GPU (None without one): described and restorable."""
        if self.allocation is None:
            return None
        return {
            "description": self.share_description,
            "device_ids": list(self.allocation.device_ids),
            "allocation": self.allocation.to_dict(),
            "nodes": self.nodes,
        }


def paths_first(first: str, then: str | None) -> str:
    """The ``os.pathsep`` list ``first``, then the entries of ``then`` not already in it."""
    entries = [entry for entry in first.split(os.pathsep) if entry]
    for entry in (then or "").split(os.pathsep):
        if entry and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)


def render_grant(
    pool: CapacityPool,
    kind: Literal["server", "job"],
    key: str,
    user: UserIdentity,
    granted: Profile | JobFlavor,
    allocation: Allocation | None,
    object_name: str,
    *,
    target: Target,
    backend: Callable[[], SharingBackend],
    hami_core_library: str,
    log: logging.Logger,
    software: SoftwareEnvironment | None = None,
    **when: Any,
) -> Grant:
    """The grant of ``granted`` (a profile or a flavor) to ``user``, its share rendered for
    ``target`` (by ``backend`` on Kubernetes, an environment on one machine); a share the back
    end cannot give frees its booking in ``pool`` and is refused (409).
    ``software``: the environment chosen among those the profile offers, whose image
    and Python environment run instead of the profile's own.
    ``when``: a server's course, session end, class end and pre-warming."""
    share, environment, resources = granted.share, granted.environment, granted.resources
    if share is None:
        allocation = None
    devices = {d.id: d for d in pool.devices}
    held = [devices[i] for i in allocation.device_ids if i in devices] if allocation else []
    first = held[0] if held else None
    nodes = granted.nodes if isinstance(granted, JobFlavor) else 1
    each = f"{nodes} nodes, each with " if nodes > 1 else ""
    grant = Grant(
        kind=kind,
        nodes=nodes,
        key=key,
        owner=user.name,
        subject=granted.id,
        title=granted.title,
        target=target,
        allocation=allocation,
        share_description=(
            each
            + share.describe(first.model if first else None, first.memory_mib if first else None)
            if share is not None and allocation is not None
            else "No GPU"
        ),
        share_summary=each + share.describe() if share is not None and allocation else "no GPU",
        gpu_labels=tuple(d.label for d in held),
        image=software.image if software else environment.image,
        python=software.python if software else environment.python,
        environment_id=software.id if software else None,
        environment_title=software.title if software else None,
        default_url=environment.default_url,
        limits=ResourceLimits(cpu=resources.cpu, memory_bytes=resources.memory),
        oom_retry_memory=granted.oom_retry_memory if isinstance(granted, JobFlavor) else None,
        variables={k: v for k, v in environment.variables.items() if not is_protected_variable(k)},
        **when,
    )
    contract = {"GPUSPAWNER_PROFILE": grant.subject}
    if grant.session_end:
        contract["GPUSPAWNER_SESSION_END"] = grant.session_end.isoformat()
    if grant.class_end:
        contract["GPUSPAWNER_CLASS_END"] = grant.class_end.isoformat()
    if target == "local":
        env = local_share_environment(
            share,
            allocation,
            pool.devices,
            profile_id=grant.subject,
            session_end=grant.session_end,
            class_end=grant.class_end,
            hami_core_library=hami_core_library or None,
        )
        return replace(grant, environment=env)
    if share is None or allocation is None:
        plan = cpu_only_plan()
    else:
        try:
            plan = backend().render(
                share,
                gpu_model="NVIDIA " + first.model if first else None,
                gpu_memory_mib=first.memory_mib if first else None,
                name=f"{object_name or grant.key.replace(':', '-')}-gpu",
                workload=grant.kind,
                course=grant.course_id,
            )
        except UnsupportedShare as error:
            pool.release(grant.key)
            raise Refusal("unsupported", error.message, status=409) from None
    for note in plan.unhonoured:
        log.info("%s: %s", grant.key, note)
    return replace(
        grant,
        plan=plan,
        node=first.id.rsplit("/", 1)[0] if first and "/" in first.id else None,
        environment={**plan.environment, **contract},
    )
