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
    expand_user_names,
    job_object_name,
    make_configmap,
    make_job,
    make_upload_secret,
    make_user_files,
    run_pod_selector,
    strip_outputs,
    unmounted_home_volume,
)
from ..k8s_ranks import make_rank_service, on_several_nodes
from ..models import JobStatus
from ..output_uploads import issue_upload_token, revoke_upload_token
from ..retries import exhausted, no_more_memory, oom_retry, separator
from ..runfiles import RunnerStatus, parse_compact_status, read_spec
from ..store import ACTIVE, JobAttemptsRow, utcnow
from .base import FinalState, JobOutcome, StopReason
from .k8s_attempts import (
    attempts_before,
    current_run,
    deleted_verdict,
    disruption_of,
    memory_for_attempt,
    newest_unfollowed,
    out_of_memory_verdict,
    preempted_verdict,
    ran_out_of_memory,
    rerun_line,
    retries_used_up,
    runner_decides,
    start_failure,
    suspended_since,
)
from .k8s_create import JobNotStartable, checkpoint_in_pod, create_job_objects, granted_image
from .k8s_settings import KubernetesExecutorSettings
from .kube_client import KubeClient, KubeError, connect, sleep_or_event
from .pod_log import LogReading, PodLogCopier, RunProgress
from .pod_status import (
    container_state,
    disruption,
    job_failure_reason,
    job_finished,
    pending_reason,
)
from .queue_eviction import eviction_sentence, eviction_words, read_eviction_or_warn
from .rank_pods import (
    OtherRanks,
    all_ranks_again,
    first_failed_rank,
    rank_failure,
    rank_of,
    rank_prefix,
)


