"""The one admission of a process: :class:`GPUAdmission`, configured once
(``c.GPUAdmission.*``: the catalog, the sharing back end, HAMi-core, the allocation ledger,
the local GPU inventory, the usage record) and handed to its users with ``parent=self``.
It turns a request (a server profile or a job flavor, a user, now) into a
:class:`~gpuspawner.core.grant.Grant` or a :class:`~gpuspawner.policy.Refusal`: entitlement,
quotas, budgets and capacity (:func:`~gpuspawner.policy.admit`,
:func:`~gpuspawner.policy.admit_job`), then the share rendered for where it will run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from traitlets import Dict, Enum, Instance, List, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from ..accounting.budgets import charge_of_flavor, charge_of_profile
from ..backends import BACKENDS, make_backend
from ..backends.base import SharingBackend
from ..metrics import counted_admission
from ..policy import CapacityPool, Catalog, GPUDevice, Refusal, UserIdentity
from ..policy.admission import JobForecast, admit, admit_job, forecast_job
from ..policy.entitlements import entitlement_for
from ..policy.prewarm import verify_prewarm_token
from ..policy.storage import kubernetes_volumes, parse_mounts, parse_storage_source
from .catalog_source import shared_catalog_source
from .gpu_hours import GPUHourAccounting
from .grant import Grant, Target, render_grant
from .inventory import discover_nvml_gpus, simulated_gpus
from .telemetry import DeviceTelemetry, telemetry_from_config


def unknown_flavor(flavor_id: object, offered: Collection[str] | None = None) -> Refusal:
    """The one refusal for a job flavor the catalog does not have (any more)."""
    yours = f" (yours: {', '.join(offered) or 'none'})" if offered is not None else ""
    return Refusal(
        "unknown-flavor",
        f"There is no job flavor {str(flavor_id)[:80]!r} here{yours}. Choose one of the "
        "flavors the Run as Job dialog offers.",
        status=400,
    )


class GPUAdmission(GPUHourAccounting, LoggingConfigurable):
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
        grant = render_grant(
            pool,
            "server",
            key,
            user,
            profile,
            decision.allocation,
            object_name,
            **self._rendering(),
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
        return render_grant(
            pool,
            "job",
            key,
            user,
            decision.flavor,
            decision.allocation,
            object_name,
            **self._rendering(),
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
            return render_grant(
                pool,
                "job",
                key,
                user,
                decision.flavor,
                decision.allocation,
                "",
                **self._rendering(),
            )
        except Refusal:
            return None
        finally:
            pool.release(key)

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
                "probe",
                owner=user.name,
                profile_id=flavor.id,
                course_id=None,
                share=flavor.share,
                nodes=flavor.nodes,
            )
        budget = self.job_budget(catalog, user, flavor, now)
        if budget is not None and budget.exhausted:
            raise budget.refusal("job")

    def _rendering(self) -> dict[str, Any]:
        """How this admission renders a grant: :func:`~gpuspawner.core.grant.render_grant`'s
        target, back end, HAMi-core library and log."""
        return {
            "target": cast(Target, self.target),
            "backend": lambda: self.backend,
            "hami_core_library": self.hami_core_library,
            "log": self.log,
        }
