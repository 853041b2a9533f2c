"""LocalGPUSpawner: course-time profiles and GPU shares on one multi-GPU workstation.

Servers are local processes (JupyterHub's LocalProcessSpawner, or its simple
variant for demos). Each one gets its share through its environment: the GPUs
CUDA sees, soft memory limits for PyTorch, JAX and TensorFlow, optional HAMi-core
enforcement, and its session end for the JupyterLab countdown.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from traitlets import Enum, Instance, List, Unicode, default

from .accounts import NoSuchAccount, UserAccount
from .cgroups import Cgroup, CgroupLimits, ResourceLimits, child_setup, format_bytes
from .course_profiles import CourseProfilesMixin, refusal_exception
from .inventory import discover_nvml_gpus, simulated_gpus
from .policy import GPUDevice
from .policy.catalog import is_protected_variable
from .policy.local_share import local_share_environment

SHARE_HOOKS = str(Path(__file__).parent / "share_hooks")


class LocalGPUSpawnerMixin(CourseProfilesMixin):
    """The local-process half: inventory, environment and server lifecycle."""

    gpu_inventory = Enum(
        ["auto", "nvml", "simulated"],
        "auto",
        config=True,
        help="""
        Where the GPU inventory comes from.

        - ``auto``: NVML when it finds GPUs, otherwise ``simulated_gpus``
        - ``nvml``: only real GPUs (none if NVML finds none)
        - ``simulated``: only ``simulated_gpus`` (demos and tests), labelled as simulated

        Example::

            c.LocalGPUSpawner.gpu_inventory = "nvml"
        """,
    )

    simulated_gpus = List(
        config=True,
        help="""
        GPUs to pretend this machine has when it has none (or when
        ``gpu_inventory = "simulated"``). They are shown as simulated everywhere.

        Example::

            c.LocalGPUSpawner.simulated_gpus = [{"model": "RTX 4090", "memory": "24GiB", "count": 2}]
        """,
    )

    hami_core_library = Unicode(
        "",
        config=True,
        help="""
        Path to HAMi-core's ``libvgpu.so``. When set, GPU servers run with it
        preloaded and ``CUDA_DEVICE_MEMORY_LIMIT``/``CUDA_DEVICE_SM_LIMIT`` set,
        which enforces the memory share instead of only suggesting it.

        Example::

            c.LocalGPUSpawner.hami_core_library = "/opt/hami/libvgpu.so"
        """,
    )

    cgroups = Instance(
        CgroupLimits,
        help="Where profile CPU and memory limits are enforced (``c.CgroupLimits``).",
    )

    @default("cgroups")
    def _default_cgroups(self) -> CgroupLimits:
        return CgroupLimits(parent=self)

    _inventory_cache: dict[tuple, list[GPUDevice]] = {}
    _cgroup: Cgroup | None = None
    stop_notice: str = ""
    """Why the last server ended unasked (out of memory), shown on the next spawn page."""

    def gpu_devices(self) -> list[GPUDevice]:
        key = (self.gpu_inventory, repr(self.simulated_gpus))
        devices = self._inventory_cache.get(key)
        if devices is None:
            devices = discover_nvml_gpus() if self.gpu_inventory in ("auto", "nvml") else []
            if not devices and self.gpu_inventory in ("auto", "simulated"):
                devices = simulated_gpus(self.simulated_gpus)
            self._inventory_cache[key] = devices
            self.log.info("GPU inventory: %s", ", ".join(d.label for d in devices) or "none")
        return devices

    def get_env(self):
        env = super().get_env()
        decision = self._decision
        if decision is None:
            return env
        profile = decision.entitlement.profile
        for name, value in profile.environment.variables.items():
            if not is_protected_variable(name):
                env[name] = value
        # Nothing the admin's or user's environment holds may loosen the share.
        for name in list(env):
            # JupyterHub's own variables and the host's library path are the hub's, not users'.
            if (
                is_protected_variable(name)
                and not name.startswith("JUPYTERHUB_")
                and (name != "LD_LIBRARY_PATH")
            ):
                env.pop(name)
        share_env = local_share_environment(
            profile.share,
            decision.allocation,
            self.capacity_pool.devices,
            profile_id=profile.id,
            session_end=decision.session_end,
            class_end=decision.entitlement.class_end,
            hami_core_library=self.hami_core_library or None,
        )
        if "GPUSPAWNER_TORCH_MEMORY_FRACTION" in share_env:
            current = env.get("PYTHONPATH")
            share_env["PYTHONPATH"] = SHARE_HOOKS + (os.pathsep + current if current else "")
        env.update(share_env)
        return env

    # -- who and within what limits the server runs ---------------------------------------

    runs_as_user_account = True
    """False for the demo spawner, which runs every server as the hub's own account."""

    @property
    def cgroup_name(self) -> str:
        name = f"{self.user.name}-{self.name}" if self.name else self.user.name
        return "server-" + re.sub(r"[^A-Za-z0-9_.-]", lambda m: f"_{ord(m.group()):x}", name)

    def make_preexec_fn(self, name):
        return child_setup(self._cgroup, super().make_preexec_fn(name))

    def _check_account(self) -> None:
        if not self.runs_as_user_account:
            return
        try:
            UserAccount.for_hub_user(self.user.name)
        except NoSuchAccount as missing:
            raise refusal_exception("no-account", str(missing), 403) from None

    def _end_cgroup(self) -> None:
        """After the server's process ended: note an out-of-memory kill, drop the group."""
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is None:
            return
        if cgroup.oom_kills() > 0:
            limit = cgroup.limits.memory_bytes
            self.stop_notice = (
                "Your last server was stopped because it used more than its memory limit"
                + (f" of {format_bytes(limit)}" if limit else "")
                + ". Work not saved before then is lost. Use less memory (free large "
                "variables, load data in pieces) or choose a profile with more memory."
            )
            self.log.warning("Server %s was killed for using more than its memory", self._log_name)
        cgroup.remove()

    async def start(self):
        self._progress_messages = ["Checking your profile, its class window and GPU capacity"]
        self._check_account()
        decision = self.decide_start()
        profile = decision.entitlement.profile
        limits = ResourceLimits(cpu=profile.resources.cpu, memory_bytes=profile.resources.memory)
        try:
            self._cgroup = self.cgroups.create(self.cgroup_name, limits, kill_together=True)
        except Exception:
            self.release_allocation()
            raise
        self.stop_notice = ""
        self.progress_note(self.describe_decision(decision))
        if profile.resources.cpu:
            self.cpu_limit = profile.resources.cpu
        if profile.resources.memory:
            self.mem_limit = profile.resources.memory
        if profile.environment.python:
            self.cmd = [str(Path(profile.environment.python) / "bin" / "jupyterhub-singleuser")]
        if profile.environment.default_url:
            self.default_url = profile.environment.default_url
        self.progress_note("Starting JupyterLab")
        try:
            address = await super().start()
        except BaseException:
            self.release_allocation()
            self._end_cgroup()
            raise
        # From now on the server's process, not the hub, holds its GPU slice.
        self.hold_allocation(self.pid)
        return address

    async def poll(self):
        status = await super().poll()
        cgroup = self._cgroup
        if status is None and cgroup is not None and cgroup.oom_kills() > 0:
            # Past its memory, the server goes as a whole, as a container does on Kubernetes
            # (cgroup v2 does this itself): a half-killed server only confuses its user.
            cgroup.kill_all()
            for _ in range(50):
                status = await super().poll()
                if status is not None:
                    break
                await asyncio.sleep(0.1)
        if status is not None:
            self._end_cgroup()
        return status

    async def stop(self, now=False):
        try:
            await super().stop(now=now)
        finally:
            self.release_allocation()
            self._end_cgroup()

    def get_state(self):
        state = super().get_state()
        course = self.course_state()
        if course:
            state["gpuspawner"] = course
        if self.stop_notice:  # kept past clear_state: the hub makes a new spawner after a stop
            state["gpuspawner_stop_notice"] = self.stop_notice
        return state

    def load_state(self, state):
        super().load_state(state)
        notice = state.get("gpuspawner_stop_notice") if isinstance(state, dict) else None
        self.stop_notice = notice if isinstance(notice, str) else ""
        if self.pid:  # a server started before a hub restart: find its group again
            self._cgroup = self.cgroups.of_process(self.pid, self.cgroup_name)
        self.restore_course_state(state, pid=self.pid)

    def clear_state(self):
        super().clear_state()
        self.release_allocation()
        self._profile_id = None


class LocalGPUSpawner(LocalGPUSpawnerMixin, LocalProcessSpawner):
    """Course profiles and GPU shares for servers run as the users' own system accounts."""


class SimpleLocalGPUSpawner(LocalGPUSpawnerMixin, SimpleLocalProcessSpawner):
    """The same for demos: every user runs as the hub's own account in a home under /tmp.

    Only for trying the hub out: users are not isolated from each other.
    """

    runs_as_user_account = False