class KubernetesExecutor(KubernetesExecutorSettings):
    """Runs the job runner in a Kubernetes Job (docs/kubernetes-executor.md)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.run, self.first_attempt = current_run(self.store.job_attempts(self.job_id))
        """Which of the job's Kubernetes Jobs this executor runs (0: its first), and the
        job's attempt that this Job's first pod is."""
        self.name = job_object_name(self.job_id, self.run)
        self._memory_limit: int | None = None
        self._out_of_memory = False
        self.kube: KubeClient | None = None
        self.log_copy = PodLogCopier(
            self.job_id, self.log_store, self._cursor_file, self.report_progress, self.log
        )
        self._pods: dict[str, dict[str, Any]] = {}
        self._gone: set[str] = set()
        self._changed = asyncio.Event()
        self._job: dict[str, Any] | None = None
        self._job_read_at = 0.0
        self._job_exists = False
        self._deleting: asyncio.Future[None] | None = None
        self._current_pod: str | None = None
        self._verdict: FinalState | None = None
        self._disrupted: dict[str, tuple[str, str]] = {}
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
    def _job_path(self) -> str:
        return f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{self.name}"

    @property
    def _pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    @property
    def _cursor_file(self) -> Path:
        return self.files.directory / "pod-log.json"

    async def _client(self) -> KubeClient:
        if self.kube is None:
            self.kube = await connect(self.kubeconfig or None)
            self.kube.timeout = self.api_timeout
        return self.kube

    async def _close(self) -> None:
        if self._deleting is not None:  # a deletion under way finishes with the client
            try:
                await self._deleting
            except Exception as error:
                self.log.warning(
                    "Job %s: deleting its Kubernetes Job failed: %s", self.job_id, error
                )
        if self.kube is not None:
            kube, self.kube = self.kube, None
            await kube.close()

    async def process(self) -> None:
        try:
            await super().process()
        finally:
            await self._close()

    async def resume(self) -> None:
        try:
            await super().resume()
        finally:
            await self._close()

    # -- the objects ------------------------------------------------------------------------

    async def build_objects(self) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The job's ConfigMap, Job and GPU plan, as its Grant says; raises
        :class:`JobNotStartable`."""
        from gpuspawner.backends import cpu_only_plan
        from gpuspawner.policy.units import parse_size_bytes

        grant = self.grant
        image = granted_image(grant, self.image)
        plan = cpu_only_plan()
        if grant is not None and grant.plan is not None:
            # The share's variables and the GPUSPAWNER_* ones describing it win over all.
            plan = dataclasses.replace(grant.plan, environment=grant.environment)
        allocation = grant.allocation.to_dict() if grant and grant.allocation else None
        limits = grant.limits if grant else None
        files = self.user_files()
        # The kernel's folder, relative to the container's (the server's root folder).
        working_dir = files.notebook_folder if files.root else None
        checkpoint = self._checkpoint = self.pod_checkpoint(files)
        memory = (limits.memory_bytes if limits else None) or parse_size_bytes(self.default_memory)
        memory = memory_for_attempt(memory, self._attempts)
        self._memory_limit = memory
        spec = read_spec(self.files).model_copy(update={"working_dir": working_dir})
        notebook = self.files.input_notebook.read_bytes()
        spec_text = spec.model_dump_json()
        if len(notebook) + len(spec_text) > self.max_job_files_bytes:
            notebook = strip_outputs(notebook)
        try:
            configmap = make_configmap(
                job_id=self.job_id,
                owner=self.job.owner,
                notebook=notebook,
                spec=spec_text,
                namespace=self.namespace,
                max_bytes=self.max_job_files_bytes,
                run=self.run,
            )
        except JobFilesTooLarge as error:
            raise JobNotStartable(error.message) from None
        job = make_job(
            job_id=self.job_id,
            owner=self.job.owner,
            image=image,
            plan=plan,
            flavor=self.job.flavor,
            cpu=(limits.cpu if limits else None) or self.default_cpu,
            memory_bytes=memory,
            deadline_seconds=self.job.deadline_seconds,
            environment={**(grant.variables if grant else {}), **self.environment},
            allocation=allocation,
            namespace=self.namespace,
            node_name=grant.node if grant and self.pin_to_node and grant.nodes == 1 else None,
            backoff_limit=self.backoff_limit,
            queue_name=self.queue_name,
            service_account=self.service_account,
            priority_class_name=self.priority_class_name,
            image_pull_policy=self.image_pull_policy or None,
            termination_grace_seconds=max(1, round(self.stop_grace_seconds)),
            shm_size=self.shm_size or None,
            user=self.pod_user(),
            files=files,
            pod_labels=self.pod_labels,
            upload_url=self.job_upload_url,
            checkpoint=checkpoint,
            run=self.run,
        )
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
        """The job's checkpoint folder in its pod, below the notebook's folder in the home the
        pod mounts, and its retries; None for a job without a checkpoint. Raises
        :class:`JobNotStartable` where jobs get no home to keep a checkpoint in."""
        attempts = self._attempts = self.store.job_attempts(self.job_id)
        if attempts is None:
            return None
        return checkpoint_in_pod(files, attempts)

    def user_files(self) -> UserFiles:
        """The owner's volumes in the job's pod (home, extras) and where the runner starts."""
        owner = self.job.owner
        # The flavor's storage, as the Grant rendered it (expanded already), then the
        # settings' volumes; the home unless the flavor mounts something there itself.
        grant = self.grant
        volumes = [dict(volume) for volume in (grant.volumes if grant else ())]
        mounts = [dict(mount) for mount in (grant.volume_mounts if grant else ())]
        volumes += [expand_user_names(volume, owner) for volume in self.extra_volumes]
        mounts += [expand_user_names(mount, owner) for mount in self.extra_volume_mounts]
        if unmounted_home_volume(volumes, mounts, self.home_mount_path):
            self.log.warning(
                "Job %s: its flavor's storage has a volume named 'home' that is not mounted at "
                "%s; the job gets no home volume of its own.",
                self.job_id,
                self.home_mount_path,
            )
        return make_user_files(
            owner,
            self.job.input_path,
            volumes=volumes,
            mounts=mounts,
            home_pvc_name_template=self.home_pvc_name_template,
            home_mount_path=self.home_mount_path,
            home_sub_path=self.home_sub_path,
            notebook_dir=self.notebook_dir,
        )

    # -- launching ----------------------------------------------------------------------

    async def execute(self) -> JobOutcome:
        kube = await self._client()
        configmap, job, plan = await self.build_objects()
        try:
            await self._create_objects(kube, configmap, job, plan)
        except KubeError as error:
            if error.status != 403:
                raise
            raise JobNotStartable(
                f"The job service is not allowed to start jobs here: {error.message}. Tell "
                "the hub admins: the job service's Role lacks this permission."
            ) from None
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

    async def _create_objects(
        self, kube: KubeClient, configmap: dict[str, Any], job: dict[str, Any], plan: Any
    ) -> None:
        """The job's objects (:func:`.k8s_create.create_job_objects`), with an upload Secret
        holding a token issued now, and the pods' Service of a job on several nodes."""
        owner, namespace = self.job.owner, self.namespace
        secret = None
        if self.job_upload_url:
            token = issue_upload_token(self.files)
            secret = make_upload_secret(
                job_id=self.job_id, owner=owner, token=token, namespace=namespace
            )
        service = None
        if job["spec"].get("completionMode") == "Indexed":
            service = make_rank_service(
                job_id=self.job_id, owner=owner, run=self.run, namespace=namespace
            )
        await create_job_objects(
            kube,
            namespace,
            configmap=configmap,
            job=job,
            plan=plan,
            secret=secret,
            service=service,
            job_made=lambda: setattr(self, "_job_exists", True),
        )

    async def still_running(self) -> bool:
        kube = await self._client()
        job = await kube.get(self._job_path)
        return job is not None and not job_finished(job)

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
        """Keep ``_pods`` current: list, then watch from the list's resourceVersion."""
        assert self.kube is not None
        selector = [("labelSelector", run_pod_selector(self.job_id, self.run))]
        version: str | None = None
        while True:
            try:
                if version is None:
                    listing = await self.kube.request("GET", self._pods_path, query=selector)
                    present = set()
                    for pod in listing.get("items") or []:
                        self._saw(pod)
                        present.add(pod["metadata"]["uid"])
                    self._gone.update(set(self._pods) - present)
                    version = listing["metadata"]["resourceVersion"]
                    self._changed.set()
                query = [*selector, ("resourceVersion", version), ("allowWatchBookmarks", "true")]
                async with contextlib.aclosing(self.kube.watch(self._pods_path, query)) as events:
                    async for event in events:
                        pod = event.get("object") or {}
                        if event.get("type") == "ERROR":  # 410 Gone: list again
                            version = None
                            break
                        version = pod["metadata"]["resourceVersion"]
                        if event["type"] == "BOOKMARK":
                            continue
                        self._saw(pod)
                        if event["type"] == "DELETED":
                            self._gone.add(pod["metadata"]["uid"])
                        self._changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a broken watch: list again after a pause
                self.log.debug("Job %s: pod watch ended: %s", self.job_id, error)
                version = None
                await asyncio.sleep(1.0)

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
        disrupted = disruption(pod)
        if disrupted is not None and uid not in self._disrupted:
            self._disrupted[uid] = disrupted
            self.log_line(f"the cluster is taking the pod away ({disrupted[0]}): {disrupted[1]}")

    async def _wait_change(self, seconds: float) -> None:
        await sleep_or_event(self._changed, seconds)
        self._changed.clear()

    async def _read_job(self, *, fresh: bool = False) -> dict[str, Any] | None:
        """The Job as the API has it (re-read at most once per poll interval)."""
        if fresh or time.monotonic() - self._job_read_at >= self.poll_interval:
            assert self.kube is not None
            self._job = await self.kube.get(self._job_path)
            self._job_read_at = time.monotonic()
        return self._job

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
            self._verdict = self._judge(outcome, pod, terminated, job)
        return outcome

    def _judge(
        self,
        outcome: JobOutcome,
        pod: dict[str, Any],
        terminated: dict[str, Any] | None,
        job: dict[str, Any] | None,
    ) -> FinalState | None:
        """What only the cluster can say (a rank failed, out of memory, deleted); None:
        ``final_state``."""
        failed = first_failed_rank({**self._pods, **self._rank_pods}, self._gone)
        if self._rank_pods and outcome.stop_reason is None and job_failure_reason(job) and failed:
            self._rank_taken = disruption_of(failed, self._disrupted)
            if rank_of(failed) or self._rank_taken:
                return rank_failure(failed, self._rank_taken)
        if ran_out_of_memory(outcome, pod, terminated):
            self._out_of_memory = True
            return out_of_memory_verdict(outcome)
        if runner_decides(outcome):
            return None
        disrupted = disruption_of(pod, self._disrupted)
        if disrupted is not None:
            again = "Run the job again."
            if self._attempts is not None and retries_used_up(self._attempts, job):
                again = exhausted(self._attempts.max_attempts)
                self.log_line(again)
            return preempted_verdict(outcome, disrupted, again)
        return deleted_verdict(outcome, pod, job, self._gone)

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

    async def _expire_later(self) -> None:
        """Let the TTL controller delete the finished Job, now that its log is stored."""
        if not self._job_exists or self._deleting is not None or self.kube is None:
            return
        try:
            await self.kube.request(
                "PATCH",
                self._job_path,
                body={"spec": {"ttlSecondsAfterFinished": self.ttl_seconds_after_finished}},
                content_type="application/merge-patch+json",
            )
        except KubeError as error:
            if error.status != 404:
                self.log.warning("Job %s: could not set the Job's TTL: %s", self.job_id, error)

    # -- stopping -----------------------------------------------------------------------

    async def stop(self, reason: StopReason = StopReason.REQUEST) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self._job_exists:
            self._start_deleting()
        self._changed.set()

    def _start_deleting(self) -> None:
        if self._deleting is None and self._job_exists:
            self.log_line(
                f"deleting Kubernetes Job {self.name}; its pod gets "
                f"{self.stop_grace_seconds:g} s to stop"
            )
            self._deleting = asyncio.ensure_future(self._delete_job())

    async def _delete_job(self) -> None:
        """Delete the Job (its pod and ConfigMap follow); the log is being followed."""
        assert self.kube is not None
        try:
            await self.kube.request(
                "DELETE", self._job_path, body={"propagationPolicy": "Background"}
            )
        except KubeError as error:
            if error.status != 404:
                raise
