"""KAI-scheduler for real in the test cluster: its CRDs and RBAC, its components, its GPU sharing.

What a ``helm install`` of KAI-scheduler v0.12.0 makes, from the chart of the pinned module
(rendered by ``make k8s-tools`` with ``global.gpuSharing=true``): its CRDs, PriorityClasses
(``build``, ``train``...), the default queues, ClusterRoles and bindings, and the
resource-reservation namespace and account. The chart's Deployment is KAI's operator, which
then makes each component's ServiceAccount, Deployment and webhook configuration from the
``Config``; here this module plays the operator, with the arguments its operands give
(``pkg/operator/operands/*/resources.go``), and runs each component as a local process with
its own service account's token:

- ``podgrouper`` (a PodGroup for each pod of ``schedulerName: kai-scheduler``),
  ``podgroupcontroller`` (their status, and the PodGroup validation webhook),
  ``queuecontroller`` (Queue status, and the Queue validation webhook), ``admission`` (the
  pod webhooks: GPU-sharing fields, the ``nvidia`` runtime class), ``binder`` (binds pods
  through BindRequests, reserving a GPU for fractions) and ``scheduler`` (the shard
  ``default`` with its configuration for the binpack placement strategy);
- each in a network namespace of its own on the session's pod network (pod_network.py), as
  its pod would be: several of them serve fixed ports (webhooks on 9443, metrics on 8080)
  and reach the API server through the ``kubernetes`` Service; their webhook certificates
  (from the test CA) are mounted where controller-runtime reads them
  (``/tmp/k8s-webhook-server/serving-certs``), and the webhook configurations call them at
  their addresses, by URL, instead of through a Service.

GPU sharing needs a *reservation pod* per shared GPU: the binder makes it (namespace
``kai-resource-reservation``, one ``nvidia.com/gpu``, bound to the node it chose), and the
program in its image (``cmd/resourcereservation``) asks NVML for the one GPU the device
plugin gave the container and writes its UUID on the pod, where the binder reads it for the
fractions sharing that GPU. Here the node runs that image (:func:`reservation_images`): the
node gives the container a GPU of its own as NVIDIA's device plugin would (the lowest index
no live reservation pod of the node holds, named ``NVIDIA_VISIBLE_DEVICES``), and
``image_files/kai-resource-reservation.py`` does what the program does with its pod's token,
reading the GPU from that variable instead of from NVML.

Root only (network namespaces and mounts), as Kueue is.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .control_plane import REPO, Component, ControlPlane, ControlPlaneUnavailable
from .dra import PublishedGPU
from .identities import SESSION_LABEL, token_for
from .images import IMAGE_FILES, Image, ImageRunner, default_images

NAMESPACE = "kai-scheduler"
RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_ACCOUNT = "kai-resource-reservation"
RESERVATION_IMAGE = "ghcr.io/nvidia/kai-scheduler/resourcereservation:v0.12.0"
"""The reservation pods' image as a released install names it (registry, name, version)."""
SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"
RUNTIME_CLASS = "nvidia"
WEBHOOK_PORT = 9443
PROBE_PORT = 8081
READY_GUARD = 120.0
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"

Object = dict[str, Any]

# The scheduler's configuration for the shard ``default`` with placement ``binpack`` (the
# chart's default), as the operator renders it (resources_for_shard.go, configMapForShard).
SCHEDULER_CONFIG = {
    "actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
    "tiers": [
        {
            "plugins": [
                {"name": name}
                for name in (
                    "predicates",
                    "proportion",
                    "priority",
                    "nodeavailability",
                    "resourcetype",
                    "podaffinity",
                    "elastic",
                    "kubeflow",
                    "ray",
                    "subgrouporder",
                    "taskorder",
                    "nominatednode",
                    "dynamicresources",
                    "minruntime",
                    "topology",
                    "snapshot",
                    "gpupack",
                )
            ]
            + [
                {"name": "nodeplacement", "arguments": {"gpu": "binpack", "cpu": "binpack"}},
                {"name": "gpusharingorder"},
            ]
        }
    ],
}


def manifests_path(plane: ControlPlane) -> Path:
    return plane.bin.parent / "kai-manifests.yaml"


