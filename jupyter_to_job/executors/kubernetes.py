"""KubernetesExecutor: each job is a ``batch/v1`` Job running the in-job runner.

``c.JobManager.executor_class = "jupyter_to_job.executors.kubernetes.KubernetesExecutor"``

How it starts, follows, judges and cleans up a Job, and why: docs/kubernetes-executor.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

from ..k8s_objects import (
    JobFilesTooLarge,
    PodCheckpoint,
    UserFiles,
    granted_user_files,
    make_job_objects,
    run_pod_selector,
)
from ..k8s_ranks import on_several_nodes
from ..models import JobStatus
from ..output_uploads import revoke_upload_token
from ..retries import exhausted, no_more_memory, oom_retry, separator
from ..runfiles import RunnerStatus, parse_compact_status, read_spec
from ..store import ACTIVE, JobAttemptsRow, utcnow
from .base import FinalState, JobOutcome, StopReason
from .k8s_attempts import (
    attempts_before,
    judge,
    memory_for_attempt,
    newest_unfollowed,
    rerun_line,
    start_failure,
    suspended_since,
)
from .k8s_create import JobNotStartable, checkpoint_in_pod, granted_image
from .k8s_job import KubernetesJob
from .pod_log import LogReading, PodLogCopier, RunProgress
from .pod_status import (
    container_state,
    disruption,
    job_failure_reason,
    job_finished,
    pending_reason,
)
from .pod_watch import watch_pods
from .queue_eviction import eviction_sentence, eviction_words, read_eviction_or_warn
from .rank_pods import (
    OtherRanks,
    all_ranks_again,
    failed_at,
    rank_of,
    rank_prefix,
)


class KubernetesExecutor(KubernetesJob):
    """Runs the job runner in a Kubernetes Job (docs/kubernetes-executor.md)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._memory_limit: int | None = None
        self._out_of_memory = False
        self.log_copy = PodLogCopier(
            self.job_id, self.log_store, self._cursor_file, self.report_progress, self.log
        )
        self._pods: dict[str, dict[str, Any]] = {}
        self._gone: set[str] = set()
        self._current_pod: str | None = None
        self._verdict: FinalState | None = None
        self._disrupted: dict[str, tuple[str, str]] = {}
        self._seen_failing: dict[str, int] = {}
        """Each pod's place in the order the watch first saw the pods fail (or go)."""
        self._requeued: str | None = None
        """While Kueue holds the job again after taking its GPU back: the sentence why."""
        self._attempts: JobAttemptsRow | None = None
        """The job's checkpoint and attempts (None: no checkpoint), read as it starts."""
        self._checkpoint: PodCheckpoint | None = None
        self.ranks = OtherRanks(
            self.job_id,
            self.log_store,
            self.files.directory,
            self.log,
            read_log=lambda copier: functools.partial(self._read_log, copier=copier),
            ended=self._container_ended,
            wait_change=self._wait_change,
            reconnect_seconds=self.log_reconnect_seconds,
        )
        """The pods of ranks 1 and up of a job on several nodes (rank 0's are ``_pods``)."""
        self._rank_pods = self.ranks.pods
        self._rank_taken: tuple[str, str] | None = None

    # -- paths and the client -------------------------------------------------------------

    @property
    def _pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    @property
    def _cursor_file(self) -> Path:
        return self.files.directory / "pod-log.json"

    # -- the objects ------------------------------------------------------------------------

    async def build_objects(self) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The job's ConfigMap, Job and GPU plan, as its Grant says
        (:func:`.k8s_objects.make_job_objects`); raises :class:`JobNotStartable`."""
        from gpuspawner.policy.units import parse_size_bytes

        grant = self.grant
        image = granted_image(grant, self.image)
        limits = grant.limits if grant else None
        files = self.user_files()
        # The kernel's folder, relative to the container's (the server's root folder).
        working_dir = files.notebook_folder if files.root else None
        checkpoint = self._checkpoint = self.pod_checkpoint(files)
        memory = (limits.memory_bytes if limits else None) or parse_size_bytes(self.default_memory)
        memory = self._memory_limit = memory_for_attempt(memory, self._attempts)
        spec = read_spec(self.files).model_copy(update={"working_dir": working_dir})
        notebook = self.files.input_notebook.read_bytes()
        try:
            configmap, job, plan = make_job_objects(
                self,
                grant,
                job_id=self.job_id,
                job=self.job,
                image=image,
                files=files,
                notebook=notebook,
                spec=spec.model_dump_json(),
                memory_bytes=memory,
                user=self.pod_user(),
                upload_url=self.job_upload_url,
                checkpoint=checkpoint,
                run=self.run,
            )
        except JobFilesTooLarge as error:
            raise JobNotStartable(error.message) from None
        if grant is not None and grant.nodes > 1 and grant.allocation is not None:
            held = grant.allocation.device_ids
            pinned = {d.rsplit("/", 1)[0] for d in held} if self.pin_to_node else set()
            job = on_several_nodes(
                job,
                nodes=grant.nodes,
                gpus_per_node=len(held) // grant.nodes,
                pinned_nodes=tuple(pinned),
            )
        return configmap, job, plan

    def pod_checkpoint(self, files: UserFiles) -> PodCheckpoint | None:
        """The job's checkpoint folder in its pod and its retries (None: no checkpoint);
        raises :class:`JobNotStartable` where jobs get no home to keep a checkpoint in."""
        attempts = self._attempts = self.store.job_attempts(self.job_id)
        if attempts is None:
            return None
        return checkpoint_in_pod(files, attempts)

    def user_files(self) -> UserFiles:
        """The owner's volumes in the job's pod (home, extras) and where the runner starts."""
        files, unmounted = granted_user_files(self.grant, self.job.owner, self.job.input_path, self)
        if unmounted:
            self.log.warning(
                "Job %s: its flavor's storage has a volume named 'home' that is not mounted at "
                "%s; the job gets no home volume of its own.",
                self.job_id,
                self.home_mount_path,
            )
        return files

    # -- launching ----------------------------------------------------------------------

    async def execute(self) -> JobOutcome:
        kube = await self._client()
        configmap, job, plan = await self.build_objects()
        await self._create_objects(kube, configmap, job, plan)
        where = f" in the queue {self.queue_name}" if self.queue_name else ""
        self.log_line(f"Kubernetes Job {self.namespace}/{self.name} created{where}")
        attempts = self._attempts
        checkpoint = self._checkpoint
        if attempts is not None and checkpoint is not None and self.run == 0:
            # The path the runner gets is the pod's, not one of this service's folders.
            self.store.set_job_checkpoint(
                self.job_id, attempts.checkpoint_folder, checkpoint.path, attempts.max_attempts
            )
            self.log_line(
                f"checkpoint folder {checkpoint.path}; attempt 1 of {attempts.max_attempts}"
            )
        if self.stop_reason is not None:  # a stop that came before the Job existed
            self._start_deleting()
        return await self._follow()

    async def reattach(self) -> JobOutcome:
        kube = await self._client()
        stopping = self.job.status == JobStatus.STOPPING.value
        self.log_copy.load_cursor()
        job = await kube.get(self._job_path)
        if job is None:
            return JobOutcome(
                self.log_copy.progress.status() if self.log_copy.progress.cells_total else None,
                stop_reason=StopReason.REQUEST if stopping else None,
                vanished=True,
            )
        self._job_exists = True
        self._job, self._job_read_at = job, time.monotonic()
        self._attempts = self.store.job_attempts(self.job_id)
        self.log_line(f"the job service restarted; following Kubernetes Job {self.name} again")
        if stopping:
            await self.stop(StopReason.REQUEST)
        return await self._follow()

    # -- following ------------------------------------------------------------------------

    async def _follow(self) -> JobOutcome:
        watcher = asyncio.ensure_future(self._watch_pods())
        try:
            followed: set[str] = set()
            while (pod := await self._next_pod(followed)) is not None:
                uid = pod["metadata"]["uid"]
                followed.add(uid)
                await self._copy_log(pod)
                if not await self._another_attempt(followed):
                    break
            await self._other_ranks_end()
            outcome = await self._outcome()
        finally:
            await self.ranks.cancel()
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            self.log_copy.save_cursor()
        await self._expire_later()
        return outcome

    async def _other_ranks_end(self) -> None:
        """A job on several nodes ends with its Job (rank 0 may end before the others even
        start); then the other ranks' logs are copied to their ends."""
        while self.log_copy.prefix and self.stop_reason is None:
            if self.stop_requested_elsewhere():
                await self.stop(StopReason.REQUEST)
            job = await self._read_job()
            if job is None or job_finished(job):
                break
            await self._wait_change(self.poll_interval)
        await self.ranks.finish()

    async def _watch_pods(self) -> None:
        """Keep ``_pods`` current (:func:`.pod_watch.watch_pods`)."""
        assert self.kube is not None
        selector = [("labelSelector", run_pod_selector(self.job_id, self.run))]
        await watch_pods(
            self.kube,
            self._pods_path,
            selector,
            pods=self._pods,
            gone=self._gone,
            changed=self._changed,
            saw=self._saw,
            job_id=self.job_id,
            log=self.log,
        )

    def _saw(self, pod: dict[str, Any]) -> None:
        """Keep the pod as the API has it now; a disruption, once seen, is remembered (a
        later status may no longer carry the condition)."""
        uid, rank = pod["metadata"]["uid"], rank_of(pod)
        if rank:  # ranks 1 and up of a job on several nodes: their logs beside rank 0's
            self.ranks.saw(pod)
        else:
            self._pods[uid] = pod
        if rank == 0:  # rank 0 of a job on several nodes: its lines are told apart too
            self.log_copy.prefix = rank_prefix(0)
        if uid not in self._seen_failing and failed_at(pod, uid in self._gone) is not None:
            self._seen_failing[uid] = len(self._seen_failing)
        disrupted = disruption(pod)
        if disrupted is not None and uid not in self._disrupted:
            self._disrupted[uid] = disrupted
            self.log_line(f"the cluster is taking the pod away ({disrupted[0]}): {disrupted[1]}")

    def _waiting(self, message: str | None) -> None:
        row = self.store.get(self.job_id)
        if row is not None and row.status_message != message:
            self.store.update(self.job_id, status_message=message)
            if message:
                self.log_line(message)

    async def _next_pod(self, followed: set[str]) -> dict[str, Any] | None:
        """The next pod whose container started, waiting for it; None when there is none."""
        unschedulable_since: float | None = None
        while True:
            if self.stop_reason is None and self.stop_requested_elsewhere():
                await self.stop(StopReason.REQUEST)
            pod = newest_unfollowed(self._pods, followed, self._gone)
            if pod is not None:
                state = container_state(pod)
                if "running" in state or "terminated" in state:
                    self._waiting(None)
                    requeued, self._requeued = self._requeued, None
                    node = pod["spec"].get("nodeName") or "a node"
                    pod_name = pod["metadata"]["name"]
                    if self.log_copy.cursor.pod_uid == pod["metadata"]["uid"]:  # after a restart
                        self.log_line(f"reading the log of pod {pod_name} on from where it was")
                    else:
                        if followed:  # a new attempt: its runner reports afresh
                            self.log_copy.progress = RunProgress(self.job_id)
                            if self._attempts is None:  # a job with a checkpoint: counted
                                self.log_line(
                                    rerun_line(len(followed) + 1, requeued, self.backoff_limit)
                                )
                        await self._count_attempts(pod)
                        self.log_line(f"pod {pod_name} started on {node}")
                    return pod
                reason = None if self.stop_reason else pending_reason(pod)
                if reason is not None and reason[0] == "start":
                    self._verdict = self._start_failure("ContainerNotStarted", reason[1])
                    return None
                if reason is not None:
                    unschedulable_since = unschedulable_since or time.monotonic()
                    waited = time.monotonic() - unschedulable_since
                    if waited >= self.scheduling_timeout_seconds:
                        self._verdict = self._start_failure("Unschedulable", reason[1])
                        return None
                    self._waiting(f"Waiting for room in the cluster: {reason[1]}")
                else:
                    unschedulable_since = None
            else:
                job = await self._read_job()
                if job is None or job_finished(job):
                    return None
                if (job.get("spec") or {}).get("suspend"):
                    queue = f"queue {self.queue_name}" if self.queue_name else "job queue"
                    self._waiting(
                        self._requeued or f"Waiting for the cluster's {queue} to admit the job."
                    )
            await self._wait_change(self.poll_interval)

    def _start_failure(self, ename: str, reason: str) -> FinalState:
        self._start_deleting()
        return start_failure(ename, reason, self.scheduling_timeout_seconds)

    async def _count_attempts(self, pod: dict[str, Any]) -> None:
        """Count the attempts of a job with a checkpoint that ended before ``pod``, each once,
        with a separator line in the log: the Job's earlier pods this service saw (oldest
        first, with their reasons), then as many more as the Job counted failed pods (those
        it replaced while this service was down, gone since)."""
        attempts = self._attempts
        if attempts is None:
            return
        pods, disrupted = dict(self._pods), dict(self._disrupted)  # as they were before the read
        status = ((await self._read_job(fresh=True)) or {}).get("status") or {}
        ended, failed = attempts_before(
            pod, pods, disrupted, status, job_name=self.name, run=self.run
        )
        for reason, key in ended:
            counted = self.store.job_attempts(self.job_id)
            this_job = counted.attempt - self.first_attempt + 1 if counted else 0
            if key.startswith("failed pod ") and this_job > failed:
                break  # the Job's count is reached (its pods were counted by uid)
            attempt = self.store.count_attempt(self.job_id, reason, key)
            if attempt is not None:
                self.log_line(separator(attempt, attempts.max_attempts, reason))

    async def _another_attempt(self, followed: set[str]) -> bool:
        """After a pod ended: will the Job run another (``backoff_limit`` > 0, or a job with
        a checkpoint: the cluster replaces a disrupted pod)?"""
        if self.stop_reason is not None:
            return False
        if self.queue_name and await self._taken_back_by_queue():
            return True
        if self.backoff_limit == 0 and self._attempts is None:
            return False
        while True:
            if any(uid not in followed and uid not in self._gone for uid in self._pods):
                return True
            job = await self._read_job()
            if job is None or job_finished(job):
                return False
            await self._wait_change(self.poll_interval)

    async def _taken_back_by_queue(self) -> bool:
        """Did Kueue take the job's GPU back while it ran (a preemption, say)? It then
        suspends the Job, whose pod the Job controller deletes, and queues it again: the job
        waits, saying why, and the next pod is followed once the queue admits it anew.

        Seen on the Job: suspended again, or (admitted again already) suspended or resumed
        since the pod that ended was made."""
        job = await self._read_job(fresh=True)
        pod = self._pods.get(self._current_pod or "") or {}
        if job is None or job_finished(job) or not pod:
            return False
        if not suspended_since(job, pod):
            return False
        assert self.kube is not None
        eviction = await read_eviction_or_warn(
            self.kube, self.namespace, job, self.log, self.job_id
        )
        sentence = eviction_sentence(eviction, self.queue_name, self._attempts is not None)
        self._disrupted.setdefault(
            pod["metadata"]["uid"],
            (eviction.reason if eviction else "Preempted", eviction_words(eviction)),
        )
        self._requeued = sentence
        self._waiting(sentence)
        return True

    def _container_ended(self, uid: str) -> bool:
        pod = self._pods.get(uid) or self._rank_pods.get(uid) or {}
        return uid in self._gone or "terminated" in container_state(pod)

    async def _copy_log(self, pod: dict[str, Any]) -> None:
        """Copy the pod's log until its container has ended, then read it once more."""
        uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
        self._current_pod = uid
        await self.log_copy.copy_pod(
            uid,
            name,
            read_log=self._read_log,
            ended=lambda: self._container_ended(uid),
            wait_change=self._wait_change,
            reconnect_seconds=self.log_reconnect_seconds,
        )

    async def _read_log(
        self, pod_name: str, *, follow: bool, copier: PodLogCopier | None = None
    ) -> LogReading:
        """One read of the pod's log from the cursor of ``copier`` (rank 0's: ``log_copy``)
        on; returns the reading (its leftover)."""
        assert self.kube is not None
        copier = copier or self.log_copy
        path = f"{self._pods_path}/{pod_name}/log"
        query = copier.query(follow=follow)
        return await copier.read(self.kube.stream(path, query, idle_timeout=self.log_idle_timeout))

    # -- the result -----------------------------------------------------------------------

    async def _outcome(self) -> JobOutcome:
        """How the job ended, from the pod, the runner's report and the Job."""
        pod = self._pods.get(self._current_pod or "") or {}
        terminated = container_state(pod).get("terminated") if pod else None
        reported = parse_compact_status(terminated.get("message") or "") if terminated else None
        status: RunnerStatus | None = reported or self.log_copy.progress.final
        if status is None and (self.log_copy.progress.cells_total is not None or terminated):
            status = self.log_copy.progress.status()
        exit_code = terminated.get("exitCode") if terminated else None
        job = await self._read_job(fresh=True) if self._job_exists else None
        stop_reason = self.stop_reason
        if stop_reason is None and job_failure_reason(job) == "DeadlineExceeded":
            stop_reason = StopReason.DEADLINE
            self.log_line(f"the deadline of {self.job.deadline_seconds} s has passed")
        outcome = JobOutcome(
            status,
            exit_code=exit_code,
            stop_reason=stop_reason,
            forced=stop_reason is not None and exit_code == 137,
            last_cell=self.log_copy.progress.current_cell,
        )
        if self._verdict is None:
            judged = judge(
                outcome,
                pod,
                terminated,
                job,
                pods=self._pods,
                rank_pods=self._rank_pods,
                gone=self._gone,
                disrupted=self._disrupted,
                attempts=self._attempts,
                seen_failing=self._seen_failing,
            )
            self._rank_taken, self._out_of_memory = judged.rank_taken, judged.out_of_memory
            if judged.line:
                self.log_line(judged.line)
            self._verdict = judged.verdict
        return outcome

    async def on_complete(self, outcome: JobOutcome) -> None:
        revoke_upload_token(self.files)  # the outputs the job sent are final now
        verdict = self._verdict
        if verdict is None:
            await super().on_complete(outcome)
            return
        # Without a Grant (a job followed again after a restart) the flavor's setting is not
        # known here: the usual out-of-memory verdict stands.
        if self._rank_taken and self._attempts is not None:  # every rank again, from it
            args = (self.store, self.job_id, self._attempts, self._rank_taken, verdict)
            if (verdict := all_ranks_again(*args, self.log_line)) is None:
                return
        if self._out_of_memory and self._attempts is not None and self.grant is not None:
            verdict = self._after_out_of_memory(outcome, verdict)
            if verdict is None:
                return
        self.report_progress(outcome.status)
        self.log_line(f"{verdict.status.value.lower()}: {verdict.message}")
        self.store.transition(
            self.job_id,
            ACTIVE,
            verdict.status,
            status_message=verdict.message,
            error=verdict.error.model_dump() if verdict.error else None,
            exit_code=verdict.exit_code,
            current_cell=None,
            end_time=utcnow(),
        )

    def _after_out_of_memory(self, outcome: JobOutcome, verdict: FinalState) -> FinalState | None:
        """A job with a checkpoint that ran out of memory: queued again for its next attempt,
        a new Job with the larger memory its flavor allows (None), or ``verdict`` with a
        sentence saying what to do."""
        attempts = self._attempts
        assert attempts is not None
        retry_memory = self.grant.oom_retry_memory if self.grant else None
        ran_out = dataclasses.replace(outcome, oom_killed=True, memory_limit=self._memory_limit)
        more = oom_retry(ran_out, retry_memory)
        if more is None:
            sentence = no_more_memory(retry_memory)
        else:
            attempt = self.store.start_again(
                self.job_id, (JobStatus.RUNNING,), more.reason, memory_bytes=more.memory_bytes
            )
            if attempt is not None:
                self.log_line(
                    separator(attempt, attempts.max_attempts, more.reason, more.memory_bytes)
                )
                return None
            if attempts.max_attempts <= 1:
                return verdict  # it asked for no retry
            sentence = exhausted(attempts.max_attempts)
        self.log_line(sentence)
        return dataclasses.replace(verdict, message=f"{verdict.message} {sentence}")

    async def on_failure(self, error: Exception) -> None:
        revoke_upload_token(self.files)
        if self._job_exists and self.kube is not None:  # do not leave a pod running unwatched
            with contextlib.suppress(Exception):
                await self._delete_job()
        if not isinstance(error, JobNotStartable):
            await super().on_failure(error)
            return
        self.log_line(f"failed: {error.message}")
        self.store.transition(
            self.job_id,
            (JobStatus.CREATED, JobStatus.QUEUED, *ACTIVE),
            JobStatus.FAILED,
            status_message=error.message,
            error={"cell_index": None, "ename": "JobNotStartable", "evalue": error.message},
            current_cell=None,
            end_time=utcnow(),
        )

    # -- stopping -----------------------------------------------------------------------
