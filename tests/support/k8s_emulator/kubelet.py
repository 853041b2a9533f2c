"""The simulated kubelets of all nodes: run bound pods, report their status, finish deletes.

For each pod bound to a node, a PodWorker pulls images (Pulling/Pulled events, or
ErrImagePull and ImagePullBackOff), creates and starts the containers (Created/Started),
reports phase Running with a pod IP and the Ready condition, restarts containers by the
pod's restartPolicy, and when the pod is deleted stops the containers (Killing), reports
the final status and removes the pod with a grace-0 delete. It acts only through the API.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .client import ClientError, KubeClient
from .container_ports import ServedPorts, ServingContainer
from .containers import ContainerScript, ProcessContainer, ProcessRunner, SimulatedContainer
from .events import recorded_event
from .logs import LogBook
from .resources import POD
from .timestamps import rfc3339

log = logging.getLogger(__name__)

Object = dict[str, Any]


@dataclass
class KubeletTimings:
    """Seconds the simulated kubelet spends on each step (all 0 by default: fast tests)."""

    pull: float = 0.0
    start: float = 0.0
    ready: float = 0.0
    crash_backoff: float = 0.05
    image_pull_backoff: float = 0.05


class AddressPool:
    """Pod IPs: 127.0.0.2, 127.0.0.3, ... (all of 127/8 reaches this machine's loopback)."""

    def __init__(self, first: int = 2) -> None:
        self._next = first

    def allocate(self) -> str:
        while self._next % 256 in (0, 255):
            self._next += 1
        n = self._next
        self._next += 1
        return f"127.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"


CONFIG_RETRY_SECONDS = 1.0


class VolumeMountError(RuntimeError):
    """A volume's ConfigMap or Secret does not exist (the pod waits for it)."""

    reason = "FailedMount"
    """The Warning event's reason (a node's other set-up steps before the containers, such
    as preparing DRA claims, wait the same way under their own reason)."""


class ContainerConfigError(RuntimeError):
    """The container's environment names a Secret, ConfigMap or key that does not exist."""


def _container_id() -> str:
    return "containerd://" + secrets.token_hex(32)


def _image_id(image: str) -> str:
    repository = image.split("@")[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return f"{repository}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


KINDS = {"secrets": "Secret", "configmaps": "ConfigMap"}

_VARIABLE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def expand(text: str, variables: dict[str, str]) -> str:
    """Kubernetes $(VAR) expansion: known variables expand, $$ escapes, others stay."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return variables.get(match.group(1), match.group(0))

    return _VARIABLE.sub(replace, text)


class PodWorker:
    """One pod's life on its node."""

    def __init__(self, kubelet: Kubelet, pod: Object) -> None:
        self.kubelet = kubelet
        self.pod = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.node: str = pod["spec"]["nodeName"]
        self.path = POD.path(self.namespace, self.name)
        self.deleting = asyncio.Event()
        self.containers: dict[str, SimulatedContainer | ProcessContainer] = {}
        self.statuses: dict[str, Object] = {}
        self.init_statuses: dict[str, Object] = {}
        self.phase = "Pending"
        self.pod_ip: str | None = None
        self.host_ip = kubelet.host_ip(self.node)
        self.start_time = rfc3339()
        self.conditions: dict[str, Object] = {}
        self._pushed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.volumes: dict[str, dict[str, bytes]] = {}
        """The files of each ConfigMap and Secret volume, by volume name."""
        self._probes: set[asyncio.Future[None]] = set()

    # --- inputs -------------------------------------------------------------------------

    def update(self, pod: Object) -> None:
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.deleting.set()

    async def pushed(self, timeout: float = 5.0) -> None:
        """Wait for the next status report (so a control's effect is visible in the API)."""
        event = self._pushed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    # --- status -------------------------------------------------------------------------

    def _set_condition(
        self, kind: str, ok: bool, reason: str | None = None, message: str | None = None
    ) -> None:
        status = "True" if ok else "False"
        current = self.conditions.get(kind)
        transition = (
            current["lastTransitionTime"] if current and current["status"] == status else rfc3339()
        )
        condition: Object = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": transition,
        }
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        self.conditions[kind] = condition

    def _refresh_conditions(self) -> None:
        terminal = self.phase in ("Succeeded", "Failed")
        self._set_condition("PodReadyToStartContainers", self.pod_ip is not None and not terminal)
        init_done = all(
            "terminated" in s["state"] and s["state"]["terminated"]["exitCode"] == 0
            for s in self.init_statuses.values()
        )
        pending_init = [n for n, s in self.init_statuses.items() if "terminated" not in s["state"]]
        if init_done:
            self._set_condition("Initialized", True)
        else:
            self._set_condition(
                "Initialized",
                False,
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(pending_init)}]",
            )
        unready = [n for n, s in self.statuses.items() if not s["ready"]]
        if terminal:
            self._set_condition("Ready", False, "PodCompleted")
            self._set_condition("ContainersReady", False, "PodCompleted")
        elif unready:
            message = f"containers with unready status: [{' '.join(unready)}]"
            self._set_condition("Ready", False, "ContainersNotReady", message)
            self._set_condition("ContainersReady", False, "ContainersNotReady", message)
        else:
            self._set_condition("Ready", True)
            self._set_condition("ContainersReady", True)
        scheduled = next(
            (c for c in self.pod["status"].get("conditions", []) if c["type"] == "PodScheduled"),
            None,
        )
        self.conditions["PodScheduled"] = scheduled or {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": self.start_time,
        }

    async def push_status(self) -> None:
        self._refresh_conditions()
        order = (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
        # Conditions others own (DisruptionTarget, set by preemption, eviction, the taint
        # manager) stay, as the real kubelet keeps them.
        others = [
            condition
            for condition in (self.pod.get("status") or {}).get("conditions") or []
            if condition.get("type") not in order
        ]
        status: Object = {
            "phase": self.phase,
            "conditions": [self.conditions[k] for k in order] + others,
            "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}],
            "startTime": self.start_time,
            "containerStatuses": list(self.statuses.values()),
        }
        if self.pod_ip:
            status["podIP"] = self.pod_ip
            status["podIPs"] = [{"ip": self.pod_ip}]
        if self.init_statuses:
            status["initContainerStatuses"] = list(self.init_statuses.values())
        try:
            self.pod = await self.kubelet.client_for(self.node).merge_patch(
                self.path + "/status", {"status": status}
            )
        except ClientError as error:
            if error.status != 404:
                raise
        event, self._pushed = self._pushed, asyncio.Event()
        event.set()

    def _waiting(
        self,
        container: Object,
        reason: str,
        message: str | None = None,
        previous: Object | None = None,
    ) -> Object:
        waiting: Object = {"reason": reason}
        if message:
            waiting["message"] = message
        return {
            "name": container["name"],
            "state": {"waiting": waiting},
            "lastState": (previous or {}).get("lastState", {}),
            "ready": False,
            "restartCount": (previous or {}).get("restartCount", 0),
            "image": container["image"],
            "imageID": (previous or {}).get("imageID", ""),
            "started": False,
        }

    async def event(
        self, reason: str, message: str, *, type: str = "Normal", container: str | None = None
    ) -> None:
        field_path = f"spec.containers{{{container}}}" if container else None
        await self.kubelet.record(
            self.pod,
            reason=reason,
            message=message,
            type=type,
            host=self.node,
            field_path=field_path,
        )

    # --- lifecycle ----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            if not self.deleting.is_set():
                started = await self._start()
                if started:
                    await self._supervise()
            await self.deleting.wait()
            await self._terminate()
        except asyncio.CancelledError:
            await self._kill_all()
            raise
        except Exception:
            log.exception("kubelet: pod %s/%s failed", self.namespace, self.name)
            await self._kill_all()

    async def _start(self) -> bool:
        spec = self.pod["spec"]
        self.pod_ip = await self.kubelet.pod_address(self)
        for container in spec.get("initContainers") or []:
            self.init_statuses[container["name"]] = self._waiting(container, "PodInitializing")
        for container in spec.get("containers") or []:
            self.statuses[container["name"]] = self._waiting(
                container, "PodInitializing" if self.init_statuses else "ContainerCreating"
            )
        await self.push_status()
        if not await self._mount_volumes():
            return False
        for container in spec.get("initContainers") or []:
            while True:
                if not await self._launch(container, self.init_statuses):
                    return False
                code, reason = await self.containers[container["name"]].wait()
                self._terminated(container, self.init_statuses, code, reason)
                if code == 0:
                    break
                if spec.get("restartPolicy") == "Never":
                    self.phase = "Failed"
                    await self.push_status()
                    return False
                await self._back_off(container, self.init_statuses)
            await self.push_status()
        for container in spec.get("containers") or []:
            if not await self._launch(container, self.statuses):
                return False
        if self.kubelet.timings.ready:
            await asyncio.sleep(self.kubelet.timings.ready)
        self.phase = "Running"
        by_name = {c["name"]: c for c in spec.get("containers") or []}
        for name, status in self.statuses.items():
            if "running" in status["state"]:
                status["ready"] = not self._probe_readiness(by_name[name])
        await self.push_status()
        return True

    def _probe_readiness(self, container: Object) -> bool:
        """Start probing ``container``'s readiness, if it has a probe and the node probes;
        True when it is to be probed (not ready until the probe says so)."""
        probe = container.get("readinessProbe")
        if not probe or not self.kubelet.probes:
            return False
        task = asyncio.ensure_future(self._probe_loop(container["name"], probe))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)
        return True

    async def _probe_loop(self, name: str, probe: Object) -> None:
        """Readiness as the kubelet probes it; the period is at most a second here (the
        same decisions as the real one, sooner)."""
        await asyncio.sleep(min(float(probe.get("initialDelaySeconds") or 0), 5.0))
        period = min(float(probe.get("periodSeconds") or 10), 1.0)
        successes = failures = 0
        while not self.deleting.is_set():
            status = self.statuses.get(name) or {}
            if "running" not in status.get("state", {}):
                return
            ok = await self.kubelet.probe(self, name, probe)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            ready = status.get("ready", False)
            if not ready and successes >= int(probe.get("successThreshold") or 1):
                status["ready"] = True
                await self.push_status()
            elif ready and failures >= int(probe.get("failureThreshold") or 3):
                status["ready"] = False
                await self.push_status()
            await asyncio.sleep(period)

    async def _mount_volumes(self) -> bool:
        """Fetch the pod's ConfigMap and Secret volumes; until they exist the pod waits in
        ContainerCreating with FailedMount events, as on a real node. False if deleted."""
        while True:
            try:
                self.volumes = await self.kubelet.volume_files(self)
                return True
            except VolumeMountError as error:
                await self.event(error.reason, str(error), type="Warning")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.deleting.wait(), CONFIG_RETRY_SECONDS)
            if self.deleting.is_set():
                return False

    async def _launch(self, container: Object, statuses: dict[str, Object]) -> bool:
        """Pull, create and start one container; False if the image cannot be pulled."""
        name, image = container["name"], container["image"]
        script = self.kubelet.script_for(self.pod, container)
        if script is None and statuses is self.init_statuses:
            script = ContainerScript(exit_code=0)  # simulated init containers just succeed
        present = self.kubelet.images.setdefault(self.node, set())
        pull_error = (
            (script.image_pull_error if script else None)
            or self.kubelet.unpullable_images.get(image)
            or self.kubelet.missing_from_registry(image)
        )
        if container.get("imagePullPolicy") == "Always" or image not in present or pull_error:
            if container.get("imagePullPolicy") == "Never" and image not in present:
                statuses[name] = self._waiting(
                    container,
                    "ErrImageNeverPull",
                    f'Container image "{image}" is not present with pull policy of Never',
                    statuses.get(name),
                )
                await self.event(
                    "ErrImageNeverPull",
                    f'Container image "{image}" is not present with pull policy of Never',
                    type="Warning",
                    container=name,
                )
                await self.push_status()
                return False
            await self.event("Pulling", f'Pulling image "{image}"', container=name)
            if self.kubelet.timings.pull:
                await asyncio.sleep(self.kubelet.timings.pull)
            if pull_error:
                message = f'Failed to pull image "{image}": {pull_error}'
                await self.event("Failed", message, type="Warning", container=name)
                await self.event("Failed", "Error: ErrImagePull", type="Warning", container=name)
                statuses[name] = self._waiting(
                    container, "ErrImagePull", message, statuses.get(name)
                )
                await self.push_status()
                await asyncio.sleep(self.kubelet.timings.image_pull_backoff)
                await self.event("BackOff", f'Back-off pulling image "{image}"', container=name)
                await self.event(
                    "Failed", "Error: ImagePullBackOff", type="Warning", container=name
                )
                statuses[name] = self._waiting(
                    container,
                    "ImagePullBackOff",
                    f'Back-off pulling image "{image}": ErrImagePull: {pull_error}',
                    statuses.get(name),
                )
                await self.push_status()
                return False
            present.add(image)
            seconds = f"{self.kubelet.timings.pull:.3f}s"
            await self.event(
                "Pulled",
                f'Successfully pulled image "{image}" in {seconds} ({seconds} including waiting). Image size: 1048576 bytes.',
                container=name,
            )
        else:
            await self.event(
                "Pulled", f'Container image "{image}" already present on machine', container=name
            )
        while True:
            try:
                instance = await self.kubelet.make_container(self, container, script)
                break
            except ContainerConfigError as error:
                # The real kubelet keeps the container waiting and tries again on each sync.
                statuses[name] = self._waiting(
                    container, "CreateContainerConfigError", str(error), statuses.get(name)
                )
                await self.event("Failed", f"Error: {error}", type="Warning", container=name)
                await self.push_status()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.deleting.wait(), CONFIG_RETRY_SECONDS)
                if self.deleting.is_set():
                    return False
        try:
            await self.event("Created", f"Created container: {name}", container=name)
            if self.kubelet.timings.start:
                await asyncio.sleep(self.kubelet.timings.start)
            await instance.start()
        except (OSError, RuntimeError) as error:
            message = f"failed to create containerd task: failed to start container process: exec: {error}"
            await self.event("Failed", f"Error: {message}", type="Warning", container=name)
            statuses[name] = self._waiting(
                container, "RunContainerError", message, statuses.get(name)
            )
            if self.pod["spec"].get("restartPolicy") == "Never":
                self.phase = "Failed"
            await self.push_status()
            return False
        self.containers[name] = instance
        await self.event("Started", f"Started container {name}", container=name)
        previous = statuses.get(name) or {}
        statuses[name] = {
            "name": name,
            "state": {"running": {"startedAt": rfc3339()}},
            "lastState": previous.get("lastState", {}),
            "ready": self.phase == "Running",
            "restartCount": previous.get("restartCount", 0),
            "image": image,
            "imageID": _image_id(image),
            "containerID": _container_id(),
            "started": True,
        }
        return True

    def _terminated(
        self, container: Object, statuses: dict[str, Object], code: int, reason: str
    ) -> None:
        status = statuses[container["name"]]
        started = status["state"].get("running", {}).get("startedAt", self.start_time)
        status["state"] = {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "startedAt": started,
                "finishedAt": rfc3339(),
                "containerID": status.get("containerID", ""),
            }
        }
        status["ready"] = False
        status["started"] = False

    async def _back_off(self, container: Object, statuses: dict[str, Object]) -> None:
        name = container["name"]
        status = statuses[name]
        status["lastState"] = status["state"]
        status["restartCount"] = status.get("restartCount", 0) + 1
        status["state"] = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off restarting failed container {name} in pod {self.name}_{self.namespace}({self.uid})",
            }
        }
        await self.event(
            "BackOff",
            f"Back-off restarting failed container {name} in pod {self.name}_{self.namespace}({self.uid})",
            type="Warning",
            container=name,
        )
        await self.push_status()
        await asyncio.sleep(self.kubelet.timings.crash_backoff)
        self.kubelet.logs.restart(self.uid, name)

    async def _supervise(self) -> None:
        spec = self.pod["spec"]
        policy = spec.get("restartPolicy", "Always")
        by_name = {c["name"]: c for c in spec.get("containers") or []}
        waits = {
            asyncio.ensure_future(c.wait()): n for n, c in self.containers.items() if n in by_name
        }
        deleting = asyncio.ensure_future(self.deleting.wait())
        try:
            while waits:
                done, _ = await asyncio.wait(
                    [*waits, deleting], return_when=asyncio.FIRST_COMPLETED
                )
                if deleting in done:
                    return
                for future in done:
                    name = waits.pop(future)
                    code, reason = future.result()
                    self._terminated(by_name[name], self.statuses, code, reason)
                    if policy == "Always" or (policy == "OnFailure" and code != 0):
                        await self._back_off(by_name[name], self.statuses)
                        if self.deleting.is_set():
                            return
                        if await self._launch(by_name[name], self.statuses):
                            self.statuses[name]["ready"] = not self._probe_readiness(by_name[name])
                            waits[asyncio.ensure_future(self.containers[name].wait())] = name
                if not waits:
                    codes = [
                        s["state"]["terminated"]["exitCode"]
                        for s in self.statuses.values()
                        if "terminated" in s["state"]
                    ]
                    self.phase = "Succeeded" if all(c == 0 for c in codes) else "Failed"
                await self.push_status()
        finally:
            deleting.cancel()
            for future in waits:
                future.cancel()

    async def _terminate(self) -> None:
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds") or 0
        running = [
            n for n, s in self.statuses.items() if "running" in s["state"] and n in self.containers
        ]
        for name in running:
            await self.event("Killing", f"Stopping container {name}", container=name)
        results = await asyncio.gather(*(self.containers[n].stop(grace) for n in running))
        for name, (code, reason) in zip(running, results, strict=True):
            container = next(c for c in self.pod["spec"]["containers"] if c["name"] == name)
            self._terminated(container, self.statuses, code, reason)
        if self.phase not in ("Succeeded", "Failed"):
            codes = [
                s["state"].get("terminated", {}).get("exitCode", 1) for s in self.statuses.values()
            ]
            self.phase = "Succeeded" if codes and all(c == 0 for c in codes) else "Failed"
        await self.push_status()
        with contextlib.suppress(ClientError):
            await self.kubelet.client_for(self.node).delete(
                self.path, {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
            )

    async def _kill_all(self) -> None:
        for task in list(self._probes):
            task.cancel()
        for instance in self.containers.values():
            with contextlib.suppress(Exception):
                await asyncio.shield(instance.stop(0))

    # --- controls -----------------------------------------------------------------------

    def end_container(self, container: str | None, code: int, reason: str) -> None:
        name = container or next(iter(self.statuses))
        instance = self.containers.get(name)
        if instance is None or "running" not in self.statuses.get(name, {}).get("state", {}):
            raise ValueError(
                f"container {name!r} of pod {self.namespace}/{self.name} is not running"
            )
        instance.end(code, reason)


class Kubelet:
    """The kubelets of every node, fed by the shared pod informer."""

    def __init__(
        self,
        client: KubeClient,
        nodes: Callable[[], dict[tuple[str, str], Object]],
        *,
        timings: KubeletTimings | None = None,
        api_port: int = 0,
    ) -> None:
        self.client = client
        self._nodes = nodes
        self.timings = timings or KubeletTimings()
        self.logs = LogBook()
        self.addresses = AddressPool()
        self.images: dict[str, set[str]] = {}
        self.unpullable_images: dict[str, str] = {}
        self.scripts: list[ContainerScript] = []
        self.process_runner: ProcessRunner | None = None
        # Simulated containers answer on their declared ports at the pod IP (container_ports.py).
        self.serve_ports = False
        self.api_port = api_port
        self.workers: dict[str, PodWorker] = {}
        # A real node's kubelet: a container whose environment names a missing Secret,
        # ConfigMap or key is not created (CreateContainerConfigError).
        self.strict_references = False
        # Which images the registry has (None: every image); others fail to pull.
        self.registry: Callable[[str], bool] | None = None
        # Readiness probes (httpGet, tcpSocket) are run: a real node's kubelet does.
        self.probes = False

    def host_ip(self, node_name: str) -> str:
        node = self._nodes().get(("", node_name)) or {}
        for address in (node.get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return address["address"]
        return "127.0.0.1"

    def script_for(self, pod: Object, container: Object) -> ContainerScript | None:
        return next((s for s in reversed(self.scripts) if s.match.matches(pod, container)), None)

    async def pod_address(self, worker: PodWorker) -> str:
        """The pod's IP: the node's own with hostNetwork, else the next loopback address."""
        if worker.pod["spec"].get("hostNetwork"):
            return worker.host_ip
        return self.addresses.allocate()

    def missing_from_registry(self, image: str) -> str | None:
        """The pull error for an image the registry does not have, else None."""
        if self.registry is None or self.registry(image):
            return None
        return (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
            f'failed to resolve reference "{image}": {image}: not found'
        )

    async def probe(self, worker: PodWorker, container: str, probe: Object) -> bool:
        """One readiness probe of ``container``: an HTTP GET answered 200 to 399, or a TCP
        connection accepted, at the pod's address; an exec probe passes (not run here)."""
        spec = next(
            (c for c in worker.pod["spec"].get("containers") or [] if c["name"] == container), {}
        )
        action = probe.get("httpGet") or probe.get("tcpSocket")
        if action is None:
            return True
        port = action.get("port")
        if isinstance(port, str) and not port.isdigit():
            port = next(
                (p["containerPort"] for p in spec.get("ports") or [] if p.get("name") == port),
                None,
            )
        if port is None or worker.pod_ip is None:
            return False
        host = action.get("host") or worker.pod_ip
        timeout = float(probe.get("timeoutSeconds") or 1)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port)), timeout
            )
        except (OSError, TimeoutError):
            return False
        try:
            if "httpGet" not in probe:
                return True
            path = action.get("path") or "/"
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.34\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout)
            parts = line.decode(errors="replace").split()
            return len(parts) >= 2 and parts[1].isdigit() and 200 <= int(parts[1]) < 400
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()

    def client_for(self, node: str | None) -> KubeClient:
        """The client that acts for ``node`` (a real node agent has one identity per node)."""
        return self.client

    async def record(self, obj: Object, **kwargs: Any) -> None:
        with contextlib.suppress(ClientError):
            await self.client_for(kwargs.get("host")).create(
                f"/api/v1/namespaces/{obj['metadata']['namespace']}/events",
                recorded_event(obj, component="kubelet", **kwargs),
            )

    def on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if kind == "DELETED":
            if worker is not None:
                self.workers.pop(uid)
                if worker.task and not worker.task.done():
                    worker.task.cancel()
            self.logs.forget(uid)
            return
        if worker is not None:
            worker.update(pod)
            return
        if not pod["spec"].get("nodeName") or pod["status"].get("phase") in ("Succeeded", "Failed"):
            return  # unbound, or finished before this kubelet saw it: nothing to run
        worker = PodWorker(self, pod)
        worker.update(pod)
        self.workers[uid] = worker
        worker.task = asyncio.create_task(
            worker.run(), name=f"kubelet-{worker.namespace}/{worker.name}"
        )

    async def make_container(
        self, worker: PodWorker, container: Object, script: ContainerScript | None
    ) -> SimulatedContainer | ProcessContainer:
        log_book = self.logs.current(worker.uid, container["name"])
        if self.process_runner is not None and self.process_runner.matches(worker.pod):
            env = await self.resolve_env(worker, container)
            argv, environment, cwd = self.process_runner.prepare(
                worker.pod, container, env, worker.volumes
            )
            argv = [expand(a, env) for a in argv]
            return ProcessContainer(argv, environment, cwd, log_book)
        if self.serve_ports and container.get("ports") and worker.pod_ip:
            env = await self.resolve_env(worker, container)
            return ServingContainer(script, log_book, ServedPorts(worker.pod_ip, container, env))
        return SimulatedContainer(script, log_book)

    async def _get_data(
        self, kind: str, namespace: str, name: str, node: str | None = None
    ) -> dict[str, str]:
        obj = await self.client_for(node).get(f"/api/v1/namespaces/{namespace}/{kind}/{name}")
        data = obj.get("data") or {}
        if kind == "secrets":
            return {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
        return dict(data)

    async def resolve_env(self, worker: PodWorker, container: Object) -> dict[str, str]:
        """The container environment as the kubelet builds it (envFrom, env, $(VAR))."""
        pod, namespace = worker.pod, worker.namespace
        env: dict[str, str] = {
            "HOSTNAME": worker.name,
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.api_port),
        }
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
                if key in source:
                    data = await self._reference(worker, kind, source[key])
                    for k, v in (data or {}).items():
                        env[prefix + k] = v
        fields = {
            "metadata.name": worker.name,
            "metadata.namespace": namespace,
            "metadata.uid": worker.uid,
            "spec.nodeName": worker.node,
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
            "status.podIP": worker.pod_ip or "",
            "status.hostIP": worker.host_ip,
        }
        for item in container.get("env") or []:
            name, source = item["name"], item.get("valueFrom")
            if source is None:
                env[name] = expand(item.get("value") or "", env)
            elif "fieldRef" in source:
                path = source["fieldRef"]["fieldPath"]
                match = re.match(r"metadata\.(labels|annotations)\['(.+)'\]", path)
                env[name] = (
                    (pod["metadata"].get(match.group(1)) or {}).get(match.group(2), "")
                    if match
                    else fields.get(path, "")
                )
            elif "secretKeyRef" in source or "configMapKeyRef" in source:
                kind, ref = (
                    ("secrets", source["secretKeyRef"])
                    if "secretKeyRef" in source
                    else ("configmaps", source["configMapKeyRef"])
                )
                data = await self._reference(worker, kind, ref)
                if data is not None and ref["key"] in data:
                    env[name] = data[ref["key"]]
                elif data is not None and self.strict_references and not ref.get("optional"):
                    raise ContainerConfigError(
                        f"couldn't find key {ref['key']} in {KINDS[kind]} {namespace}/{ref['name']}"
                    )
            elif "resourceFieldRef" in source:
                resource = source["resourceFieldRef"]["resource"]
                section, _, key = resource.partition(".")
                env[name] = str(
                    ((container.get("resources") or {}).get(section) or {}).get(key, "")
                )
        return env

    async def volume_files(self, worker: PodWorker) -> dict[str, dict[str, bytes]]:
        """The files of the pod's ConfigMap and Secret volumes (missing sources: {} unless
        ``strict_references``, when a non-optional one raises VolumeMountError)."""
        files: dict[str, dict[str, bytes]] = {}
        for volume in worker.pod["spec"].get("volumes") or []:
            if "configMap" in volume:
                kind, source, name = "configmaps", volume["configMap"], volume["configMap"]["name"]
            elif "secret" in volume:
                kind, source = "secrets", volume["secret"]
                name = source.get("secretName", "")
            else:
                continue
            try:
                obj = await self.client_for(worker.node).get(
                    f"/api/v1/namespaces/{worker.namespace}/{kind}/{name}"
                )
            except ClientError as error:
                if error.status == 404 and self.strict_references and not source.get("optional"):
                    raise VolumeMountError(
                        f'MountVolume.SetUp failed for volume "{volume["name"]}" : '
                        f'{KINDS[kind].lower()} "{name}" not found'
                    ) from None
                obj = {}
            data = obj.get("data") or {}
            if kind == "secrets":
                decoded = {k: base64.b64decode(v) for k, v in data.items()}
            else:
                decoded = {k: v.encode() for k, v in data.items()}
                decoded.update(
                    {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
                )
            files[volume["name"]] = decoded
        return files

    async def _reference(self, worker: PodWorker, kind: str, ref: Object) -> dict[str, str] | None:
        """The data of the Secret or ConfigMap ``ref`` names, None when it does not exist.

        With ``strict_references`` a missing one that is not ``optional`` stops the
        container from being created, as the real kubelet does.
        """
        try:
            return await self._get_data(kind, worker.namespace, ref["name"], worker.node)
        except ClientError as error:
            if error.status != 404 or not self.strict_references or ref.get("optional"):
                return None
            raise ContainerConfigError(f'{KINDS[kind].lower()} "{ref["name"]}" not found') from None

    # --- controls -----------------------------------------------------------------------

    def worker(self, namespace: str, name: str) -> PodWorker:
        for worker in self.workers.values():
            if worker.namespace == namespace and worker.name == name:
                return worker
        raise LookupError(f"pod {namespace}/{name} is not running on any node")

    async def end_container(
        self, namespace: str, name: str, container: str | None, code: int, reason: str
    ) -> None:
        worker = self.worker(namespace, name)
        pushed = asyncio.ensure_future(worker.pushed())
        await asyncio.sleep(0)
        worker.end_container(container, code, reason)
        await pushed

    async def stop(self) -> None:
        tasks = [w.task for w in self.workers.values() if w.task]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.workers.clear()
