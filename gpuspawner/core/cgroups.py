"""CPU and memory limits for local servers and jobs, as Linux control groups.

Design notes: docs/design/core.md, "gpuspawner.core.cgroups".
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from traitlets import Enum, TraitError, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from .hub_instance import HUB_ID_VARIABLE, HubIdError, process_scope, valid_hub_id

log = logging.getLogger(__name__)

CPU_PERIOD_US = 100_000
GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,200}$")


@dataclass(frozen=True)
class ResourceLimits:
    """What a server or job may use: CPU cores (fractions allowed) and memory in bytes."""

    cpu: float | None = None
    memory_bytes: int | None = None

    @property
    def empty(self) -> bool:
        return self.cpu is None and self.memory_bytes is None

    def describe(self) -> str:
        parts = []
        if self.cpu is not None:
            parts.append(f"{self.cpu:g} CPU" + ("" if self.cpu == 1 else "s"))
        if self.memory_bytes is not None:
            parts.append(f"{format_bytes(self.memory_bytes)} of memory")
        return " and ".join(parts) or "no limits"


def format_bytes(size: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2)):
        if size >= factor:
            value = size / factor
            return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{size} bytes"


class CgroupsUnavailable(RuntimeError):
    """Limits cannot be enforced here; the message says why and what to change."""


# -- one group -------------------------------------------------------------------------------


class Cgroup:
    """One server's or job's group: a folder per hierarchy (one with v2, one per controller with v1)."""

    def __init__(self, name: str, folders: dict[str, Path], limits: ResourceLimits, version: int):
        self.name = name
        self.folders = folders
        """Controller (``memory``, ``cpu``; ``unified`` for v2) → the group's folder."""
        self.limits = limits
        self.version = version

    def __repr__(self) -> str:
        return f"Cgroup({self.name!r}, v{self.version}, {self.limits.describe()})"

    def join(self, pid: int | None = None) -> None:
        """Move ``pid`` (default: this process) into the group.

        Safe between fork and exec: plain writes, no allocation worth the name, no locks.
        """
        text = str(pid if pid is not None else os.getpid())
        for folder in self.folders.values():
            with open(folder / "cgroup.procs", "w") as procs:
                procs.write(text)

    def processes(self) -> list[int]:
        pids: set[int] = set()
        for folder in self.folders.values():
            try:
                pids.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
            except OSError:
                continue
        return sorted(pids)

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for passing its memory limit."""
        folder = self.folders.get("unified" if self.version == 2 else "memory")
        if folder is None:
            return 0
        source = folder / ("memory.events" if self.version == 2 else "memory.oom_control")
        try:
            for line in source.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self) -> None:
        """SIGKILL whatever still runs in the group (a kernel its runner left behind)."""
        unified = self.folders.get("unified")
        if unified is not None and (unified / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (unified / "cgroup.kill").write_text("1")
            return
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, *, attempts: int = 50) -> None:
        """Kill what is left and delete the group (its counters go with it), and its hub's
        folder when that holds no other group now."""
        if self.processes():
            self.kill_all()
        for folder in self.folders.values():
            for _ in range(attempts):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY:
                        log.warning("Could not remove the cgroup %s: %s", folder, error)
                        break
                    time.sleep(0.02)  # the killed processes are being reaped
            # Busy while the hub has other groups; made again for its next one.
            with contextlib.suppress(OSError):
                folder.parent.rmdir()


def child_setup(
    cgroup: Cgroup | None, then: Callable[[], None] | None = None
) -> Callable[[], None]:
    """A ``preexec_fn`` for a server or job: join ``cgroup`` while still root, before the
    child can allocate anything, then ``then`` (dropping to its owner's account)."""

    def setup() -> None:  # in the child, between fork and exec
        if cgroup is not None:
            cgroup.join()
        if then is not None:
            then()

    return setup


# -- hierarchies -----------------------------------------------------------------------------


def _own_paths(proc_self_cgroup: Path) -> dict[str, str]:
    """Controller → this process's cgroup path (``""`` is the v2 unified hierarchy)."""
    paths: dict[str, str] = {}
    for line in proc_self_cgroup.read_text().splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            paths[""] = path
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def _mounts(proc_mounts: Path) -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, options) of every cgroup mount."""
    found = []
    for line in proc_mounts.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            found.append((fields[1], fields[2], set(fields[3].split(","))))
    return found


class CgroupHierarchy(ABC):
    """Where this process may make groups, and how limits are written there."""

    version = 0

    def __init__(
        self, mounts: dict[str, Path], bases: dict[str, Path], group_name: str, hub_id: str
    ):
        self.mounts = mounts
        """Controller (``unified`` for v2) → where its hierarchy is mounted."""
        self.bases = bases
        """Controller → this process's own cgroup folder in that hierarchy."""
        self.group_name = group_name
        self.hub_id = hub_id
        """The hub instance (or lone process) whose groups these are: they live in a folder
        of that name, and nothing outside it is ever removed or killed."""

    def describe(self) -> str:
        folders = ", ".join(str(self.hub_folder(c)) for c in self.bases)
        return f"cgroup v{self.version} ({folders})"

    def hub_folder(self, controller: str) -> Path:
        """This hub's folder in ``controller``'s hierarchy: its groups, and only its."""
        return self.bases[controller] / self.group_name / self.hub_id

    def create(self, name: str, limits: ResourceLimits, *, kill_together: bool = False) -> Cgroup:
        """A group for one server or job. ``kill_together``: when the kernel kills one of
        its processes for memory it kills them all (cgroup v2's ``memory.oom.group``; with
        v1 the caller does it, see ``Cgroup.oom_kills``)."""
        if not GROUP_NAME.match(name):
            raise ValueError(f"not a usable cgroup name: {name!r}")
        folders: dict[str, Path] = {}
        for controller, base in self.bases.items():
            parent = self.hub_folder(controller)
            folder = parent / name
            if folder.exists():  # this hub's own, left by a process that died with its group
                Cgroup(name, {controller: folder}, limits, self.version).remove()
            self._make_group_folder(controller, base, folder)
            folders[controller] = folder
        group = Cgroup(name, folders, limits, self.version)
        try:
            self._write_limits(group)
            oom_group = folders.get("unified", Path("/nonexistent")) / "memory.oom.group"
            if kill_together and oom_group.exists():
                oom_group.write_text("1")
        except OSError:
            group.remove()
            raise
        return group

    def group_of(self, pid: int, name: str, *, proc: Path = Path("/proc")) -> Cgroup | None:
        """This hub's group ``name``, if process ``pid`` runs in it (another hub's group of
        the same name is not); None otherwise."""
        try:
            paths = _own_paths(proc / str(pid) / "cgroup")
        except OSError:
            return None
        suffix = f"/{self.group_name}/{self.hub_id}/{name}"
        folders: dict[str, Path] = {}
        for controller in self.bases:
            key = "" if controller == "unified" else controller
            path = paths.get(key, "")
            if not path.endswith(suffix):
                return None
            folders[controller] = self.mounts[controller] / path.lstrip("/")
        return Cgroup(name, folders, ResourceLimits(), self.version)

    def _make_group_folder(
        self, controller: str, base: Path, folder: Path, *, attempts: int = 20
    ) -> None:
        # Another process of this hub (its job service) removes the hub's folder when its
        # last group goes: make it again if it went in between.
        for attempt in range(attempts):
            self._prepare_parent(controller, base, folder.parent)
            try:
                folder.mkdir(exist_ok=True)
                return
            except FileNotFoundError:
                if attempt == attempts - 1:
                    raise

    def _prepare_parent(self, controller: str, base: Path, parent: Path) -> None:
        parent.mkdir(parents=True, exist_ok=True)

    @abstractmethod
    def _write_limits(self, group: Cgroup) -> None:
        """Write ``group.limits`` in this hierarchy's files."""


