"""LocalExecutor: each job is a runner subprocess on this machine.

- The runner starts in a session (process group) of its own, so a stop reaches
  it and only it; its kernel runs in another group, killed too when the runner
  has to be killed.
- Its stdout and stderr are appended straight to the job's log file (no pipe):
  the log survives a restart of the job service, and a restart does not kill
  the job with SIGPIPE.
- The GPU share arrives as environment variables computed by the caller from
  the capacity pool (``CUDA_VISIBLE_DEVICES`` and friends); the service's own
  environment is passed on only through an allow-list, so its secrets (the hub
  API token) never reach a notebook. A granted share overrides the inherited one.
- The pid and the process's start time are stored, so after a restart the job
  is re-adopted only if that very process still runs (pids get reused).
- With ``run_as = "owner"`` (a job service running as root on a shared machine)
  the runner runs as its owner's system account, the one LocalGPUSpawner runs the
  owner's server as (:mod:`gpuspawner.core.accounts`): the job's folder is handed to
  that account, the runner starts in the notebook's own folder, with the owner's
  home and groups, and the log reaches it only as an open descriptor.
- The flavor's CPU and memory become a control group (:mod:`gpuspawner.core.cgroups`)
  that the runner joins before it starts and its kernel inherits; a job the
  kernel kills for passing its memory ends FAILED as out of memory.
- A job may start warm: a runner started ahead for its owner and flavor, imports
  done and kernel running, takes it (:mod:`.warm_pool`, ``warm_pool_size``).
- A job with a checkpoint (``CreateJob.checkpoint``) gets its folder's absolute path in
  ``$JUPYTER_TO_JOB_CHECKPOINT_DIR`` (created for it, owned by its owner when jobs run as
  their owners) and its attempt number in ``$JUPYTER_TO_JOB_ATTEMPT``; when it is killed
  from outside and has retries left it is queued again for its next attempt instead of
  failing (:mod:`jupyter_to_job.retries` says when). One that its cgroup killed for
  running out of memory is queued again only when its flavor sets ``oom_retry_memory``
  (the Grant's): its next attempts get a cgroup with that ``memory.max`` (a cold runner:
  no warm one has those limits), after being admitted again by the queue as any job.
- The end of the runner is noticed as it happens (a pidfd, :mod:`.process_exit`);
  progress, stop requests and the deadline are looked at every ``poll_interval``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil
from traitlets import Dict, Enum, Float, Instance, Integer, List, Unicode, default

from gpuspawner.core.accounts import UserAccount
from gpuspawner.core.cgroups import Cgroup, CgroupLimits, child_setup
from gpuspawner.core.grant import paths_first

from ..models import JobStatus
from ..retries import (
    attempt_memory,
    exhausted,
    no_more_memory,
    oom_retry,
    retry_reason,
    separator,
)
from ..store import JobAttemptsRow
from ..warm_start import JOB_ID_VARIABLE
from .base import JobExecutor, JobOutcome, StopReason
from .process_exit import ProcessExit
from .warm_pool import WarmRunner, WarmRunnerPool

HOST_SHARE_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_DEVICE_MEMORY_LIMIT",
    "CUDA_DEVICE_SM_LIMIT",
    "GPUSPAWNER_*",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "LD_PRELOAD",
)
"""The variables that give the host its own GPU share; a job with a share of its own gets none."""

INHERITED_ENVIRONMENT = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "JUPYTER_PATH",
    "JUPYTER_DATA_DIR",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_RUNTIME_DIR",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    # The host's own GPU share (standalone mode: the user's server), unless the
    # capacity hook grants another.
    *HOST_SHARE_VARIABLES,
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
]

CHECKPOINT_VARIABLE = "JUPYTER_TO_JOB_CHECKPOINT_DIR"
"""The job's checkpoint folder, an absolute path (only for jobs that asked for one)."""
ATTEMPT_VARIABLE = "JUPYTER_TO_JOB_ATTEMPT"
"""Which attempt of the job this is, from 1."""

# psutil derives start times from the boot time and clock ticks: equal for one
# process across calls, but allow for rounding.
_START_TIME_TOLERANCE = 1.0


def _host_share_variable(name: str) -> bool:
    return any(
        name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern
        for pattern in HOST_SHARE_VARIABLES
    )


