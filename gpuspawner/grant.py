"""One admission, one Grant: the decision that travels from the policy to the process.

:class:`GPUAdmission` is configured once per process (``c.GPUAdmission.*``: the catalog,
the sharing back end, HAMi-core, the allocation ledger, the local GPU inventory) and
handed to its users with ``parent=self``, as JupyterHub hands its settings to spawners.
It turns a request (a server profile or a job flavor, a user, now) into a :class:`Grant`
or a :class:`~gpuspawner.policy.Refusal`: entitlement, quotas and capacity
(:func:`~gpuspawner.policy.admit`, :func:`~gpuspawner.policy.admit_job`), then the
rendering of the GPU share for where it will run (a pod plan on Kubernetes, an
environment on one machine).

Both spawners and both job executors apply the Grant as it is: they read no catalog,
render no share and check no entitlement again.

Shared core: imports neither JupyterHub's hub, KubeSpawner, kubernetes_asyncio nor
Jupyter Server (an import-linter contract keeps it so).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

from sqlalchemy.exc import SQLAlchemyError
from traitlets import Dict, Enum, Instance, List, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from .accounting.budgets import (
    BudgetStatus,
    Charge,
    charge_of_flavor,
    charge_of_profile,
    job_budget,
    server_budget,
)
from .accounting.intervals import UsageInterval, allocation_share
from .accounting.store import UsageStore, shared_usage_store
from .backends import BACKENDS, make_backend
from .backends.base import PodGPUPlan, SharingBackend, UnsupportedShare, cpu_only_plan
from .catalog_source import shared_catalog_source
from .cgroups import ResourceLimits
from .inventory import discover_nvml_gpus, simulated_gpus
from .metrics import counted_admission
from .policy import Allocation, CapacityPool, Catalog, GPUDevice, Refusal, UserIdentity
from .policy.admission import JobForecast, admit, admit_job, forecast_job
from .policy.catalog import JobFlavor, SoftwareEnvironment, is_protected_variable
from .policy.entitlements import Entitlement, Profile, entitlement_for
from .policy.local_share import local_share_environment
from .policy.prewarm import verify_prewarm_token
from .policy.storage import Mount, kubernetes_volumes, parse_mounts, parse_storage_source
from .telemetry import DeviceTelemetry, telemetry_from_config

SHARE_HOOKS = str(Path(__file__).parent / "share_hooks")
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
        }


def paths_first(first: str, then: str | None) -> str:
    """The ``os.pathsep`` list ``first``, then the entries of ``then`` not already in it."""
    entries = [entry for entry in first.split(os.pathsep) if entry]
    for entry in (then or "").split(os.pathsep):
        if entry and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)


def unknown_flavor(flavor_id: object, offered: Collection[str] | None = None) -> Refusal:
    """The one refusal for a job flavor the catalog does not have (any more)."""
    yours = f" (yours: {', '.join(offered) or 'none'})" if offered is not None else ""
    return Refusal(
        "unknown-flavor",
        f"There is no job flavor {str(flavor_id)[:80]!r} here{yours}. Choose one of the "
        "flavors the Run as Job dialog offers.",
        status=400,
    )


class GPUAdmission(LoggingConfigurable):
    """The one admission of a process: configured once, it turns requests into Grants.

    The hub's spawners, the job service and its executors take it from their parent
    (``c.GPUAdmission.*``); see the module docstring.
    """

    catalog_path = Unicode(
        "",
        config=True,
        help="""
        The course catalog: one YAML file or a folder of them. Servers' profiles and jobs'
        flavors come from it. Reloaded when a file changes; an invalid new catalog is
        logged and the last good one stays in force (check edits with
        ``gpuspawner check PATH``).

        Example::

            c.GPUAdmission.catalog_path = "/etc/jupyterhub/courses/"
        """,
    )

    sharing_backend = Unicode(
        "whole",
        config=True,
        help=f"""
        The GPU sharing technology of the Kubernetes cluster: one of
        {", ".join(sorted(BACKENDS))}. Servers' and jobs' shares are rendered by it.

        Example::

            c.GPUAdmission.sharing_backend = "hami"
        """,
    )

    @validate("sharing_backend")
    def _known_backend(self, proposal: Any) -> str:
        if proposal.value not in BACKENDS:
            raise ValueError(
                f"sharing_backend must be one of {', '.join(sorted(BACKENDS))}, "
                f"not {proposal.value!r}"
            )
        return str(proposal.value)

    sharing_backend_config = Dict(
        config=True,
        help="""
        Settings of the sharing back end: renamed resources, replicas, MIG strategy...

        Example::

            c.GPUAdmission.sharing_backend = "time-slicing"
            c.GPUAdmission.sharing_backend_config = {"replicas": 4}
        """,
    )

    hami_core_library = Unicode(
        "",
        config=True,
        help="""
        One machine: HAMi-core's ``libvgpu.so``. When set, GPU servers and jobs run with
        it preloaded and ``CUDA_DEVICE_MEMORY_LIMIT``/``CUDA_DEVICE_SM_LIMIT`` set, which
        enforces the memory share instead of only suggesting it.

        Example::

            c.GPUAdmission.hami_core_library = "/opt/hami/libvgpu.so"
        """,
    )

    allocation_ledger = Unicode(
        "",
        config=True,
        help="""
        One machine: the file, shared by the hub and the job service, holding who holds
        which GPU slice, so servers and "Run as Job" jobs never get the same slice.
        Empty: each process keeps its allocations in memory.

        Example::

            c.GPUAdmission.allocation_ledger = "/var/lib/jupyterhub/gpu-allocations.json"
        """,
    )

    usage_db_url = Unicode(
        "",
        config=True,
        help="""
        The GPU-hour usage record (a SQLAlchemy URL: a SQLite file, or PostgreSQL), shared
        by the hub and the job service: one row per server or job holding a GPU share,
        for ``gpuspawner usage`` reports and the catalog's ``budget`` limits. Empty: no
        record, and budgets are not enforced (a warning says so).

        Example::

            c.GPUAdmission.usage_db_url = "sqlite:////var/lib/jupyterhub/gpu-usage.sqlite"
        """,
    )

    experimental_root = Unicode(
        "",
        config=True,
        help="""
        One machine: the experimental zone's folder (``settings.experimental_zone`` in the
        catalog), holding a folder per user; a profile's ``source: experimental`` storage
        is ``<root>/<user>/<entry name>``, linked into the home. The course-sessions
        service wipes it every day (give it the same folder: ``course_sessions_service(
        experimental_root=...)``). Make it a folder of its own that holds no home and
        no production storage. Empty: profiles with experimental storage are refused.

        Example::

            c.GPUAdmission.experimental_root = "/srv/experimental"
        """,
    )

    gpu_inventory = Enum(
        ["auto", "nvml", "simulated"],
        "auto",
        config=True,
        help="""
        One machine: where the GPU inventory comes from (on Kubernetes, node labels).

        - ``auto``: NVML when it finds GPUs, otherwise ``simulated_gpus``
        - ``nvml``: only real GPUs (none if NVML finds none)
        - ``simulated``: only ``simulated_gpus`` (demos and tests), labelled as simulated

        Example::

            c.GPUAdmission.gpu_inventory = "nvml"
        """,
    )

    simulated_gpus: List[Any] = List(
        config=True,
        help="""
        One machine: GPUs to pretend it has when it has none (or with
        ``gpu_inventory = "simulated"``). They are shown as simulated everywhere.

        Example::

            c.GPUAdmission.simulated_gpus = [{"model": "RTX 4090", "memory": "24GiB", "count": 2}]
        """,
    )

    telemetry_path = Unicode(
        "",
        config=True,
        help="""
        One machine: a JSON file of simulated GPU readings (utilisation, memory,
        temperature per GPU) for demos and tests; empty reads NVML. The hub's metrics and
        GPU-aware reclaim both read telemetry from here (``device_telemetry()``). On
        Kubernetes the DCGM exporter provides readings instead (hub_config/monitoring/).

        Example::

            c.GPUAdmission.telemetry_path = "/tmp/gpu-readings.json"
        """,
    )

    prewarm_secret = Unicode(
        config=True,
        help="""
        Secret shared with the course-sessions service, so that only it can start
        servers before a class opens (pre-warming). Defaults to the environment
        variable ``GPUSPAWNER_PREWARM_SECRET``; empty disables pre-warming.

        Example::

            c.GPUAdmission.prewarm_secret = os.environ["GPUSPAWNER_PREWARM_SECRET"]
        """,
    )

    @default("prewarm_secret")
    def _default_prewarm_secret(self) -> str:
        return os.environ.get("GPUSPAWNER_PREWARM_SECRET", "")

    target = Enum(
        ["local", "kubernetes"],
        "local",
        help="Where granted servers and jobs run: set by the spawner or the job service.",
    )

    fallback_catalog = Instance(
        Catalog,
        allow_none=True,
        help="The catalog without ``catalog_path`` (the job service's one CPU flavor).",
    )

    _inventory_cache: dict[tuple[str, str], list[GPUDevice]] = {}
    _telemetry: tuple[str, DeviceTelemetry] | None = None

    # -- inputs --------------------------------------------------------------------------

    def catalog(self) -> Catalog:
        """The catalog in force; raises :class:`Refusal` (503) when there is none."""
        if not self.catalog_path:
            if self.fallback_catalog is not None:
                return self.fallback_catalog
            raise Refusal(
                "no-catalog",
                "This hub has no course catalog configured; ask the hub admins to set "
                "c.GPUAdmission.catalog_path.",
                status=503,
            )
        catalog = shared_catalog_source(self.catalog_path, self.log).current()
        if catalog is None:
            raise Refusal(
                "bad-catalog",
                "The course catalog has errors, so nothing can start right now. "
                "The hub admins can see the details in the log.",
                status=503,
            )
        return catalog

    def catalog_in_force(self) -> Catalog | None:
        """The catalog in force, or None while there is none (no catalog, or errors):
        for callers that list or wait rather than refuse."""
        try:
            return self.catalog()
        except Refusal:
            return None

    def local_devices(self) -> list[GPUDevice]:
        """This machine's GPUs: NVML's, or the simulated ones (read once per process)."""
        key = (self.gpu_inventory, repr(self.simulated_gpus))
        devices = self._inventory_cache.get(key)
        if devices is None:
            devices = discover_nvml_gpus() if self.gpu_inventory in ("auto", "nvml") else []
            if not devices and self.gpu_inventory in ("auto", "simulated"):
                devices = simulated_gpus(self.simulated_gpus)
            self._inventory_cache[key] = devices
            self.log.info("GPU inventory: %s", ", ".join(d.label for d in devices) or "none")
        return devices

    def device_telemetry(self) -> DeviceTelemetry:
        """This machine's GPU readings: the simulated file of ``telemetry_path``, or NVML."""
        key = self.telemetry_path
        if self._telemetry is None or self._telemetry[0] != key:
            self._telemetry = (key, telemetry_from_config(key or None))
        return self._telemetry[1]

    @property
    def backend(self) -> SharingBackend:
        return make_backend(self.sharing_backend, **self.sharing_backend_config)

    # -- decisions -----------------------------------------------------------------------

    @counted_admission("server")
    def grant_server(
        self,
        pool: CapacityPool,
        user: UserIdentity,
        profile_id: str,
        *,
        key: str,
        now: datetime,
        server_name: str = "",
        prewarm_token: str | None = None,
        object_name: str = "",
        expand: Callable[[str], str] | None = None,
        environment: object = None,
    ) -> Grant:
        """Admit a server start and render it; books its slice in ``pool``.

        ``prewarm_token``: from the course-sessions service, for a start before the class
        opens. ``object_name``: the pod's name, for objects the plan creates (DRA claims).
        ``expand``: fills ``{username}`` in storage claims and paths (KubeSpawner's
        ``_expand_user_properties`` on Kubernetes). ``environment``: the id of the
        environment the user chose among those the profile offers (None: its first).
        Raises :class:`Refusal`.
        """
        catalog = self.catalog()
        prewarm = False
        if prewarm_token is not None:
            entitlement = entitlement_for(catalog, user, profile_id, now)
            class_start = entitlement.class_start if entitlement else None
            if class_start is None or not verify_prewarm_token(
                prewarm_token, self.prewarm_secret, user.name, server_name, profile_id, class_start
            ):
                raise Refusal(
                    "invalid",
                    "The pre-warm token is not valid for this server and class.",
                    status=403,
                )
            prewarm = True
        decision = admit(
            catalog,
            pool,
            user,
            profile_id,
            key=key,
            now=now,
            prewarm=prewarm,
            environment=environment,
        )
        profile = decision.entitlement.profile
        self._within_budget(
            pool, key, "server", self.server_budget(catalog, decision.entitlement, user, now)
        )
        mounts = parse_mounts(profile.storage)
        grant = self._render(
            pool,
            "server",
            key,
            user,
            profile,
            decision.allocation,
            object_name,
            course_id=profile.course_id,
            session_end=decision.session_end,
            class_end=decision.entitlement.class_end,
            prewarmed=decision.prewarmed,
            charge=charge_of_profile(profile),
            software=decision.environment,
        )
        if not mounts:
            return grant
        if self.target == "local":
            return replace(grant, storage=mounts)
        zone = catalog.settings.experimental_zone
        try:
            volumes, volume_mounts = kubernetes_volumes(
                mounts,
                expand or (lambda text: text),
                parse_storage_source(zone.volume) if zone and zone.volume else None,
            )
        except ValueError as error:
            pool.release(key)
            raise Refusal(
                "storage",
                f"{profile.title} cannot start: {error}. Tell the hub admins.",
                status=503,
            ) from None
        return replace(
            grant, storage=mounts, volumes=tuple(volumes), volume_mounts=tuple(volume_mounts)
        )

    @counted_admission("job")
    def grant_job(
        self,
        pool: CapacityPool,
        user: UserIdentity,
        flavor_id: str | None,
        *,
        key: str,
        now: datetime,
        running_jobs: Collection[str],
        object_name: str = "",
    ) -> Grant:
        """Admit a job start and render it; books its slice in ``pool``.

        ``running_jobs``: the flavor ids of the jobs ``user`` runs now. Raises
        :class:`Refusal`; :data:`~gpuspawner.policy.admission.WAIT_CODES` mean "wait".
        """
        catalog = self.catalog()
        if (flavor_id or "") not in catalog.flavors_by_id:
            raise unknown_flavor(flavor_id)
        decision = admit_job(
            catalog, pool, user, flavor_id, key=key, now=now, running_jobs=running_jobs
        )
        self._within_budget(pool, key, "job", self.job_budget(catalog, user, decision.flavor, now))
        return self._render(
            pool,
            "job",
            key,
            user,
            decision.flavor,
            decision.allocation,
            object_name,
            charge=charge_of_flavor(catalog, user, decision.flavor, now),
        )

    def forecast_job(
        self,
        pool: CapacityPool,
        user: UserIdentity,
        flavor_id: str | None,
        *,
        now: datetime,
        running_jobs: Collection[str],
        queued: int = 0,
    ) -> JobForecast:
        """Whether a job of ``flavor_id`` would start now or wait, and why, for the Run as
        Job dialog: :meth:`grant_job`'s decision without booking or counting anything
        (``queued``: jobs already waiting on the flavor). Raises :class:`Refusal` for a
        flavor the user can never run."""
        catalog = self.catalog()
        if (flavor_id or "") not in catalog.flavors_by_id:
            raise unknown_flavor(flavor_id)
        return forecast_job(
            catalog, pool, user, flavor_id, now=now, running_jobs=running_jobs, queued=queued
        )

    def preview_job(
        self,
        pool: CapacityPool,
        user: UserIdentity,
        flavor_id: str | None,
        *,
        now: datetime,
        running_jobs: Collection[str],
    ) -> Grant | None:
        """The grant a job of ``flavor_id`` would get now (its GPU and environment), for
        starting its runner ahead; None when it would not start now. Nothing stays booked
        (the slice is freed before this returns) and nothing is counted."""
        catalog = self.catalog()
        if (flavor_id or "") not in catalog.flavors_by_id:
            return None
        key = "job:preview"
        try:
            decision = admit_job(
                catalog, pool, user, flavor_id, key=key, now=now, running_jobs=running_jobs
            )
            return self._render(pool, "job", key, user, decision.flavor, decision.allocation, "")
        except Refusal:
            return None
        finally:
            pool.release(key)

    # -- GPU-hours: the usage record and budgets -----------------------------------------

    def usage_record(self) -> UsageStore | None:
        """The usage record of ``usage_db_url`` (one per process), or None without one, or
        while it cannot be opened (logged: accounting must never stop a class)."""
        if not self.usage_db_url:
            return None
        try:
            return shared_usage_store(self.usage_db_url)
        except SQLAlchemyError:
            self.log.exception("The GPU-hour usage record cannot be opened")
            return None

    def server_budget(
        self, catalog: Catalog, entitlement: Entitlement, user: UserIdentity, now: datetime
    ) -> BudgetStatus | None:
        """The budget a server of ``entitlement``'s profile draws on now, for the spawn card
        and the admission (None: none applies, or there is no usage record)."""
        profile = entitlement.profile
        if profile.share is None or not (
            (profile.course and profile.course.budget)
            or (profile.research and profile.research.budget)
        ):
            return None
        usage = self._usage_for_budgets()
        if usage is None:
            return None
        try:
            return server_budget(catalog, profile, entitlement.role, user, usage, now)
        except SQLAlchemyError:
            self.log.exception("The usage record cannot be read: %s starts unbudgeted", profile.id)
            return None

    def job_budget(
        self, catalog: Catalog, user: UserIdentity, flavor: JobFlavor, now: datetime
    ) -> BudgetStatus | None:
        """The budget a job of ``flavor`` draws on now (None: none applies, or no record)."""
        courses = [catalog.courses_by_id.get(c) for c in flavor.access.courses]
        grants = [catalog.research_by_id.get(r) for r in flavor.access.research]
        if flavor.share is None or not (
            any(c and c.budget for c in courses) or any(g and g.budget for g in grants)
        ):
            return None
        usage = self._usage_for_budgets()
        if usage is None:
            return None
        try:
            return job_budget(catalog, user, flavor, usage, now)
        except SQLAlchemyError:
            self.log.exception("The usage record cannot be read: %s runs unbudgeted", flavor.id)
            return None

    _warned_no_record = False

    def _usage_for_budgets(self) -> UsageStore | None:
        # A usage record that cannot be read lets starts through (logged): accounting must
        # never stop a class.
        usage = self.usage_record()
        if usage is None and not GPUAdmission._warned_no_record:
            GPUAdmission._warned_no_record = True
            self.log.warning(
                "The catalog sets GPU-hour budgets but there is no usage record to count "
                "them: set c.GPUAdmission.usage_db_url. Budgets are not enforced."
            )
        return usage

    @staticmethod
    def _within_budget(
        pool: CapacityPool, key: str, kind: Literal["server", "job"], status: BudgetStatus | None
    ) -> None:
        """Refuse (and free the booking of) a start whose budget is used up."""
        if status is not None and status.exhausted:
            pool.release(key)
            raise status.refusal(kind)

    def record_start(
        self, grant: Grant, *, name: str, groups: Collection[str], now: datetime
    ) -> None:
        """Open the usage interval of a started server or job holding a GPU share (a no-op
        without a share or a usage record). A new start: an interval left open for the same
        key is stale and closed now."""
        usage = self.usage_record()
        if usage is None or grant.allocation is None:
            return
        interval = UsageInterval(
            key=grant.key,
            kind=grant.kind,
            owner=grant.owner,
            name=name,
            profile=grant.subject,
            share=allocation_share(grant.allocation),
            started=now,
            course=grant.charge.course,
            allocation=grant.charge.allocation,
            groups=tuple(groups),
        )
        try:
            usage.open(interval, grant.allocation.device_ids, fresh=True)
        except Exception:  # accounting must never stop a class: log, and go on
            self.log.exception("Could not record the start of %s in the usage record", grant.key)

    def record_end(self, key: str, now: datetime) -> None:
        """Close the usage interval of ``key`` (a server or job that ended), if open."""
        usage = self.usage_record()
        if usage is None:
            return
        try:
            usage.close_interval(key, now)
        except Exception:
            self.log.exception("Could not record the end of %s in the usage record", key)

    def check_job_flavor(
        self, devices: list[GPUDevice], user: UserIdentity, flavor_id: str | None, *, now: datetime
    ) -> None:
        """Raise :class:`Refusal` when a job of this flavor would never start, so it is
        refused when submitted rather than queued: an unknown flavor, a share no GPU on
        ``devices`` could hold even when idle, or a GPU-hour budget ``user`` has used up."""
        catalog = self.catalog()
        flavor = catalog.flavors_by_id.get(flavor_id or "")
        if flavor is None:
            raise unknown_flavor(flavor_id)
        if flavor.share is not None:
            CapacityPool(devices).allocate(  # "ever", not "now": ask an idle machine
                "probe", owner=user.name, profile_id=flavor.id, course_id=None, share=flavor.share
            )
        budget = self.job_budget(catalog, user, flavor, now)
        if budget is not None and budget.exhausted:
            raise budget.refusal("job")

    def _render(
        self,
        pool: CapacityPool,
        kind: Literal["server", "job"],
        key: str,
        user: UserIdentity,
        granted: Profile | JobFlavor,
        allocation: Allocation | None,
        object_name: str,
        software: SoftwareEnvironment | None = None,
        **when: Any,
    ) -> Grant:
        """The grant of ``granted`` (a profile or a flavor), its share rendered for
        ``target``; a share the back end cannot give frees its booking and is refused (409).
        ``software``: the environment chosen among those the profile offers, whose image
        and Python environment run instead of the profile's own.
        ``when``: a server's course, session end, class end and pre-warming."""
        share, environment, resources = granted.share, granted.environment, granted.resources
        if share is None:
            allocation = None
        devices = {d.id: d for d in pool.devices}
        held = [devices[i] for i in allocation.device_ids if i in devices] if allocation else []
        first = held[0] if held else None
        grant = Grant(
            kind=kind,
            key=key,
            owner=user.name,
            subject=granted.id,
            title=granted.title,
            target=cast(Target, self.target),
            allocation=allocation,
            share_description=(
                share.describe(first.model if first else None, first.memory_mib if first else None)
                if share is not None and allocation is not None
                else "No GPU"
            ),
            share_summary=share.describe() if share is not None and allocation else "no GPU",
            gpu_labels=tuple(d.label for d in held),
            image=software.image if software else environment.image,
            python=software.python if software else environment.python,
            environment_id=software.id if software else None,
            environment_title=software.title if software else None,
            default_url=environment.default_url,
            limits=ResourceLimits(cpu=resources.cpu, memory_bytes=resources.memory),
            oom_retry_memory=granted.oom_retry_memory if isinstance(granted, JobFlavor) else None,
            variables={
                k: v for k, v in environment.variables.items() if not is_protected_variable(k)
            },
            **when,
        )
        contract = {"GPUSPAWNER_PROFILE": grant.subject}
        if grant.session_end:
            contract["GPUSPAWNER_SESSION_END"] = grant.session_end.isoformat()
        if grant.class_end:
            contract["GPUSPAWNER_CLASS_END"] = grant.class_end.isoformat()
        if self.target == "local":
            env = local_share_environment(
                share,
                allocation,
                pool.devices,
                profile_id=grant.subject,
                session_end=grant.session_end,
                class_end=grant.class_end,
                hami_core_library=self.hami_core_library or None,
            )
            return replace(grant, environment=env)
        if share is None or allocation is None:
            plan = cpu_only_plan()
        else:
            try:
                plan = self.backend.render(
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
            self.log.info("%s: %s", grant.key, note)
        return replace(
            grant,
            plan=plan,
            node=first.id.rsplit("/", 1)[0] if first and "/" in first.id else None,
            environment={**plan.environment, **contract},
        )