def installable(documents: list[Object]) -> list[Object]:
    """The chart's objects this cluster installs: not the operator (its Deployment, the
    ``Config`` and ``SchedulingShard`` it reads), nor the chart's hook Jobs (the CRD
    upgrader applies the CRDs, which are applied here; the topology migration copies
    Kueue Topologies; the clean-up runs on uninstall) and their accounts and roles."""
    kept = []
    for doc in documents:
        annotations = doc["metadata"].get("annotations") or {}
        if "helm.sh/hook" in annotations:
            continue
        if doc["kind"] in ("Deployment", "Config", "SchedulingShard"):
            continue
        kept.append(doc)
    return kept


@dataclass
class KAIComponent:
    """One of KAI's components as its operator deploys it: binary, account, arguments."""

    name: str
    account: str
    args: list[str]
    webhook: bool = False
    probe: bool = True
    env: dict[str, str] = field(default_factory=dict)


def components(config_path: str) -> list[KAIComponent]:
    """KAI's components with the arguments its operator gives them (v0.12.0's operands)."""
    return [
        KAIComponent(
            "podgrouper",
            "pod-grouper",
            [
                f"--scheduler-name={SCHEDULER_NAME}",
                f"--queue-label-key={QUEUE_LABEL}",
                f"--nodepool-label-key={NODE_POOL_LABEL}",
            ],
        ),
        KAIComponent(
            "podgroupcontroller",
            "podgroup-controller",
            [f"--scheduler-name={SCHEDULER_NAME}"],
            webhook=True,
        ),
        KAIComponent(
            "queuecontroller",
            "queue-controller",
            [f"--queue-label-key={QUEUE_LABEL}", "--metrics-listen-address=:8080"],
            webhook=True,
            probe=False,  # it serves no probe; ready once its webhook answers
        ),
        KAIComponent(
            "admission",
            "admission",
            [
                f"--scheduler-name={SCHEDULER_NAME}",
                f"--webhook-addr={WEBHOOK_PORT}",
                f"--health-probe-bind-address=:{PROBE_PORT}",
                "--metrics-bind-address=:8080",
                "--gpu-sharing-enabled=true",
                f"--gpu-pod-runtime-class-name={RUNTIME_CLASS}",
            ],
            webhook=True,
        ),
        KAIComponent(
            "binder",
            "binder",
            [
                f"--scheduler-name={SCHEDULER_NAME}",
                f"--resource-reservation-namespace={RESERVATION_NAMESPACE}",
                f"--resource-reservation-service-account={RESERVATION_ACCOUNT}",
                f"--resource-reservation-app-label={RESERVATION_ACCOUNT}",
                f"--resource-reservation-pod-image={RESERVATION_IMAGE}",
                "--scale-adjust-namespace=kai-scale-adjust",
                f"--health-probe-bind-address=:{PROBE_PORT}",
                "--metrics-bind-address=:8080",
                "--cdi-enabled=false",
                # No RuntimeClass on the reservation pods: the node has no runtimes to pick.
                "--runtime-class-name=",
            ],
        ),
        KAIComponent(
            "scheduler",
            "scheduler",
            [
                f"--scheduler-conf={config_path}",
                f"--scheduler-name={SCHEDULER_NAME}",
                f"--namespace={NAMESPACE}",
                f"--nodepool-label-key={NODE_POOL_LABEL}",
                "--partition-label-value=",
                f"--resource-reservation-app-label={RESERVATION_ACCOUNT}",
                "--listen-address=:8080",
            ],
            probe=False,  # it serves metrics only
            env={"GOGC": "400", "NAMESPACE": NAMESPACE},  # the operator's, for the scheduler
        ),
    ]


