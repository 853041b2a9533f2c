"""The simulated Job controller (batch/v1, NonIndexed completion mode) and TTL controller.

It creates pods from the Job's template (generateName ``<job>-``, the template's labels,
which the API server extended with job-name and controller-uid, an ownerReference with
controller=true and the ``batch.kubernetes.io/job-tracking`` finalizer), counts finished
pods into status.succeeded/failed before releasing their finalizer, replaces failed pods
until ``backoffLimit`` is exceeded, fails Jobs past ``activeDeadlineSeconds``, deletes the
pods of suspended Jobs, applies ``podFailurePolicy`` to each failed pod as Kubernetes does
(:func:`match_pod_failure_policy`: rules in order, the first match wins; ``FailJob`` fails
the Job at once with reason PodFailurePolicy, ``Ignore`` replaces the pod without counting
it toward ``backoffLimit``, ``Count`` and no match count it) and, with a pod failure policy
or ``podReplacementPolicy: Failed``, counts and replaces a deleted pod only once it has
reached a terminal phase (so the policy sees its final state), sets the conditions of Kubernetes 1.31+ (SuccessCriteriaMet then
Complete; FailureTarget then Failed, once no pod is still running), and deletes finished
Jobs ``ttlSecondsAfterFinished`` after they finished (with Foreground propagation, as the
real TTL controller does). It acts only through the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from typing import Any

from .client import ClientError, Informer, KubeClient
from .events import recorded_event
from .timestamps import now, parse, rfc3339

log = logging.getLogger(__name__)

Object = dict[str, Any]
Key = tuple[str, str]
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
_MESSAGES = {
    "BackoffLimitExceeded": "Job has reached the specified backoff limit",
    "DeadlineExceeded": "Job was active longer than specified deadline",
    "CompletionsReached": "Reached expected number of succeeded pods",
}


def match_pod_failure_policy(
    policy: Object | None, pod: Object
) -> tuple[str | None, bool, str | None]:
    """What a Job's ``podFailurePolicy`` says of a failed pod, as the Job controller's
    ``matchPodFailurePolicy`` does: ``(message, count it as failed, action)``. The rules are
    tried in order and the first that matches decides; no match counts the pod (action
    None). ``onExitCodes`` looks at the terminated containers (init containers first) with
    a non-zero exit code; ``onPodConditions`` at the pod's conditions, type and status."""
    namespace, name = pod["metadata"].get("namespace", ""), pod["metadata"]["name"]
    status = pod.get("status") or {}
    containers = (status.get("initContainerStatuses") or []) + (
        status.get("containerStatuses") or []
    )
    for index, rule in enumerate((policy or {}).get("rules") or []):
        action = rule.get("action")
        message = None
        if "onExitCodes" in rule and rule["onExitCodes"] is not None:
            requirement = rule["onExitCodes"]
            for container in containers:
                terminated = (container.get("state") or {}).get("terminated")
                if not terminated or terminated.get("exitCode", 0) == 0:
                    continue
                wanted = requirement.get("containerName")
                if wanted and wanted != container["name"]:
                    continue
                code = terminated["exitCode"]
                inside = code in (requirement.get("values") or [])
                if inside == (requirement.get("operator") == "In"):
                    message = (
                        f"Container {container['name']} for pod {namespace}/{name} failed with "
                        f"exit code {code} matching {action} rule at index {index}"
                    )
                    break
        else:
            for condition in status.get("conditions") or []:
                if any(
                    condition.get("type") == pattern.get("type")
                    and condition.get("status") == pattern.get("status", "True")
                    for pattern in rule.get("onPodConditions") or []
                ):
                    message = (
                        f"Pod {namespace}/{name} has condition {condition['type']} matching "
                        f"{action} rule at index {index}"
                    )
                    break
        if message is None:
            continue
        if action == "FailJob":
            return message, True, action
        if action == "Ignore":
            return None, False, action
        if action == "Count":
            return None, True, action
        # Unknown actions are skipped, as clients are told to.
    return None, True, None


def replaces_only_failed(job: Object) -> bool:
    """Whether the Job waits for a deleted pod to end before counting and replacing it."""
    spec = job["spec"]
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


def _controller_uid(pod: Object) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return ref["uid"]
    return None


def _condition(job: Object, kind: str) -> Object | None:
    return next(
        (c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == kind), None
    )