def process_start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def same_process_running(pid: int, start_time: float) -> bool:
    """True when ``pid`` is still the process that started at ``start_time`` and runs."""
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - start_time) > _START_TIME_TOLERANCE:
            return False
        if process.status() == psutil.STATUS_ZOMBIE:
            _reap(pid)
            return False
        return True
    except psutil.Error:
        return False


def _reap(pid: int) -> None:
    """Collect a finished child of ours (a no-op for anyone else's process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


@dataclass
class _RunnerProcess:
    pid: int
    start_time: float
    popen: subprocess.Popen[bytes] | None = None
    """None for a process adopted after a restart (not our child)."""

    def running(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return same_process_running(self.pid, self.start_time)

    @property
    def exit_code(self) -> int | None:
        return self.popen.returncode if self.popen is not None else None

    def signal_group(self, signum: int) -> None:
        """Signal the runner's whole process group (it leads its own session), only while
        its pid is still the runner this service started (its start time says so)."""
        if not self.running() or not same_process_running(self.pid, self.start_time):
            return
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass


def _renamed(cgroup: Cgroup | None, name: str) -> Cgroup | None:
    """``cgroup`` under the job's name, so a restarted service finds it by the job (a warm
    runner's group is named before its job exists); as it was if it cannot be renamed."""
    if cgroup is None:
        return None
    folders = {controller: folder.with_name(name) for controller, folder in cgroup.folders.items()}
    try:
        for controller, folder in cgroup.folders.items():
            folder.rename(folders[controller])
    except OSError:
        return cgroup
    return Cgroup(name, folders, cgroup.limits, cgroup.version)


def default_run_as() -> str:
    """``$JUPYTER_TO_JOB_RUN_AS`` (``owner`` or ``service``), else ``service``."""
    return "owner" if os.environ.get("JUPYTER_TO_JOB_RUN_AS") == "owner" else "service"


def kill_left_kernel(
    pid: int, runner_start: float | None, expected_uid: int, cgroup: Cgroup | None
) -> None:
    """Kill process group ``pid``, a job's kernel its runner left behind, only if it started
    after the runner, runs as ``expected_uid`` and (for a job with a cgroup) in its group."""
    try:
        kernel = psutil.Process(pid)
        started_after_job = (
            runner_start is None or kernel.create_time() >= runner_start - _START_TIME_TOLERANCE
        )
        # A job with a cgroup started its kernel in it (another hub's never is).
        in_job_group = cgroup is None or pid in cgroup.processes()
        if (
            started_after_job
            and in_job_group
            and kernel.uids().real == expected_uid
            and os.getpgid(pid) == pid
        ):
            os.killpg(pid, signal.SIGKILL)
    except (psutil.Error, ProcessLookupError, PermissionError):
        pass