def webhook_configurations(addresses: dict[str, str], ca_bundle: str) -> list[Object]:
    """The webhook configurations KAI's operator makes (its admission, pod group controller
    and queue controller operands), calling each component at its address by URL."""

    def hook(component: str, name: str, path: str, rules: list[Object], **extra: Any) -> Object:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {
                "url": f"https://{addresses[component]}:{WEBHOOK_PORT}{path}",
                "caBundle": ca_bundle,
            },
            "rules": rules,
            **extra,
        }

    pods = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}
    not_system = {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", NAMESPACE],
            }
        ]
    }
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "kai-admission", "labels": {"app": "admission"}},
            "webhooks": [
                hook(
                    "admission",
                    "admission.kai-scheduler.svc",
                    "/mutate--v1-pod",
                    [{"operations": ["CREATE"], **pods}],
                    namespaceSelector=not_system,
                    reinvocationPolicy="IfNeeded",
                )
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "kai-admission", "labels": {"app": "admission"}},
            "webhooks": [
                hook(
                    "admission",
                    "admission.kai-scheduler.svc",
                    "/validate--v1-pod",
                    [{"operations": ["CREATE", "UPDATE"], **pods}],
                    namespaceSelector=not_system,
                )
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {
                "name": "kai-podgroup-validation-v2alpha2",
                "labels": {"app": "podgroup-controller"},
            },
            "webhooks": [
                hook(
                    "podgroupcontroller",
                    "podgroup-validation.kai.scheduler",
                    "/validate-scheduling-run-ai-v2alpha2-podgroup",
                    [
                        {
                            "operations": ["CREATE", "UPDATE"],
                            "apiGroups": ["scheduling.run.ai"],
                            "apiVersions": ["v2alpha2"],
                            "resources": ["podgroups"],
                        }
                    ],
                )
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "kai-queue-validation-v2", "labels": {"app": "queue-controller"}},
            "webhooks": [
                hook(
                    "queuecontroller",
                    "queue-validation.kai.scheduler",
                    "/validate-scheduling-run-ai-v2-queue",
                    [
                        {
                            "operations": ["CREATE", "UPDATE"],
                            "apiGroups": ["scheduling.run.ai"],
                            "apiVersions": ["v2"],
                            "resources": ["queues"],
                        }
                    ],
                )
            ],
        },
    ]