def _is_true(job: Object, kind: str) -> bool:
    condition = _condition(job, kind)
    return condition is not None and condition["status"] == "True"


def is_finished(job: Object) -> bool:
    return _is_true(job, "Complete") or _is_true(job, "Failed")


class JobController:
    def __init__(self, client: KubeClient, *, backoff_delay: float = 0.0) -> None:
        self.client = client
        self.backoff_delay = (
            backoff_delay  # the real controller waits 10 s, 20 s, ... between retries
        )
        self.jobs = Informer(
            client, "/apis/batch/v1/jobs", self._on_job, kind="Job", api_version="batch/v1"
        )
        self.pods = Informer(
            client,
            "/api/v1/pods",
            self._on_pod,
            kind="Pod",
            label_selector="batch.kubernetes.io/controller-uid",
        )
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._by_uid: dict[str, Key] = {}
        self._counted: dict[str, set[str]] = {}  # job uid -> pod uids seen finished
        # job uid -> finished pods counted but not yet written to status (the real
        # controller keeps these in status.uncountedTerminatedPods)
        self._uncounted: dict[str, dict[str, set[str]]] = {}
        self._deleted_by_controller: set[str] = set()  # pod uids that are not failures
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _enqueue_later(self, key: Key, delay: float) -> None:
        previous = self._timers.pop(key, None)
        if previous:
            previous.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(max(delay, 0), self.enqueue, key)

    def _on_job(self, kind: str, job: Object, old: Object | None) -> None:
        key = Informer.key(job)
        if kind == "DELETED":
            uid = job["metadata"]["uid"]
            self._by_uid.pop(uid, None)
            self._counted.pop(uid, None)
            self._uncounted.pop(uid, None)
            timer = self._timers.pop(key, None)
            if timer:
                timer.cancel()
        else:
            self._by_uid[job["metadata"]["uid"]] = key
        self.enqueue(key)

    def _on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        uid = _controller_uid(pod)
        key = self._by_uid.get(uid) if uid else None
        if key is not None:
            self.enqueue(key)
        elif (
            kind != "DELETED"
            and self.jobs.synced.is_set()
            and TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or [])
        ):
            # Its Job is gone, or orphaned it: nothing will count this pod, so release it.
            self._spawn(self._release([pod]))

    async def run(self) -> None:
        await self.jobs.synced.wait()
        await self.pods.synced.wait()
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self._sync(key)
            except asyncio.CancelledError:
                raise
            except ClientError as error:
                if error.status == 409:
                    self._enqueue_later(key, 0.01)
                elif error.status != 404:
                    log.warning("job controller: %s/%s: %s", *key, error)
            except Exception:
                log.exception("job controller: syncing %s/%s failed", *key)

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- helpers ------------------------------------------------------------------------

    async def _event(self, job: Object, reason: str, message: str, type: str = "Normal") -> None:
        with contextlib.suppress(ClientError):
            await self.client.create(
                f"/api/v1/namespaces/{job['metadata']['namespace']}/events",
                recorded_event(
                    job, component="job-controller", reason=reason, message=message, type=type
                ),
            )

    async def _release(self, pods: list[Object]) -> None:
        """Drop the tracking finalizer of pods whose outcome has been counted."""
        for pod in pods:
            finalizers = pod["metadata"].get("finalizers") or []
            if TRACKING_FINALIZER not in finalizers:
                continue
            remaining = [f for f in finalizers if f != TRACKING_FINALIZER]
            path = (
                f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
            )
            with contextlib.suppress(ClientError):
                await self.client.json_patch(
                    path,
                    [
                        {"op": "test", "path": "/metadata/uid", "value": pod["metadata"]["uid"]},
                        {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
                    ],
                )

    async def _delete_pods(self, job: Object, pods: list[Object]) -> None:
        for pod in pods:
            meta = pod["metadata"]
            self._deleted_by_controller.add(meta["uid"])
            with contextlib.suppress(ClientError):
                await self.client.delete(
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    {"preconditions": {"uid": meta["uid"]}},
                )
                await self._event(job, "SuccessfulDelete", f"Deleted pod: {meta['name']}")

    async def _create_pod(self, job: Object) -> None:
        meta, template = job["metadata"], copy.deepcopy(job["spec"]["template"])
        pod_meta = template.get("metadata") or {}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "labels": pod_meta.get("labels") or {},
                "annotations": pod_meta.get("annotations") or {},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "finalizers": [TRACKING_FINALIZER],
            },
            "spec": template.get("spec") or {},
        }
        if not pod["metadata"]["annotations"]:
            del pod["metadata"]["annotations"]
        created = await self.client.create(f"/api/v1/namespaces/{meta['namespace']}/pods", pod)
        self.pods.cache[Informer.key(created)] = created
        await self._event(job, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")

    # --- reconciliation -----------------------------------------------------------------

    async def _sync(self, key: Key) -> None:
        job = self.jobs.cache.get(key)
        if job is None:
            return
        meta, spec = job["metadata"], job["spec"]
        uid = meta["uid"]
        pods = [p for p in self.pods.cache.values() if _controller_uid(p) == uid]
        if meta.get("deletionTimestamp"):
            await self._release(
                [
                    p
                    for p in pods
                    if p["status"].get("phase") in ("Succeeded", "Failed")
                    or p["metadata"].get("deletionTimestamp")
                ]
            )
            return
        status = copy.deepcopy(job.get("status") or {})
        counted = self._counted.setdefault(uid, set())
        uncounted = self._uncounted.setdefault(uid, {"succeeded": set(), "failed": set()})
        newly_counted = []
        only_failed = replaces_only_failed(job)
        policy_failure: str | None = None
        for pod in pods:
            pod_uid, phase = pod["metadata"]["uid"], pod["status"].get("phase")
            finished = phase in ("Succeeded", "Failed") or (
                not only_failed and pod["metadata"].get("deletionTimestamp")
            )
            if (
                not finished
                or pod_uid in counted
                or TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or [])
            ):
                continue
            counted.add(pod_uid)
            newly_counted.append(pod)
            if phase == "Succeeded":
                uncounted["succeeded"].add(pod_uid)
            elif pod_uid not in self._deleted_by_controller:
                message, count, action = (None, True, None)
                if phase == "Failed" and spec.get("podFailurePolicy"):
                    message, count, action = match_pod_failure_policy(spec["podFailurePolicy"], pod)
                if action == "FailJob" and policy_failure is None:
                    policy_failure = message
                if count:
                    uncounted["failed"].add(pod_uid)
        succeeded = status.get("succeeded", 0) + len(uncounted["succeeded"])
        failed = status.get("failed", 0) + len(uncounted["failed"])
        active = [
            p
            for p in pods
            if p["status"].get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")
        ]
        terminating = [
            p
            for p in pods
            if p["status"].get("phase") not in ("Succeeded", "Failed")
            and p["metadata"].get("deletionTimestamp")
        ]
        # Pods deleted but not ended yet: replaced only once they end, with only_failed.
        replacing = len(terminating) if only_failed else 0
        conditions = list(status.get("conditions") or [])
        moment = rfc3339()

        def add_condition(kind: str, reason: str, message: str, value: str = "True") -> None:
            conditions[:] = [c for c in conditions if c["type"] != kind]
            conditions.append(
                {
                    "type": kind,
                    "status": value,
                    "lastProbeTime": moment,
                    "lastTransitionTime": moment,
                    "reason": reason,
                    "message": message,
                }
            )

        events: list[tuple[str, str, str]] = []
        failure_target = next(
            (c for c in conditions if c["type"] == "FailureTarget" and c["status"] == "True"), None
        )
        success_met = any(
            c["type"] == "SuccessCriteriaMet" and c["status"] == "True" for c in conditions
        )
        finished_before = is_finished(job)
        to_delete: list[Object] = []

        if not finished_before and failure_target is None and not success_met:
            if spec.get("suspend"):
                to_delete = active
                if not _is_true(job, "Suspended"):
                    add_condition("Suspended", "JobSuspended", "Job suspended")
                    events.append(("Suspended", "Job suspended", "Normal"))
                    status.pop("startTime", None)
            else:
                if _is_true(job, "Suspended"):
                    add_condition("Suspended", "JobResumed", "Job resumed", "False")
                    events.append(("Resumed", "Job resumed", "Normal"))
                status.setdefault("startTime", moment)
                deadline = spec.get("activeDeadlineSeconds")
                elapsed = (now() - parse(status["startTime"])).total_seconds()
                reason = None
                message = None
                if policy_failure is not None:
                    reason, message = "PodFailurePolicy", policy_failure
                elif failed > spec.get("backoffLimit", 6):
                    reason = "BackoffLimitExceeded"
                elif deadline is not None and elapsed >= deadline:
                    reason = "DeadlineExceeded"
                if reason:
                    message = message or _MESSAGES[reason]
                    add_condition("FailureTarget", reason, message)
                    events.append((reason, message, "Warning"))
                    to_delete = active
                elif succeeded >= spec.get("completions", 1):
                    add_condition(
                        "SuccessCriteriaMet", "CompletionsReached", _MESSAGES["CompletionsReached"]
                    )
                    to_delete = active
                else:
                    wanted = (
                        min(spec.get("parallelism", 1), spec.get("completions", 1) - succeeded)
                        - len(active)
                        - replacing
                    )
                    if wanted > 0:
                        recently_failed = bool(newly_counted) and failed > status.get("failed", 0)
                        if recently_failed and self.backoff_delay:
                            self._enqueue_later(key, self.backoff_delay)
                        else:
                            for _ in range(wanted):
                                await self._create_pod(job)
                            active = [
                                p
                                for p in self.pods.cache.values()
                                if _controller_uid(p) == uid
                                and p["status"].get("phase") not in ("Succeeded", "Failed")
                                and not p["metadata"].get("deletionTimestamp")
                            ]
                    if deadline is not None:
                        self._enqueue_later(key, deadline - elapsed)

        if to_delete:
            await self._delete_pods(job, to_delete)
            terminating += to_delete
            active = []
        still_running = terminating + active
        failure_target = next(
            (c for c in conditions if c["type"] == "FailureTarget" and c["status"] == "True"), None
        )
        if (
            failure_target
            and not still_running
            and not _is_true({"status": {"conditions": conditions}}, "Failed")
        ):
            add_condition("Failed", failure_target["reason"], failure_target["message"])
        if (
            any(c["type"] == "SuccessCriteriaMet" and c["status"] == "True" for c in conditions)
            and not still_running
        ):
            if not _is_true({"status": {"conditions": conditions}}, "Complete"):
                add_condition("Complete", "CompletionsReached", _MESSAGES["CompletionsReached"])
                status["completionTime"] = moment
                events.append(("Completed", "Job completed", "Normal"))

        status["conditions"] = conditions
        status["ready"] = sum(
            1
            for p in active
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions") or []
            )
        )
        status["terminating"] = len(terminating)
        status["uncountedTerminatedPods"] = {}
        for field, value in (("active", len(active)), ("succeeded", succeeded), ("failed", failed)):
            if value:
                status[field] = value
            else:
                status.pop(field, None)
        if not conditions:
            del status["conditions"]
        # Finished pods are released before the status that counts them is written, so a
        # Job that reports Complete or Failed holds no pod back.
        await self._release(newly_counted)
        if status != (job.get("status") or {}):
            # Carrying the resourceVersion makes a stale update fail with 409 Conflict.
            updated = await self.client.json_patch(
                f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}/status",
                [
                    {
                        "op": "replace",
                        "path": "/metadata/resourceVersion",
                        "value": meta["resourceVersion"],
                    },
                    {"op": "replace", "path": "/status", "value": status},
                ],
            )
            self.jobs.cache[key] = updated
            job = updated
        uncounted["succeeded"].clear()
        uncounted["failed"].clear()
        for reason, message, type in events:
            await self._event(job, reason, message, type)
        self._schedule_ttl(key, job)

    def _schedule_ttl(self, key: Key, job: Object) -> None:
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None or not is_finished(job) or job["metadata"].get("deletionTimestamp"):
            return
        finished = (
            _condition(job, "Complete") if _is_true(job, "Complete") else _condition(job, "Failed")
        )
        assert finished is not None
        remaining = ttl - (now() - parse(finished["lastTransitionTime"])).total_seconds()
        if remaining > 0:
            self._enqueue_later(key, remaining)
            return
        self._spawn(self._expire(job))

    async def _expire(self, job: Object) -> None:
        meta = job["metadata"]
        with contextlib.suppress(ClientError):
            await self.client.delete(
                f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}",
                {"propagationPolicy": "Foreground", "preconditions": {"uid": meta["uid"]}},
            )
