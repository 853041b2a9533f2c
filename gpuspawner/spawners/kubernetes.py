"""GPUSpawner: course-time profiles and GPU shares on Kubernetes, on top of KubeSpawner.

Thin glue from the policy to a pod spec. Design notes: docs/design/hub.md,
"gpuspawner.spawners.kubernetes"."""

from __future__ import annotations

import asyncio
import json
import re
import time
from types import SimpleNamespace
from typing import Any

from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.rest import ApiException
from kubespawner import KubeSpawner
from traitlets import Bool, Float, default

from ..backends.base import (
    GPU_COUNT_LABEL,
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    PodGPUPlan,
    cpu_only_plan,
)
from ..backends.protect import is_enforcement_variable
from ..core.allocation_record import ALLOCATION_ANNOTATION, devices_from_nodes, encode_allocation
from ..core.grant import Grant
from ..core.pod_plan import apply_pod_plan
from .cluster_inventory import ClusterInventory, ClusterInventoryMixin
from .course_profiles import CourseProfilesMixin, refusal_exception
from .kueue import QUEUED_LABEL, preemption_sentence, queue_timeout_sentence
from .kueue_mode import QUEUE_POLL_SECONDS, KueueMode, unrecorded_slice

__all__ = [
    "ALLOCATION_ANNOTATION",
    "GPU_COUNT_LABEL",
    "GPU_MEMORY_LABEL",
    "GPU_PRODUCT_LABEL",
    "GPUSpawner",
    "devices_from_nodes",
    "scheduling_refusal",
    "unrecorded_slice",
]

PROFILE_LABEL = "gpuspawner.campus-gpu-hub.org/profile"
COURSE_LABEL = "gpuspawner.campus-gpu-hub.org/course"


def scheduling_refusal(message: str) -> str:
    """A student's sentence for a FailedScheduling event message."""
    missing = sorted(set(re.findall(r"Insufficient ([\w./-]*\w)", message)))
    if missing:
        names = ", ".join(missing)
        return (
            f"The cluster has no room for this server right now: no node has enough {names} "
            "free. Try again in a few minutes, or start a profile without a GPU."
        )
    return (
        "The cluster cannot place this server right now "
        f"({message.strip()[:200]}). Try again later, or tell the hub admins."
    )


