"""LocalGPUSpawner: course-time profiles and GPU shares on one multi-GPU workstation.

Design notes: docs/design/spawners.md, "gpuspawner.spawners.local".
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
import tempfile
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from urllib.parse import urlparse

import psutil
from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from jupyterhub.utils import url_path_join
from traitlets import Instance, Unicode, default

from ..core.accounts import NoSuchAccount, UserAccount
from ..core.cgroups import Cgroup, CgroupLimits, child_setup, format_bytes
from ..core.grant import SHARE_HOOKS, Grant
from ..core.hub_instance import hub_instance_id
from ..core.ledger import ProcessHolder
from ..policy import GPUDevice
from ..policy.schedule import parse_timezone
from .course_profiles import CourseProfilesMixin, refusal_exception
from .home_page import ended_unasked

__all__ = ["SHARE_HOOKS", "LocalGPUSpawner", "LocalGPUSpawnerMixin", "SimpleLocalGPUSpawner"]


class LocalGPUSpawnerMixin(CourseProfilesMixin):
    """The local-process half: inventory, environment and server lifecycle."""

    cgroups = Instance(
        CgroupLimits,
        help="Where profile CPU and memory limits are enforced (``c.CgroupLimits``).",
    )

    @default("cgroups")
    def _default_cgroups(self) -> CgroupLimits:
        from jupyterhub.app import JupyterHub  # the hub's own application, when it runs

        cgroups = CgroupLimits(parent=self)
        if not cgroups.hub_id and JupyterHub.initialized():
            # Neither configured nor handed over: this hub's id, kept in its runtime
            # folder (where its cookie secret is), so a restart finds its groups again.
            secret = Path(JupyterHub.instance().cookie_secret_file).resolve()
            cgroups.hub_id = hub_instance_id(secret.parent)
        return cgroups

    _cgroup: Cgroup | None = None
    _configured_start: tuple[list[str], str] | None = None
    _server_process: ProcessHolder | None = None
    """The server's process as this hub started it: its pid and start time."""
    _stopping = False
    """The hub is stopping the server: its end is asked for."""
    _end_noted = False
    stop_notice: str = ""
    """Why the last server ended unasked (killed from outside, crashed, out of memory),
    shown on the home page and the next spawn page until the next start."""

    def gpu_devices(self) -> list[GPUDevice]:
        return self.admission.local_devices()

    def get_env(self):
        env = super().get_env()
        grant = self._grant
        if grant is None:
            return env
        # Nothing the admin's or user's environment holds may loosen the share.
        return grant.environment_over(env)

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

    # -- the catalog's storage, as folders in the home -------------------------------------

    scratch_root = Unicode(
        os.path.join(tempfile.gettempdir(), "gpuspawner-scratch"),
        config=True,
        help="""
        Where servers' ``scratch`` storage lives (one private folder per server, removed
        when it stops). Made mode 0711, owned by the hub; it must not exist as anything else.

        Example::

            c.LocalGPUSpawner.scratch_root = "/scratch/jupyterhub"
        """,
    )

    def storage_home(self) -> tuple[str, int | None, int | None]:
        """The folder the catalog's storage appears in, and its owner (None: the hub's)."""
        if self.runs_as_user_account:
            account = UserAccount.for_hub_user(self.user.name)
            return account.home, account.uid, account.gid
        return self.home_dir, None, None  # type: ignore[attr-defined]

    @property
    def scratch_dir(self) -> str:
        return os.path.join(self.scratch_root, self.cgroup_name)

    def _link_storage(self, grant: Grant) -> list[str]:
        """Make the grant's ``path:`` and ``scratch`` storage folders in the user's home (a
        process cannot mount: each is a link named after its entry). Nothing already in the
        home is replaced. Returns what was not made, as sentences for the log."""
        skipped: list[str] = []
        if not grant.storage:
            return skipped
        home, uid, gid = self.storage_home()
        if uid is None:
            os.makedirs(home, 0o755, exist_ok=True)
        for mount in grant.storage:
            kind = mount.source.kind
            link = os.path.join(home, mount.name)
            if kind in ("pvc", "nfs"):
                skipped.append(f"{mount.name}: a {kind} volume cannot be mounted on one machine")
                continue
            if kind == "scratch":
                target = os.path.join(self.scratch_dir, mount.name)
                self._make_scratch(target, uid, gid)
            elif kind == "experimental":
                target = self._experimental_folder(mount.name, uid, gid)
            else:
                target = self.expand_storage(mount.source.path)
                if not os.path.isdir(target):
                    skipped.append(f"{mount.name}: {target} is not a folder on this machine")
                    continue
            if os.path.lexists(link):
                if not (os.path.islink(link) and os.readlink(link) == target):
                    skipped.append(f"{mount.name}: {link} exists already and is kept as it is")
                continue
            os.symlink(target, link)
            if uid is not None:
                os.lchown(link, uid, gid if gid is not None else -1)
        for sentence in skipped:
            self.log.warning("Storage of %s: %s", self._log_name, sentence)
        return skipped

    def _make_scratch(self, target: str, uid: int | None, gid: int | None) -> None:
        """The server's private scratch folder, under a root only the hub owns."""
        os.makedirs(self.scratch_root, 0o711, exist_ok=True)
        root = os.lstat(self.scratch_root)
        if not stat.S_ISDIR(root.st_mode) or root.st_uid != os.geteuid():
            raise refusal_exception(
                "storage",
                "This server's scratch folder cannot be made safely; tell the hub admins "
                f"({self.scratch_root} is not a folder owned by the hub).",
                503,
            )
        os.chmod(self.scratch_root, 0o711)
        os.makedirs(self.scratch_dir, 0o700, exist_ok=True)
        os.makedirs(target, 0o700, exist_ok=True)
        if uid is not None:
            for path in (self.scratch_dir, target):
                os.chown(path, uid, gid if gid is not None else -1)

    def _experimental_folder(self, name: str, uid: int | None, gid: int | None) -> str:
        """The user's folder ``name`` in the experimental zone (kept between servers, wiped
        daily by the course-sessions service), made private to them."""
        root = self.admission.experimental_root
        if not root:
            raise refusal_exception(
                "storage",
                "This profile keeps files in the experimental zone, which this hub has no "
                "folder for; tell the hub admins (c.GPUAdmission.experimental_root).",
                503,
            )
        os.makedirs(root, 0o711, exist_ok=True)
        os.chmod(root, 0o711)  # crossed by every owner, listed by none (whatever the umask)
        mine = os.path.join(root, self.user.name)
        target = os.path.join(mine, name)
        for folder in (mine, target):
            os.makedirs(folder, 0o700, exist_ok=True)
            if os.path.islink(folder):
                raise refusal_exception(
                    "storage",
                    "Your experimental-zone folder cannot be used safely (it is a link); "
                    "tell the hub admins.",
                    503,
                )
            if uid is not None:
                os.chown(folder, uid, gid if gid is not None else -1)
        return target

    def _remove_scratch(self) -> None:
        if os.path.isdir(self.scratch_dir) and not os.path.islink(self.scratch_dir):
            shutil.rmtree(self.scratch_dir, ignore_errors=True)

    # -- the server's process: only the one this hub started ----------------------------

    def _is_our_process(self) -> bool:
        """Whether ``self.pid`` is still the server process this hub started."""
        if self.proc is not None and self.proc.pid == self.pid:
            return self.proc.poll() is None  # our child: its pid is ours until reaped
        holder = self._server_process
        return holder is not None and holder.pid == self.pid and holder.is_alive()

    async def _signal(self, sig):
        """Signal the server's process only while it is the one this hub started; another
        process that has its pid now (after a reboot, or any reuse) is never signalled."""
        if not self._is_our_process():
            if psutil.pid_exists(self.pid) and self._server_process is not None:
                self.log.warning(
                    "Process %d is no longer %s's server (that one has ended; the pid now "
                    "belongs to another process): it is not signalled.",
                    self.pid,
                    self._log_name,
                )
            return False
        return await super()._signal(sig)

    def _adopt_process(self, pid: int, recorded: object) -> ProcessHolder | None:
        """After a hub restart: the server's process as the saved state recorded it, or,
        from a state saved before start times were recorded, the process with that pid if
        it is this hub's server of this user (its environment names both)."""
        holder = ProcessHolder.from_dict(recorded)
        if holder is not None:
            return holder if holder.pid == pid else None
        try:
            environment = psutil.Process(pid).environ()
        except psutil.Error:
            return None
        api_url = self.hub.api_url  # as Spawner.get_env hands it to the server
        if self.hub_connect_url is not None:
            api_url = url_path_join(self.hub_connect_url, urlparse(api_url).path)
        mine = (
            environment.get("JUPYTERHUB_USER") == self.user.name
            and environment.get("JUPYTERHUB_SERVER_NAME", "") == (self.name or "")
            and environment.get("JUPYTERHUB_API_URL") == api_url
        )
        return ProcessHolder.of_pid(pid) if mine else None

    def _note_unasked_end(self, exit_status: int | None) -> None:
        """The server ended without the hub stopping it: say why to its owner, once."""
        if self._end_noted or self._stopping or self.stop_notice:
            return
        self._end_noted = True
        notice = ended_unasked(exit_status, datetime.now(UTC), self._notice_zone())
        if notice:
            self.stop_notice = notice
            self.log.warning(
                "Server %s ended without the hub stopping it (exit status %s)",
                self._log_name,
                "unknown" if exit_status is None else exit_status,
            )

    def _notice_zone(self) -> tzinfo:
        try:
            catalog = self.admission.catalog_in_force()
            return parse_timezone(catalog.settings.timezone) if catalog else UTC
        except Exception:  # a notice in UTC is better than none
            return UTC

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
            self._end_noted = True
            self.log.warning("Server %s was killed for using more than its memory", self._log_name)
        cgroup.remove()

    async def start(self):
        self._progress_messages = ["Checking your profile, its class window and GPU capacity"]
        self._check_account()
        grant = self.decide_start()
        limits = grant.limits
        try:
            self._cgroup = self.cgroups.create(self.cgroup_name, limits, kill_together=True)
        except Exception:
            self.release_allocation()
            raise
        self.stop_notice = ""
        self._stopping = self._end_noted = False
        self._server_process = None
        self.progress_note(grant.describe)
        if limits.cpu:
            self.cpu_limit = limits.cpu
        if limits.memory_bytes:
            self.mem_limit = limits.memory_bytes
        # As configured, before a grant chose another Python environment or URL: what one
        # start chose never carries over to the next.
        if self._configured_start is None:
            self._configured_start = (list(self.cmd), self.default_url)
        cmd, default_url = self._configured_start
        self.cmd = (
            [str(Path(grant.python) / "bin" / "jupyterhub-singleuser")] if grant.python else cmd
        )
        self.default_url = grant.default_url or default_url
        try:
            self._link_storage(grant)
        except BaseException:
            self.release_allocation()
            self._end_cgroup()
            raise
        self.progress_note("Starting JupyterLab")
        try:
            address = await super().start()
        except BaseException:
            self.release_allocation()
            self._end_cgroup()
            raise
        self._server_process = ProcessHolder.of_pid(self.pid)
        # From now on the server's process, not the hub, holds its GPU slice.
        self.hold_allocation(self.pid)
        self.record_started()
        return address

    async def poll(self):
        proc, restored = self.proc, self.proc is None and bool(self.pid)
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
            if proc is not None:
                self._note_unasked_end(proc.returncode)
            elif restored:  # started before the hub's restart: not our child, no status
                self._note_unasked_end(None)
        return status

    async def stop(self, now=False):
        self._stopping = True
        try:
            await super().stop(now=now)
        finally:
            self.release_allocation()
            self._end_cgroup()
            self._remove_scratch()

    def get_state(self):
        state = super().get_state()
        course = self.course_state()
        if course:
            state["gpuspawner"] = course
        if self.stop_notice:  # kept past clear_state: the hub makes a new spawner after a stop
            state["gpuspawner_stop_notice"] = self.stop_notice
        if self.pid and self._server_process is not None:
            state["gpuspawner_process"] = self._server_process.to_dict()
        return state

    def load_state(self, state):
        super().load_state(state)
        notice = state.get("gpuspawner_stop_notice") if isinstance(state, dict) else None
        self.stop_notice = notice if isinstance(notice, str) else ""
        if self.pid:  # a server started before a hub restart: find it and its group again
            recorded = state.get("gpuspawner_process") if isinstance(state, dict) else None
            self._server_process = self._adopt_process(self.pid, recorded)
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