class CgroupV1(CgroupHierarchy):
    version = 1

    def _write_limits(self, group: Cgroup) -> None:
        limits = group.limits
        memory = group.folders.get("memory")
        if memory is not None and limits.memory_bytes is not None:
            (memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():  # memory + swap: no swapping past the limit either
                swap.write_text(str(limits.memory_bytes))
        cpu = group.folders.get("cpu")
        if cpu is not None and limits.cpu is not None:
            (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(max(1000, round(limits.cpu * CPU_PERIOD_US))))


class CgroupV2(CgroupHierarchy):
    version = 2
    CONTROLLERS = ("memory", "cpu")

    def _prepare_parent(self, controller: str, base: Path, parent: Path) -> None:
        # Limits on a child need the controllers enabled in each parent's subtree_control.
        # A cgroup with processes of its own cannot enable them ("no internal processes"),
        # so the hub's own processes first move into a leaf beside the groups it makes:
        # what systemd expects of a unit with Delegate=yes.
        parent.mkdir(parents=True, exist_ok=True)
        enable = " ".join(f"+{c}" for c in self.CONTROLLERS)
        try:
            (base / "cgroup.subtree_control").write_text(enable)
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
            leaf = base / "supervisor"
            leaf.mkdir(exist_ok=True)
            for pid in (base / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # gone meanwhile, or a kernel thread
                    (leaf / "cgroup.procs").write_text(pid)
            (base / "cgroup.subtree_control").write_text(enable)
        # Down every level to the hub's folder: campus-gpu-hub, then <hub id>.
        for level in reversed(parent.relative_to(base).parents[:-1]):
            (base / level / "cgroup.subtree_control").write_text(enable)
        (parent / "cgroup.subtree_control").write_text(enable)

    def _write_limits(self, group: Cgroup) -> None:
        folder = group.folders["unified"]
        limits = group.limits
        if limits.memory_bytes is not None:
            (folder / "memory.max").write_text(str(limits.memory_bytes))
            swap = folder / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        if limits.cpu is not None:
            quota = max(1000, round(limits.cpu * CPU_PERIOD_US))
            (folder / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")


def detect_hierarchy(
    group_name: str = "campus-gpu-hub",
    *,
    hub_id: str | None = None,
    proc: Path = Path("/proc"),
) -> CgroupHierarchy:
    """The hierarchy this process can make limited groups in, for the groups of hub
    ``hub_id`` (None: this process's own, :func:`~gpuspawner.core.hub_instance.process_scope`);
    raises :class:`CgroupsUnavailable`."""
    scope = hub_id or process_scope()
    try:
        own = _own_paths(proc / "self" / "cgroup")
        mounts = _mounts(proc / "self" / "mounts")
    except OSError as error:
        raise CgroupsUnavailable(f"this system has no control groups ({error.strerror})") from None
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for point, fstype, options in mounts:
        if fstype == "cgroup2":
            v2 = Path(point)
        else:
            for controller in ("memory", "cpu"):
                if controller in options and controller in own:
                    v1[controller] = Path(point)
    if v2 is not None and "" in own:
        base = v2 / own[""].lstrip("/")
        try:
            available = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            available = set()
        if {"memory", "cpu"} <= available:
            return _writable(CgroupV2({"unified": v2}, {"unified": base}, group_name, scope))
    if "memory" in v1 and "cpu" in v1:
        bases = {c: point / own[c].lstrip("/") for c, point in v1.items()}
        return _writable(CgroupV1(v1, bases, group_name, scope))
    raise CgroupsUnavailable(
        "neither a cgroup v2 hierarchy with the memory and cpu controllers nor the cgroup v1 "
        "memory and cpu hierarchies are available to this process"
    )


def _writable(hierarchy: CgroupHierarchy) -> CgroupHierarchy:
    for base in hierarchy.bases.values():
        if not os.access(base, os.W_OK):
            raise CgroupsUnavailable(
                f"{base} is not writable by this process (run the hub as root, and under "
                "systemd give its unit Delegate=yes)"
            )
    return hierarchy


# -- the setting -----------------------------------------------------------------------------


class CgroupLimits(LoggingConfigurable):
    """Whether and where CPU and memory limits are enforced, for servers and jobs alike."""

    enforce = Enum(
        ["auto", "required", "off"],
        config=True,
        help="""
        How profile and flavor ``resources`` (CPU, memory) are enforced on this machine.

        - ``auto``: as cgroups where this process can make them (root, or a delegated
          subtree), otherwise not at all (logged once at start)
        - ``required``: as cgroups; a server or job that cannot get its group does not start
        - ``off``: not enforced (the values are still shown to users)

        Defaults to ``$GPUSPAWNER_CGROUPS`` (so the hub can hand its setting to the job
        service), else ``auto``. Example::

            c.CgroupLimits.enforce = "required"
        """,
    )

    @default("enforce")
    def _default_enforce(self) -> str:
        value = os.environ.get("GPUSPAWNER_CGROUPS", "auto")
        return value if value in ("auto", "required", "off") else "auto"

    group_name = Unicode(
        "campus-gpu-hub",
        config=True,
        help="""
        The cgroup, under the hub's (or job service's) own, that holds a group per server
        and job.

        Example::

            c.CgroupLimits.group_name = "jupyterhub"
        """,
    )

    hub_id = Unicode(
        config=True,
        help="""
        The hub instance whose servers and jobs these groups hold: they are made under
        ``<group_name>/<hub_id>``, and a group found there left behind (whose processes are
        killed) is always this hub's own. So several hubs on one machine (a staging hub, a
        second demo, a test run) never touch each other's servers and jobs, even for the
        same user name.

        Defaults to ``$GPUSPAWNER_HUB_ID``, which the hub hands to its services
        (``jupyter_to_job.hub.job_service(hub_id=...)``); LocalGPUSpawner's default is the id
        kept in the hub's runtime folder beside its cookie secret
        (:func:`gpuspawner.core.hub_instance.hub_instance_id`). A process given none has a scope
        of its own, which a restart of it does not find again. Example::

            from gpuspawner.core.hub_instance import hub_instance_id
            c.CgroupLimits.hub_id = hub_instance_id("/var/lib/jupyterhub")
        """,
    )

    @default("hub_id")
    def _default_hub_id(self) -> str:
        return os.environ.get(HUB_ID_VARIABLE, "")

    @validate("hub_id")
    def _valid_hub_id(self, proposal: dict) -> str:
        if not proposal["value"]:
            return ""
        try:
            return valid_hub_id(proposal["value"])
        except HubIdError as error:
            raise TraitError(str(error)) from None

    _hierarchies: dict[tuple[str, str], CgroupHierarchy | CgroupsUnavailable] = {}
    _warned_unscoped = False

    @property
    def scope(self) -> str:
        """The folder this process's groups live in: its hub's id, else its own scope."""
        if self.hub_id:
            return self.hub_id
        if not CgroupLimits._warned_unscoped:
            CgroupLimits._warned_unscoped = True
            self.log.warning(
                "No hub id was handed to this process (c.CgroupLimits.hub_id or $%s): its "
                "control groups are its own, apart from its hub's, and a restart of it does "
                "not find them again.",
                HUB_ID_VARIABLE,
            )
        return process_scope()

    def hierarchy(self) -> CgroupHierarchy | None:
        """The hierarchy in use, or None when limits are not enforced."""
        if self.enforce == "off":
            return None
        key = (self.group_name, self.hub_id)
        found = self._hierarchies.get(key)
        if found is None:
            try:
                found = detect_hierarchy(self.group_name, hub_id=self.scope)
                self.log.info("CPU and memory limits are enforced with %s", found.describe())
            except CgroupsUnavailable as error:
                found = error
                level = logging.ERROR if self.enforce == "required" else logging.WARNING
                self.log.log(level, "CPU and memory limits are NOT enforced: %s.", error)
            self._hierarchies[key] = found
        if isinstance(found, CgroupsUnavailable):
            if self.enforce == "required":
                raise CgroupsUnavailable(
                    f"CPU and memory limits cannot be enforced: {found}. Tell the hub admins."
                )
            return None
        return found

    def create(
        self, name: str, limits: ResourceLimits, *, kill_together: bool = False
    ) -> Cgroup | None:
        """A group with ``limits`` for one server or job; None when nothing is enforced."""
        if limits.empty:
            return None
        hierarchy = self.hierarchy()
        if hierarchy is None:
            return None
        try:
            return hierarchy.create(name, limits, kill_together=kill_together)
        except OSError as error:
            if self.enforce == "required":
                raise CgroupsUnavailable(
                    f"the control group for {name} could not be made ({error.strerror})"
                ) from None
            self.log.warning("No CPU and memory limits for %s: %s", name, error)
            return None

    def of_process(self, pid: int, name: str) -> Cgroup | None:
        """The group ``name`` of this hub that process ``pid`` runs in (made by this or an
        earlier process of the hub or service), or None when it runs in none: after a
        restart, the group of a server or job started before it."""
        hierarchy = self.hierarchy()
        return hierarchy.group_of(pid, name) if hierarchy is not None else None