class GPUSpawner(ClusterInventoryMixin, CourseProfilesMixin, KueueMode, KubeSpawner):
    """KubeSpawner with course-time profiles and GPU shares rendered for the cluster."""

    admission_target = "kubernetes"

    pin_to_node = Bool(
        True,
        config=True,
        help="""
        Pin each GPU server to the node whose GPU the hub's capacity pool chose (a
        ``kubernetes.io/hostname`` node selector), so the hub's view of who holds
        which GPU is the cluster's. Turn off to let the scheduler pick among nodes.

        Example::

            c.GPUSpawner.pin_to_node = False
        """,
    )

    scheduling_failure_grace_seconds = Float(
        3.0,
        config=True,
        help="""
        How long a ``FailedScheduling`` event may stand before the spawn is ended with
        a clear refusal (the scheduler sometimes retries successfully at once).

        Example::

            c.GPUSpawner.scheduling_failure_grace_seconds = 10
        """,
    )

    _plan: PodGPUPlan | None = None

    # Without a course catalog GPUSpawner is KubeSpawner, profile_list and all: it keeps
    # KubeSpawner's contract (its own test suite runs against this class), and a hub can
    # move to course profiles by setting catalog_path alone.

    @property
    def uses_catalog(self) -> bool:
        return bool(self.admission.catalog_path)

    @default("options_form")
    def _default_options_form(self):
        if not self.uses_catalog:
            return KubeSpawner._options_form_default(self)
        return GPUSpawner._render_form_async

    def options_from_form(self, formdata):
        if not self.uses_catalog:
            return KubeSpawner._options_from_form(self, formdata)
        return super().options_from_form(formdata)

    @staticmethod
    async def _render_form_async(spawner):
        spawner.check_one_profile_source()
        await spawner.ensure_inventory()
        return spawner.render_profile_page()

    def check_one_profile_source(self) -> None:
        """With a course catalog, KubeSpawner's ``profile_list`` is not used: refuse to
        start rather than drop the admin's profiles without a word."""
        if not (self.uses_catalog and self.profile_list):
            return
        message = (
            "This hub sets both c.GPUAdmission.catalog_path and c.KubeSpawner.profile_list; "
            "with a course catalog the profile_list is not used, so no server can start until "
            "one of them goes. Hub admins: move those profiles into the catalog's standing: "
            "section (with a gpu: share if they had one), or unset catalog_path."
        )
        self.log.error("%s", message)
        raise refusal_exception("two-profile-sources", message, 503)

    # -- inventory and capacity --------------------------------------------------

    @property
    def grant_object_name(self) -> str:
        return self.pod_name

    def expand_storage(self, text: str) -> str:
        """KubeSpawner's own expansion (escaped ``{username}``, ``{servername}``...), as for
        its ``volumes``, so a catalog's ``pvc:claim-{username}`` is the user's home claim."""
        return self._expand_user_properties(text)

    # -- start ------------------------------------------------------------------

    def start(self):
        if not self.uses_catalog:
            return super().start()
        # KubeSpawner's progress() follows _start_future to its end: a start refused before
        # KubeSpawner's own start() would otherwise leave the progress page waiting forever.
        self._queue_state = "deciding" if self.queueing else "off"
        self._start_future = asyncio.ensure_future(self._start_with_gpu_share())
        return self._start_future

    async def _start_with_gpu_share(self):
        self._progress_messages = ["Checking your profile, its class window and GPU capacity"]
        try:
            self.check_one_profile_source()
            await self.ensure_inventory()
            waiting = await self._others_waiting_in_queue()
            grant = self._decide_or_queue(waiting)
        except BaseException:
            self._queue_state = "off"
            raise
        try:
            self.hold_grant(grant)
            if self._queue_state == "queue":
                self._join_queue()
            if self._queued_allocation is not None:
                self.progress_note(
                    f"{grant.title}: {grant.share_summary}, from the GPU queue "
                    f"{self.gpu_queue_name}"
                )
            else:
                self.progress_note(grant.describe)
            await self._create_claim_templates()
            start_future = super().start()
            url = await self._until_scheduled_or_refused(start_future)
            self.record_started()
            return url
        except BaseException as error:
            self.release_allocation()
            self._queued_allocation = None
            self._queue_state = "off"
            self._pod_grant = self._queue_marks = None
            if isinstance(error, Exception):
                await self._delete_claim_templates()
            raise

    # -- the Kueue queue ---------------------------------------------------------

    async def _others_waiting_in_queue(self) -> bool:
        """True when other servers joined the queue without a slice and have not had one
        booked yet (waiting, or just landed): a new start then queues behind them even if
        the pool shows a free slice, so the queue stays first come, first served and no
        start is pinned to a slice an admitted server is about to take."""
        if not self.queueing:
            return False
        pods = await ClusterInventory.items(
            await self.api.list_namespaced_pod(
                self.namespace,
                label_selector=f"{QUEUED_LABEL}=true,component={self.component_label}",
                _request_timeout=self.k8s_api_request_timeout,
                _preload_content=False,
            )
        )
        return any(
            pod["metadata"]["name"] != self.pod_name
            and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            for pod in pods
        )

    def _current_pod(self) -> dict | None:
        reflector = getattr(self, "pod_reflector", None)
        return reflector.pods.get(f"{self.namespace}/{self.pod_name}") if reflector else None

    async def load_user_options(self):
        """The course catalog, not KubeSpawner's profile_list, turns options into a pod.

        ``decide_start`` has already validated ``user_options`` (a profile id, and a
        pre-warm token from the sessions service) and ``get_pod_manifest`` applies the grant.
        Without a catalog, KubeSpawner's profile_list does it.
        """
        if not self.uses_catalog:
            await super().load_user_options()

    _pod_grant: Grant | None = None

    def hold_grant(self, grant: Grant) -> None:
        """The grant this start's pod gets: ``get_pod_manifest`` applies it, nothing else
        changes on the spawner, so a failed or stopped start leaves nothing for the next."""
        self._pod_grant = grant
        self._plan = grant.plan or cpu_only_plan()

    async def get_pod_manifest(self):
        """KubeSpawner's pod as configured, with the held grant applied (:func:`apply_pod_plan`)."""
        pod = await super().get_pod_manifest()
        grant, plan = self._pod_grant, self._plan
        if grant is None or plan is None:
            return pod
        client = self.api.api_client
        manifest = apply_pod_plan(
            client.sanitize_for_serialization(pod), plan, **self._pod_parts(grant)
        )
        return client.deserialize(SimpleNamespace(data=json.dumps(manifest)), "V1Pod")

    def _pod_parts(self, grant: Grant) -> dict[str, Any]:
        """What of ``grant`` goes on the pod beside its GPU plan, expanded as KubeSpawner
        expands the traits it stands for ({username} and the like)."""
        expand = self._expand_all
        environment: dict[str, Any] = {}
        if grant.image:
            environment["JUPYTER_IMAGE_SPEC"] = environment["JUPYTER_IMAGE"] = grant.image
        if grant.default_url:
            environment["JUPYTERHUB_DEFAULT_URL"] = self.format_string(grant.default_url)
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        cpu, memory = grant.limits.cpu, grant.limits.memory_bytes
        if cpu:
            # JupyterHub tells a server its limits (CPU_LIMIT...) beside the pod's own.
            limits["cpu"] = float(cpu)
            requests["cpu"] = min(float(cpu), self.cpu_guarantee or float(cpu))
            environment["CPU_LIMIT"] = str(limits["cpu"])
            environment["CPU_GUARANTEE"] = str(requests["cpu"])
        if memory:
            limits["memory"] = int(memory)
            environment["MEM_LIMIT"] = str(limits["memory"])
        environment.update(expand(grant.environment_over({})))
        configured = set(self.environment)
        labels = {PROFILE_LABEL: grant.subject}
        if grant.course_id:
            labels[COURSE_LABEL] = grant.course_id
        annotations = {}
        if grant.allocation is not None:
            annotations[ALLOCATION_ANNOTATION] = encode_allocation(grant.allocation)
        queue_labels, queue_annotations = self._queue_marks or ({}, {})
        return {
            "node_name": grant.node if self.pin_to_node else None,
            "limits": limits,
            "requests": requests,
            "environment": environment,
            # The admin's variables that enforce a share go (the hub's own stay).
            "keep_variable": lambda name: (
                not (name in configured and is_enforcement_variable(name))
            ),
            "labels": {**labels, **queue_labels},
            "annotations": {**annotations, **queue_annotations},
            "volumes": expand(list(grant.volumes)),
            "volume_mounts": expand(list(grant.volume_mounts)),
            "image": grant.image,
        }

    async def _create_claim_templates(self) -> None:
        plan = self._plan
        if plan is None or not plan.resource_claim_templates:
            return
        custom = CustomObjectsApi(self.api.api_client)
        for manifest in plan.resource_claim_templates:
            group, version = manifest["apiVersion"].split("/")
            create = custom.create_namespaced_custom_object
            try:
                await create(group, version, self.namespace, "resourceclaimtemplates", manifest)
            except ApiException as error:
                if error.status != 409:
                    raise
                # A template left by an earlier start of this server describes its old share
                # (an MPS config of 1/4 where the grant is now a whole GPU): replace it.
                await self._delete_claim_template(manifest["metadata"]["name"], group, version)
                await create(group, version, self.namespace, "resourceclaimtemplates", manifest)

    async def _delete_claim_template(self, name: str, group: str, version: str) -> None:
        custom = CustomObjectsApi(self.api.api_client)
        try:
            await custom.delete_namespaced_custom_object(
                group, version, self.namespace, "resourceclaimtemplates", name
            )
        except ApiException as error:
            if error.status != 404:
                raise

    async def _delete_claim_templates(self) -> None:
        """The DRA claim templates of this server's grant go with its pod."""
        plan = self._plan
        for manifest in plan.resource_claim_templates if plan else []:
            group, version = manifest["apiVersion"].split("/")
            try:
                await self._delete_claim_template(manifest["metadata"]["name"], group, version)
            except Exception as error:  # the pod is gone; a stale template is replaced later
                self.log.warning("Could not delete %s: %s", manifest["metadata"]["name"], error)
        self._plan = None

    async def _end_start(self, start_future, code: str, message: str):
        """End this start with a refusal: its pod deleted, its slice released."""
        start_future.cancel()
        self.log.info("Ending spawn of %s: %s", self.pod_name, message)
        try:
            await super().stop(now=True)
        finally:
            self.release_allocation()
        raise refusal_exception(code, message, 409)

    async def _until_scheduled_or_refused(self, start_future):
        """Wait for KubeSpawner's start, ending it early on a standing FailedScheduling.

        In Kueue mode, a pod waiting in the queue is left to wait (up to ``start_timeout``),
        its slice is booked once it lands on a node, and a preemption ends the start with
        a sentence that says so.
        """
        try:
            return await self._watch_start(start_future)
        except asyncio.CancelledError:
            start_future.cancel()  # the student left the queue (or the hub gave up)
            raise

    async def _watch_start(self, start_future):
        first_seen: float | None = None
        queued = self._queue_state == "queue"
        seen = False
        while not start_future.done():
            if queued:
                pod = self._current_pod()
                seen = seen or pod is not None
                if pod is None and seen:
                    await self._end_start(
                        start_future,
                        "preempted",
                        "Your server was removed by the cluster before it started (preempted "
                        "or deleted). Start it again to rejoin the GPU queue.",
                    )
                if pod is not None:
                    sentence = preemption_sentence(pod)
                    if sentence:
                        await self._end_start(start_future, "preempted", sentence)
                    if (pod.get("spec") or {}).get("nodeName") and self._queued_allocation:
                        await self._record_landing(pod)
                    if self.waiting_in_queue(pod):
                        await self.read_queue()  # the places, for the page and the metrics
                        await asyncio.wait([start_future], timeout=QUEUE_POLL_SECONDS)
                        continue
            events = self._events_of_current_pod()
            failed = sorted(
                (e for e in events if e.get("reason") == "FailedScheduling"),
                key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
            )
            scheduled = any(e.get("reason") in ("Scheduled", "Started") for e in events)
            if failed and not scheduled:
                first_seen = first_seen or time.monotonic()
                if time.monotonic() - first_seen >= self.scheduling_failure_grace_seconds:
                    start_future.cancel()
                    message = scheduling_refusal(failed[-1].get("message") or "")
                    self.log.info(
                        "Ending spawn of %s: %s", self.pod_name, failed[-1].get("message")
                    )
                    try:
                        await super().stop(now=True)
                    finally:
                        self.release_allocation()
                    raise refusal_exception("unschedulable", message, 409)
            await asyncio.wait([start_future], timeout=0.5)
        pod = self._current_pod() if queued else None
        try:
            url = start_future.result()
        except TimeoutError:
            if pod is not None and self.waiting_in_queue(pod):
                await self._end_start(
                    start_future, "queue-timeout", queue_timeout_sentence(self.start_timeout)
                )
            raise
        if pod is not None and self._queued_allocation is not None:
            await self._record_landing(pod)
        return url

    @property
    def events(self) -> list[dict]:
        """This pod's events since the current start began, as KubeSpawner's ``events`` gives them.

        KubeSpawner sorts every event of the namespace and then keeps this pod's; each start
        reads ``events`` at least twice and its progress stream once a second, so a class of
        200 starting at once sorts thousands of events per student. Picking this pod's events
        first and sorting only those returns the same list (the sort is stable, and filtering
        keeps the order of what it keeps) at a fraction of the cost. The marker of the last
        event seen before this start is KubeSpawner's ``_last_event``, which it sets at the
        start of ``start()`` (KubeSpawner is pinned to one major version for this).
        """
        reflector = self.event_reflector
        if not reflector:
            return []
        pod_name = self.pod_name
        mine = [
            event
            for event in list(reflector.resources.values())
            if event["involvedObject"]["name"] == pod_name
        ]
        mine.sort(key=lambda event: event["lastTimestamp"] or event["eventTime"])
        marker = self._last_event
        if marker:
            for index in range(len(mine) - 1, -1, -1):
                if mine[index]["metadata"]["uid"] == marker:
                    return mine[index + 1 :]
        return mine

    def _events_of_current_pod(self) -> list[dict]:
        """Events of the pod this start created, once the scheduler has said it cannot place it.

        The scheduler marks such a pod ``PodScheduled=False`` as it records the
        ``FailedScheduling`` event, so each poll first reads the pod alone: a pod that is
        bound, or not (yet) refused, has nothing to report. Only a refused pod's events
        are looked up, by its uid and unsorted (KubeSpawner's ``events`` sorts every event
        of the namespace), so a class starting at once costs no scan of all events per
        student and poll.
        """
        reflector = getattr(self, "pod_reflector", None)
        pod = reflector.pods.get(f"{self.namespace}/{self.pod_name}") if reflector else None
        uid = (pod or {}).get("metadata", {}).get("uid")
        if not uid or (pod.get("spec") or {}).get("nodeName"):
            return []
        conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(
            c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions
        ):
            return []
        events = getattr(self, "event_reflector", None)
        if not events:
            return []
        return [
            e
            for e in list(events.resources.values())
            if (e.get("involvedObject") or {}).get("uid") == uid
        ]

    async def progress(self):
        """The hub's messages, the place in the GPU queue while waiting, then the pod's events."""
        sent = 0
        last_line = None
        while True:
            messages = getattr(self, "_progress_messages", None) or []
            for message in messages[sent:]:
                yield {"progress": 5 + sent * 5, "message": message}
                sent += 1
            start = getattr(self, "_start_future", None)
            pod = self._current_pod() if self._queue_state == "queue" else None
            if last_line is not None and pod is not None and not self.waiting_in_queue(pod):
                yield {"progress": 40, "message": "Admitted from the GPU queue"}
                break
            if self._queue_state == "off" or start is None or start.done():
                break
            if self._queue_state == "queue":
                await self.read_queue()
                line = self.queue_message()
                if line and line != last_line:
                    yield {"progress": 10, "message": line}
                    last_line = line
            await asyncio.sleep(QUEUE_POLL_SECONDS)
        async for event in KubeSpawner.progress(self):
            yield event

    # -- stop and state ----------------------------------------------------------

    async def stop(self, now=False):
        # A server still waiting in the queue has only its gated pod to delete: leaving the
        # queue frees its place, and the next in line moves up.
        try:
            await super().stop(now=now)
        finally:
            self._queued_allocation = None
            self._queue_state = "off"
            self.release_allocation()
            await self._delete_claim_templates()
            self._pod_grant = None
            self._queue_marks = None

    def get_state(self):
        state = super().get_state()
        course = self.course_state()
        if course:
            state["gpuspawner"] = course
        return state

    def load_state(self, state):
        super().load_state(state)
        self.restore_course_state(state)

    def clear_state(self):
        super().clear_state()
        self.release_allocation()
        self._profile_id = None