class KAI:
    """KAI-scheduler for the test cluster; ``start()`` once per session."""

    def __init__(self, plane: ControlPlane, agent: Any) -> None:
        self.plane = plane
        self.agent = agent
        self.folder = plane.folder / "kai"
        self.components: dict[str, Component] = {}
        self.addresses: dict[str, str] = {}
        self.uids: dict[str, str] = {}
        self.served: list[str] = []

    def start(self) -> None:
        source = manifests_path(self.plane)
        if not source.is_file():
            raise ControlPlaneUnavailable(
                f"KAI-scheduler's manifests are not rendered ({source}): run `make k8s-tools`."
            )
        missing = [
            c.name for c in components("") if not (self.plane.bin / f"kai-{c.name}").is_file()
        ]
        if missing:
            raise ControlPlaneUnavailable(
                f"KAI-scheduler is not built (kai-{', kai-'.join(missing)} missing in "
                f"{self.plane.bin}): run `make k8s-tools`."
            )
        network = self.agent.network
        kubernetes = self.agent.services.kubernetes()
        if os.geteuid() != 0 or network is None or kubernetes is None:
            raise ControlPlaneUnavailable(
                "KAI-scheduler's components serve fixed ports and read certificates at fixed "
                "paths, so the test cluster runs each in a network and mount namespace of its "
                "own: that needs root and iproute2 (CI runs as root)."
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        documents = [doc for doc in yaml.safe_load_all(source.read_text()) if doc]
        installed = installable(documents)
        installed.insert(
            0, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        plan = components(str(self.folder / "scheduler-config.yaml"))
        installed += [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": c.account, "namespace": NAMESPACE},
            }
            for c in plan
        ]
        # What NVIDIA's GPU operator makes on a real cluster, and KAI's admission names on
        # every GPU pod (the RuntimeClass admission refuses a pod naming a missing one).
        installed.append(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": RUNTIME_CLASS,
            }
        )
        for component in plan:
            # A network namespace as for a pod (named after a uid of its own: the kernel
            # frees a namespace's links some time after it is deleted, so names are not
            # reused from one session to the next).
            self.uids[component.name] = str(uuid.uuid4())
            _, address = network.add_pod(self.uids[component.name])
            self.addresses[component.name] = address
        ca_bundle = base64.b64encode(self.plane.pki.pem).decode()
        webhooks = webhook_configurations(self.addresses, ca_bundle)
        self._apply(installed)
        self.served = [
            f"/apis/{doc['spec']['group']}/{version['name']}/{doc['spec']['names']['plural']}"
            for doc in installed
            if doc["kind"] == "CustomResourceDefinition"
            for version in doc["spec"]["versions"]
            if version.get("storage")
        ]
        (self.folder / "scheduler-config.yaml").write_text(json.dumps(SCHEDULER_CONFIG))
        for component in plan:
            netns = network.namespace(self.uids[component.name])
            self._start_component(component, netns, kubernetes)
        self._wait_ready(plan)
        # The webhooks go in once their servers answer (failurePolicy Fail: a pod created
        # before would be refused).
        self._apply(webhooks)

    def _start_component(
        self, component: KAIComponent, netns: str, kubernetes: tuple[str, int]
    ) -> None:
        folder = self.folder / component.name
        folder.mkdir(exist_ok=True)
        host, port = kubernetes
        kubeconfig = self.plane.write_kubeconfig(
            folder / "kubeconfig",
            user=f"system:serviceaccount:{NAMESPACE}:{component.account}",
            token=token_for(self.plane, NAMESPACE, component.account),
            namespace=NAMESPACE,
        )
        # Through the kubernetes Service, as its pod reaches the API server.
        document = json.loads(kubeconfig.read_text())
        document["clusters"][0]["cluster"]["server"] = f"https://{host}:{port}"
        kubeconfig.write_text(json.dumps(document))
        binds = []
        if component.webhook:
            certs = folder / "certs"
            certs.mkdir(exist_ok=True)
            serving = self.plane.pki.issue(
                f"kai-{component.name}",
                common_name=f"{component.account}.{NAMESPACE}.svc",
                hosts=(self.addresses[component.name],),
                server=True,
            )
            (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
            (certs / "tls.key").write_bytes(serving.key.read_bytes())
            binds.append({"source": str(certs), "target": CERT_DIR, "read_only": True})
        spec = folder / "mounts.json"
        spec.write_text(
            json.dumps(
                {
                    "scratch": str(folder / "mounts"),
                    "binds": binds,
                    "netns": netns,
                    "cwd": str(folder),
                }
            )
        )
        process = Component(
            f"kai-{component.name}",
            [
                sys.executable,
                "-m",
                "tests.support.cluster.mounts",
                str(spec),
                "--",
                str(self.plane.bin / f"kai-{component.name}"),
                *component.args,
            ],
            self.plane.folder / "logs" / f"kai-{component.name}.log",
        )
        process.start(
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "PYTHONPATH": str(REPO),
                "KUBECONFIG": str(kubeconfig),
                **component.env,
            },
            cwd=REPO,
        )
        self.components[component.name] = process
        self.plane.components.append(process)

    def _wait_ready(self, plan: list[KAIComponent]) -> None:
        deadline = time.monotonic() + READY_GUARD
        verified = ssl.create_default_context(cafile=str(self.plane.pki.cert_path))
        for component in plan:
            process = self.components[component.name]
            address = self.addresses[component.name]
            # Its readiness probe, and its webhook server: controller-runtime's probe says
            # ready before the webhook server listens, and a webhook configuration applied
            # then would refuse the objects it guards.
            checks: list[tuple[str, ssl.SSLContext | None]] = []
            if component.probe:
                checks.append((f"http://{address}:{PROBE_PORT}/readyz", None))
            if component.webhook:
                checks.append((f"https://{address}:{WEBHOOK_PORT}/", verified))
            if not checks:
                checks.append((f"http://{address}:8080/metrics", None))
            for url, context in checks:
                while not _answers(url, context):
                    if not process.running():
                        raise ControlPlaneUnavailable(
                            f"KAI's {component.name} exited:\n{process.tail()}"
                        )
                    if time.monotonic() > deadline:
                        raise ControlPlaneUnavailable(
                            f"KAI's {component.name} was not ready in {READY_GUARD:.0f} s:\n"
                            f"{process.tail()}"
                        )
                    time.sleep(0.2)
        # Each of KAI's kinds is listed before the session goes on: for a few seconds after
        # a CRD is made its storage answers 429 ("storage is (re)initializing").
        context = self.plane.ssl_context()
        for path in self.served:
            while not _lists(f"{self.plane.url}{path}?limit=1", context):
                if time.monotonic() > deadline:
                    raise ControlPlaneUnavailable(
                        f"The API server did not serve {path} in {READY_GUARD:.0f} s."
                    )
                time.sleep(0.2)

    def _apply(self, documents: list[Object]) -> None:
        for doc in documents:
            doc["metadata"].setdefault("labels", {})[SESSION_LABEL] = "true"
        first = ("Namespace", "CustomResourceDefinition")
        for batch in (
            [d for d in documents if d["kind"] in first],
            [d for d in documents if d["kind"] not in first],
        ):
            if not batch:
                continue
            self._kubectl(
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=campus-test",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": batch}),
            )
            crds = [d["metadata"]["name"] for d in batch if d["kind"] == "CustomResourceDefinition"]
            self.plane.wait_established(crds, READY_GUARD, "KAI-scheduler")

    def _kubectl(self, *args: str, input: str | None = None) -> None:
        result = subprocess.run(
            [str(self.plane.bin / "kubectl"), f"--kubeconfig={self.plane.admin_kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ControlPlaneUnavailable(
                f"Installing KAI-scheduler: kubectl {args[0]} failed: {result.stderr.strip()}"
            )

    def reservation_runner(self) -> ReservationRunner:
        """What the node runs for a test with KAI: its known images, and KAI's reservation
        pods with a GPU each (set with ``run_processes``; root only, like ``run_images``)."""
        agent = self.agent
        return ReservationRunner(
            workdir=agent.node_root,
            images=reservation_images(self.plane),
            hosts=agent.services.hosts_file,
            network=agent.network,
            inherit_environment=False,
            alive=lambda uid: uid in agent.kubelet.workers,
        )

    async def clear_reservations(self) -> None:
        """Delete the reservation pods a test left (they live outside the namespaces the
        cluster's clean-up empties, and hold GPUs of nodes a later test may name alike)."""
        await self.agent.admin.request(
            "DELETE",
            f"/api/v1/namespaces/{RESERVATION_NAMESPACE}/pods",
            body={"gracePeriodSeconds": 0, "propagationPolicy": "Background"},
        )

    def stop(self) -> None:
        """Stop KAI's components (the control plane would stop them with itself)."""
        for component in reversed(list(self.components.values())):
            component.stop()

    def logs(self, component: str) -> str:
        """The component's log (for a failing test's message)."""
        return self.components[component].tail(200)


def _lists(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _answers(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as answer:
            return bool(answer.status < 500)
    except urllib.error.HTTPError as error:
        return error.code < 500
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class ReservationRunner(ImageRunner):
    """The node's images, and KAI's reservation image with a GPU of the node for each
    reservation pod, as NVIDIA's device plugin allocates one (``NVIDIA_VISIBLE_DEVICES``)."""

    alive: Any = None
    """A callable: whether the node still runs the pod of this uid."""
    held: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Reservation pod uid -> (node, GPU index) it was given."""

    def prepare(
        self,
        pod: Object,
        container: Object,
        env: dict[str, str],
        volumes: dict[str, dict[str, bytes]] | None = None,
    ) -> tuple[list[str], dict[str, str], Path]:
        argv, environment, cwd = super().prepare(pod, container, env, volumes)
        if repository_of(container["image"]) == repository_of(RESERVATION_IMAGE):
            node = pod["spec"]["nodeName"]
            uid = pod["metadata"]["uid"]
            if uid not in self.held:
                taken = {
                    index
                    for other, (where, index) in self.held.items()
                    if where == node and (self.alive is None or self.alive(other))
                }
                self.held = {
                    other: place
                    for other, place in self.held.items()
                    if self.alive is None or self.alive(other)
                }
                self.held[uid] = (node, next(i for i in range(len(taken) + 1) if i not in taken))
            environment["NVIDIA_VISIBLE_DEVICES"] = gpu_uuid(*self.held[uid])
        return argv, environment, cwd


def repository_of(image: str) -> str:
    return image.rsplit(":", 1)[0]


def gpu_uuid(node: str, index: int) -> str:
    """The UUID of GPU ``index`` of ``node``, as the node names its GPUs (dra.py's scheme)."""
    return PublishedGPU(node, index, "", 0).uuid


def reservation_images(plane: ControlPlane) -> dict[str, Image]:
    """The node's known images plus KAI's reservation image: the stand-in for its program."""
    return {
        **default_images(plane.bin / "kube-scheduler"),
        repository_of(RESERVATION_IMAGE): Image(
            entrypoint=(sys.executable, str(IMAGE_FILES / "kai-resource-reservation.py")),
            env={"PYTHONUNBUFFERED": "1"},
            working_dir="/workspace",
        ),
    }


def reservation_gpus(pods: list[Object]) -> dict[str, str]:
    """GPU group -> the GPU UUID its reservation pod holds, from the reservation pods."""
    return {
        (pod["metadata"].get("labels") or {}).get("runai-gpu-group", ""): (
            pod["metadata"].get("annotations") or {}
        ).get(GPU_INDEX_ANNOTATION, "")
        for pod in pods
    }