class LocalExecutor(JobExecutor):
    """Runs the job runner as a local subprocess."""

    runner_command = List(
        Unicode(),
        default_value=[sys.executable, "-m", "jupyter_to_job.runner"],
        help="""The command that starts the runner; ``--job-dir`` and ``--log-file`` are added.

        Example, to run jobs in another environment that has the same package installed:
        ``c.LocalExecutor.runner_command = ["/opt/jobs-env/bin/python", "-m",
        "jupyter_to_job.runner"]``.
        """,
    ).tag(config=True)

    inherit_environment = List(
        Unicode(),
        default_value=INHERITED_ENVIRONMENT,
        help="""Variables of the job service's environment that jobs see (``LC_*``: a prefix).

        Everything else, the hub's API token in particular, is withheld. Example:
        ``c.LocalExecutor.inherit_environment.append("HF_HOME")``.
        """,
    ).tag(config=True)

    extra_environment = Dict(
        key_trait=Unicode(),
        value_trait=Unicode(),
        help="""Variables set in every job: ``c.LocalExecutor.extra_environment =
        {"HF_HUB_OFFLINE": "1"}``. The GPU share's variables take precedence.""",
    ).tag(config=True)

    run_as = Enum(
        ["service", "owner"],
        help="""Which system account a job runs as.

        - ``service``: the job service's own account (a single-user machine, a laptop,
          standalone mode in one JupyterLab, or a demo)
        - ``owner``: the job owner's account, the same one LocalGPUSpawner runs their
          server as. The job service must run as root; a job whose owner has no account
          fails with a sentence saying so. On a machine shared by several people this
          is the only safe choice: a job run as the service can read everything the
          service can.

        Defaults to ``$JUPYTER_TO_JOB_RUN_AS``, else ``service``. Example:
        ``c.LocalExecutor.run_as = "owner"``.
        """,
    ).tag(config=True)

    @default("run_as")
    def _default_run_as(self) -> str:
        return default_run_as()

    cgroups = Instance(
        CgroupLimits,
        help="Where the flavor's CPU and memory limits are enforced (``c.CgroupLimits``).",
    )

    @default("cgroups")
    def _default_cgroups(self) -> CgroupLimits:
        return CgroupLimits(parent=self)

    warm_pool_size = Integer(
        1,
        help="""Runners started ahead for each person and flavor, so their next job starts warm:
        the runner's imports done and a kernel running (see ``JobManager.prewarm``).

        They start when the person shows they may run a job soon (the job service's flavor
        list, asked for by the Run as Job dialog) and again after each job of theirs; each
        runs as that person, in the flavor's limits, serves one job and exits. A waiting one
        costs memory, not CPU: about 85 MB (runner and idle Python kernel, measured). 0 turns
        warm starts off. Example: ``c.LocalExecutor.warm_pool_size = 1``.
        """,
    ).tag(config=True)

    warm_idle_seconds = Float(
        300.0,
        help="""Seconds a warm runner waits for a job before it is released (its kernel shut
        down): ``c.LocalExecutor.warm_idle_seconds = 300``.""",
    ).tag(config=True)

    warm_kernel_name = Unicode(
        "python3",
        help="""The kernel a warm runner starts ahead; a job whose notebook asks for another
        starts its own. Example: ``c.LocalExecutor.warm_kernel_name = "python3"``.""",
    ).tag(config=True)

    warm_pool = Instance(
        WarmRunnerPool,
        allow_none=True,
        help="The job manager's warm runners (None: every job starts cold).",
    )

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._process: _RunnerProcess | None = None
        self._terminator: asyncio.Future[None] | None = None
        self._forced = False
        self._cgroup: Cgroup | None = None
        self._warm_folder: Path | None = None
        self._attempts: JobAttemptsRow | None = None
        """The job's checkpoint and attempt, read as the attempt starts (None: no checkpoint)."""

    # -- whose job it is ------------------------------------------------------------------

    def account(self) -> UserAccount | None:
        """The owner's account when jobs run as their owners (None: the service's own)."""
        if self.run_as == "service":
            return None
        account = UserAccount.for_hub_user(self.job.owner)
        if not account.is_current and os.geteuid() != 0:
            raise PermissionError(
                f"the job service runs as {UserAccount.current().name}, not as root, so it "
                f"cannot run jobs as {account.name} (c.LocalExecutor.run_as = 'owner' needs "
                "root)"
            )
        return account

    def _hand_over(self, account: UserAccount) -> None:
        """Give the job's folder to its owner: only they (and the service) can read it."""
        directory = self.files.directory
        os.chown(directory, account.uid, account.gid)
        os.chmod(directory, 0o700)
        for entry in os.scandir(directory):
            if entry.is_file(follow_symlinks=False):
                os.chown(entry.path, account.uid, account.gid, follow_symlinks=False)
        # The runner reaches its folder by name through folders it may cross, not list.
        for parent in (directory.parent, directory.parent.parent):
            mode = parent.stat().st_mode & 0o777
            if mode & 0o001 == 0:
                os.chmod(parent, mode | 0o111)

    # -- launching ----------------------------------------------------------------------

    def job_environment(self) -> dict[str, str]:
        """The runner's environment: allowed service variables, extras, then the GPU share."""
        exact = {name for name in self.inherit_environment if not name.endswith("*")}
        prefixes = tuple(name[:-1] for name in self.inherit_environment if name.endswith("*"))
        env = {
            name: value
            for name, value in os.environ.items()
            if name in exact or (prefixes and name.startswith(prefixes))
        }
        if self.environment:
            # The job's own share replaces the host's whole: a variable left from the host's
            # (a JAX fraction under its other name, say) could switch a framework off the GPU.
            env = {name: value for name, value in env.items() if not _host_share_variable(name)}
        env.update(self.extra_environment)
        site_path = env.get("PYTHONPATH")
        env.update(self.environment)
        if "PYTHONPATH" in self.environment:
            # The share's hooks first, and the site's packages still there after them.
            env["PYTHONPATH"] = paths_first(self.environment["PYTHONPATH"], site_path)
        account = self.account()
        if account is not None:
            env.update(account.environment())
        env["JUPYTER_TO_JOB_ID"] = self.job_id
        env["PYTHONUNBUFFERED"] = "1"
        attempts = self._attempts
        if attempts is not None:
            env[CHECKPOINT_VARIABLE] = attempts.checkpoint_path
            env[ATTEMPT_VARIABLE] = str(attempts.attempt)
        return env

    def _make_checkpoint_folder(self, account: UserAccount | None) -> None:
        """Create the job's checkpoint folder (and the folders above it that are missing),
        owned by the job's owner when it runs as them."""
        attempts = self._attempts = self.store.job_attempts(self.job_id)
        if attempts is None:
            return
        folder = Path(attempts.checkpoint_path)
        missing = [folder, *(p for p in folder.parents if not p.exists())]
        folder.mkdir(parents=True, exist_ok=True)
        if account is not None:
            for path in missing:
                if path.exists():
                    os.chown(path, account.uid, account.gid)
        if attempts.attempt == 1:
            self.log_line(f"checkpoint folder {folder}; attempt 1 of {attempts.max_attempts}")
        memory = attempt_memory(attempts.history)
        if memory is not None and memory > (self.limits.memory_bytes or 0):
            # An earlier attempt ran out of the flavor's memory: this one gets more.
            self.limits = replace(self.limits, memory_bytes=memory)

    async def on_complete(self, outcome: JobOutcome) -> None:
        """Record how the job ended; a job killed from outside with retries left is queued
        again for its next attempt instead, and one that ran out of memory too when its
        flavor allows a retry with more (see :mod:`jupyter_to_job.retries`)."""
        retry_memory = self.grant.oom_retry_memory if self.grant else None
        more_memory = oom_retry(outcome, retry_memory)
        reason = more_memory.reason if more_memory else retry_reason(outcome)
        sentence = None
        if reason is None:
            # Without a Grant (standalone, or a job watched again after a restart) the
            # flavor's setting is not known here: the usual out-of-memory message stands.
            has_checkpoint = self.store.job_attempts(self.job_id) is not None
            if outcome.oom_killed and self.grant is not None and has_checkpoint:
                sentence = no_more_memory(retry_memory)
                self.log_line(sentence)
            await super().on_complete(outcome)
            self._add_to_message(sentence)
            return
        memory = more_memory.memory_bytes if more_memory else None
        attempt = self.store.start_again(
            self.job_id, (JobStatus.RUNNING,), reason, memory_bytes=memory
        )
        attempts = self.store.job_attempts(self.job_id)
        if attempt is not None and attempts is not None:
            self.files.status.unlink(missing_ok=True)  # the next runner reports afresh
            self.log_line(separator(attempt, attempts.max_attempts, reason, memory))
            return
        if attempts is not None and attempts.max_attempts > 1:
            sentence = exhausted(attempts.max_attempts)
            self.log_line(sentence)
        await super().on_complete(outcome)
        self._add_to_message(sentence)

    def _add_to_message(self, sentence: str | None) -> None:
        """Add ``sentence`` to the message of the job, now FAILED."""
        row = self.store.get(self.job_id)
        if sentence and row is not None and row.job_status is JobStatus.FAILED:
            self.store.update(
                self.job_id, status_message=f"{row.status_message or ''} {sentence}".strip()
            )

    @property
    def cgroup_name(self) -> str:
        return f"job-{self.job_id}"

    async def execute(self) -> JobOutcome:
        log_path = self.log_store.create(self.job_id)
        account = self.account()
        if account is not None:
            self._hand_over(account)
        self._make_checkpoint_folder(account)
        environment = self.job_environment()
        warm = self._start_warm(log_path, environment)
        self._process = warm or self._start_cold(log_path, environment, account)
        process = self._process
        self.store.update(self.job_id, pid=process.pid, process_start_time=process.start_time)
        self.process_started(process.pid, process.start_time)  # it holds the job's GPU slice now
        if warm is None:
            self.log_line(f"runner process {process.pid} started")
        if self.stop_reason is not None:  # a stop that came before the process existed
            self._terminator = asyncio.ensure_future(self._terminate())
        return await self._watch()

    def _start_cold(
        self, log_path: Path, environment: dict[str, str], account: UserAccount | None
    ) -> _RunnerProcess:
        # The runner writes its log lines to standard output, which is the log file
        # opened here: the job never needs the right to open the service's files.
        command = [*self.runner_command, "--job-dir", str(self.files.directory), "--log-file", "-"]
        self._cgroup = self.cgroups.create(self.cgroup_name, self.limits)
        if self._cgroup is not None:
            self.log_line(f"limited to {self.limits.describe()}")
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
        try:
            popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                cwd=self.files.directory,
                env=environment,
                start_new_session=True,
                close_fds=True,
                preexec_fn=child_setup(self._cgroup, account.become if account else None),
            )
        except BaseException:
            if self._cgroup is not None:
                self._cgroup.remove()
            raise
        finally:
            os.close(log_fd)
        start_time = process_start_time(popen.pid) or time.time()
        return _RunnerProcess(popen.pid, start_time, popen)

    def _start_warm(self, log_path: Path, environment: dict[str, str]) -> _RunnerProcess | None:
        """Hand the job to a warm runner of its owner and flavor, if one waits."""
        if self.warm_pool is None:
            return None
        warm = self.warm_pool.take(self.job.owner, self.job.flavor, self.limits)
        if warm is None:
            return None
        # Said before the runner writes its own first lines.
        if warm.cgroup is not None:
            self.log_line(f"limited to {self.limits.describe()}")
        self.log_line(f"warm runner process {warm.pid} takes the job")
        # Named for the job before the runner hears of it: its first cell already runs
        # in the job's group (and a restarted service finds the group by the job).
        warm.cgroup = _renamed(warm.cgroup, self.cgroup_name)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
        try:
            handed = warm.hand_over(self.files.directory, environment, log_fd)
        finally:
            os.close(log_fd)
        if not handed:
            self.log_line(f"warm runner process {warm.pid} had ended; starting a runner")
            self.warm_pool.release(warm)
            return None
        self._cgroup = warm.cgroup
        # Its kernel may still be starting in that folder: it goes when the job has ended.
        self._warm_folder = warm.folder
        return _RunnerProcess(warm.pid, warm.start_time, warm.popen)

    # -- warm runners -------------------------------------------------------------------

    def prewarm(self) -> int:
        """Start warm runners for this executor's owner and flavor, with its environment
        (the GPU share the caller expects) and limits, up to ``warm_pool_size``; how many
        were started. The executor stands for the owner's next job (``JobManager.prewarm``)."""
        pool = self.warm_pool
        if pool is None:
            return 0
        owner, flavor = self.job.owner, self.job.flavor
        pool.remember_refill(owner, flavor, self.prewarm)
        started = 0
        while len(pool.runners(owner, flavor)) < self.warm_pool_size:
            pool.add(self.launch_warm_runner(), idle_seconds=self.warm_idle_seconds)
            started += 1
        return started

    def launch_warm_runner(self) -> WarmRunner:
        """Start one runner ahead of its job: as the owner, in the flavor's cgroup, with the
        environment of a job of theirs (less the job's id), waiting on a socket pair."""
        assert self.warm_pool is not None
        token = uuid.uuid4().hex[:12]
        account = self.account()
        folder = self.warm_pool.folder / token
        folder.mkdir(parents=True, mode=0o700)
        if account is not None:
            os.chown(folder, account.uid, account.gid)
            for parent in (folder.parent, folder.parent.parent):
                mode = parent.stat().st_mode & 0o777
                if mode & 0o001 == 0:
                    os.chmod(parent, mode | 0o111)
        environment = self.job_environment()
        environment.pop(JOB_ID_VARIABLE, None)
        cgroup = self.cgroups.create(f"warm-{token}", self.limits)
        ours, theirs = socket.socketpair()
        command = [
            *self.runner_command,
            "--warm-control",
            str(theirs.fileno()),
            "--warm-dir",
            str(folder),
            "--warm-kernel",
            self.warm_kernel_name,
        ]
        try:
            popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # until its job's log comes with the job
                stderr=subprocess.DEVNULL,
                cwd=folder,
                env=environment,
                start_new_session=True,
                close_fds=True,
                pass_fds=(theirs.fileno(),),
                preexec_fn=child_setup(cgroup, account.become if account else None),
            )
        except BaseException:
            ours.close()
            if cgroup is not None:
                cgroup.remove()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            theirs.close()
        return WarmRunner(
            owner=self.job.owner,
            flavor=self.job.flavor,
            limits=self.limits,
            environment=environment,
            popen=popen,
            start_time=process_start_time(popen.pid) or time.time(),
            control=ours,
            cgroup=cgroup,
            folder=folder,
        )

    async def still_running(self) -> bool:
        job = self.job
        return (
            job.pid is not None
            and job.process_start_time is not None
            and same_process_running(job.pid, job.process_start_time)
        )

    async def reattach(self) -> JobOutcome:
        job = self.job
        stopping = job.status == JobStatus.STOPPING.value
        if await self.still_running():
            assert job.pid is not None and job.process_start_time is not None
            self._process = _RunnerProcess(job.pid, job.process_start_time)
            self._cgroup = self.cgroups.of_process(job.pid, self.cgroup_name)
            self.log_line(f"the job service restarted; watching runner process {job.pid} again")
            if stopping:
                await self.stop(StopReason.REQUEST)
            return await self._watch()
        self._kill_kernel()
        return JobOutcome(
            self.read_status(),
            stop_reason=StopReason.REQUEST if stopping else None,
            vanished=True,
        )

    # -- watching -----------------------------------------------------------------------

    async def _watch(self) -> JobOutcome:
        process = self._process
        assert process is not None
        ended = ProcessExit(process.pid)
        try:
            while process.running():
                self.report_progress(self.read_status())
                if self.stop_reason is None and self.stop_requested_elsewhere():
                    await self.stop(StopReason.REQUEST)
                left = self.seconds_left()
                if left is not None and left <= 0 and self.stop_reason is None:
                    self.log_line(f"the deadline of {self.job.deadline_seconds} s has passed")
                    await self.stop(StopReason.DEADLINE)
                wait = self.poll_interval
                if left is not None and 0 < left < wait:
                    wait = left
                await ended.wait(wait)  # returns as soon as the runner ends
        finally:
            ended.close()
        if self._terminator is not None:
            self._terminator.cancel()
        if self.warm_pool is not None:  # its owner is active: warm for their next job,
            # once this one's end is recorded
            asyncio.get_running_loop().call_soon(
                self.warm_pool.refill, self.job.owner, self.job.flavor
            )
        status = self.read_status()
        if status is None or not status.final:
            self._kill_kernel()  # the runner died without shutting its kernel down
        oom_killed = False
        if self._cgroup is not None:
            oom_killed = self._cgroup.oom_kills() > 0
            self._cgroup.remove()  # and whatever the job left running in it
        if self._warm_folder is not None:
            shutil.rmtree(self._warm_folder, ignore_errors=True)
        return JobOutcome(
            status,
            exit_code=process.exit_code,
            stop_reason=self.stop_reason,
            forced=self._forced,
            last_cell=self.last_cell,
            oom_killed=oom_killed,
            memory_limit=self.limits.memory_bytes,
        )

    # -- stopping -----------------------------------------------------------------------

    async def stop(self, reason: StopReason = StopReason.REQUEST) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self._process is not None:
            self._terminator = asyncio.ensure_future(self._terminate())

    async def _terminate(self) -> None:
        process = self._process
        assert process is not None
        process.signal_group(signal.SIGTERM)
        give_up = time.monotonic() + self.stop_grace_seconds
        while process.running():
            if time.monotonic() >= give_up:
                self._forced = True
                self.log_line(
                    f"the job did not stop within {self.stop_grace_seconds:g} s; killing it"
                )
                process.signal_group(signal.SIGKILL)
                self._kill_kernel()
                return
            await asyncio.sleep(0.1)

    def _kill_kernel(self) -> None:
        """Kill the kernel's process group, if the runner left it behind."""
        status = self.read_status()
        if status is None or status.kernel_pid is None:
            return
        runner_start = self._process.start_time if self._process else self.job.process_start_time
        try:
            # status.json is the job's own file: never take its word for whose process it is.
            expected_uid = os.geteuid()
            if self.run_as == "owner":
                expected_uid = UserAccount.for_hub_user(self.job.owner).uid
        except LookupError:
            return
        kill_left_kernel(status.kernel_pid, runner_start, expected_uid, self._cgroup)
