"""The KubernetesExecutor's Kubernetes Job of a job: its API client, creating, reading and
deleting the Job, and letting it expire once its log is stored. A base class of the
executor, over its settings (docs/kubernetes-executor.md)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..k8s_objects import job_object_name, make_upload_secret
from ..k8s_ranks import make_rank_service
from ..output_uploads import issue_upload_token
from .base import StopReason
from .k8s_attempts import current_run
from .k8s_create import JobNotStartable, create_job_objects
from .k8s_settings import KubernetesExecutorSettings
from .kube_client import KubeClient, KubeError, connect, sleep_or_event
from .pod_status import job_finished


class KubernetesJob(KubernetesExecutorSettings):
    """One Kubernetes Job of a job (``run``: 0 for its first), as the API has it."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.run, self.first_attempt = current_run(self.store.job_attempts(self.job_id))
        """Which of the job's Kubernetes Jobs this executor runs (0: its first), and the
        job's attempt that this Job's first pod is."""
        self.name = job_object_name(self.job_id, self.run)
        self.kube: KubeClient | None = None
        self._changed = asyncio.Event()
        self._job: dict[str, Any] | None = None
        self._job_read_at = 0.0
        self._job_exists = False
        self._deleting: asyncio.Future[None] | None = None

    @property
    def _job_path(self) -> str:
        return self.job_path(self.name)

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

    async def _create_objects(
        self, kube: KubeClient, configmap: dict[str, Any], job: dict[str, Any], plan: Any
    ) -> None:
        """The job's objects (:func:`.k8s_create.create_job_objects`), with an upload Secret
        holding a token issued now, and the pods' Service of a job on several nodes; raises
        :class:`JobNotStartable` where the API server does not allow it (403)."""
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
        try:
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
        except KubeError as error:
            if error.status != 403:
                raise
            raise JobNotStartable(
                f"The job service is not allowed to start jobs here: {error.message}. Tell "
                "the hub admins: the job service's Role lacks this permission."
            ) from None

    async def still_running(self) -> bool:
        kube = await self._client()
        job = await kube.get(self._job_path)
        return job is not None and not job_finished(job)

    async def _read_job(self, *, fresh: bool = False) -> dict[str, Any] | None:
        """The Job as the API has it (re-read at most once per poll interval)."""
        if fresh or time.monotonic() - self._job_read_at >= self.poll_interval:
            assert self.kube is not None
            self._job = await self.kube.get(self._job_path)
            self._job_read_at = time.monotonic()
        return self._job

    async def _wait_change(self, seconds: float) -> None:
        await sleep_or_event(self._changed, seconds)
        self._changed.clear()

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
