"""Kueue for real in the test cluster: its CRDs, RBAC and webhooks, and its controller.

The manifests are Kueue's own (``config/default`` of the pinned module, rendered by
``make k8s-tools``). Only two things change, because there is no kube-proxy to reach a
Service: the webhooks (admission and CRD conversion) call the controller at its loopback
URL, with the test CA's bundle; and the controller runs as a local process, with its
service account's token, instead of the Deployment.
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
from pathlib import Path
from typing import Any

import yaml

from .control_plane import REPO, Component, ControlPlane, ControlPlaneUnavailable, free_port
from .identities import SESSION_LABEL, token_for

NAMESPACE = "kueue-system"
ACCOUNT = "kueue-controller-manager"
# What the controller is given to manage: plain pods (GPUSpawner's queue) and batch Jobs.
FRAMEWORKS = ["batch/job", "pod"]
READY_GUARD = 120.0
METRICS_CERTS = "/etc/kueue/metrics/certs"

Object = dict[str, Any]


def manifests_path(plane: ControlPlane) -> Path:
    return plane.bin.parent / "kueue-manifests.yaml"


def installable(documents: list[Object], url: str, ca_bundle: str) -> list[Object]:
    """Kueue's manifests as this cluster installs them: no Deployment, Services or
    APIServices (the controller runs on loopback), webhooks by URL."""
    kept = []
    for doc in documents:
        kind = doc["kind"]
        if kind in ("Deployment", "Service", "APIService"):
            continue
        if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in doc.get("webhooks") or []:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": url + path, "caBundle": ca_bundle}
        if kind == "CustomResourceDefinition":
            conversion = (doc["spec"].get("conversion") or {}).get("webhook")
            if conversion:
                path = conversion["clientConfig"]["service"]["path"]
                conversion["clientConfig"] = {"url": url + path, "caBundle": ca_bundle}
            doc["metadata"].get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
        if kind == "Secret":
            continue  # the webhook's certificate comes from the test CA
        kept.append(doc)
    return kept


class Kueue:
    """Kueue's controller for the test cluster; ``start()`` once per session."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.folder = plane.folder / "kueue"
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.component: Component | None = None
        self.served: list[str] = []

    def start(self) -> None:
        source = manifests_path(self.plane)
        if not source.is_file():
            raise ControlPlaneUnavailable(
                f"Kueue's manifests are not rendered ({source}): run `make k8s-tools`."
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        certs = self.folder / "certs"
        certs.mkdir(exist_ok=True)
        serving = self.plane.pki.issue(
            "kueue-webhook", common_name="kueue-webhook", hosts=("127.0.0.1",), server=True
        )
        (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
        (certs / "tls.key").write_bytes(serving.key.read_bytes())
        url = f"https://127.0.0.1:{self.webhook_port}"
        ca_bundle = base64.b64encode(self.plane.pki.pem).decode()
        documents = [doc for doc in yaml.safe_load_all(source.read_text()) if doc]
        installed = installable(documents, url, ca_bundle)
        self._apply(installed)
        self.served = [
            f"/apis/{doc['spec']['group']}/{version['name']}/{doc['spec']['names']['plural']}"
            for doc in installed
            if doc["kind"] == "CustomResourceDefinition"
            for version in doc["spec"]["versions"]
            if version.get("storage")
        ]
        kubeconfig = self.plane.write_kubeconfig(
            self.folder / "kubeconfig",
            user=f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}",
            token=token_for(self.plane, NAMESPACE, ACCOUNT),
            namespace=NAMESPACE,
        )
        config = self.folder / "controller_manager_config.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                    "kind": "Configuration",
                    "namespace": NAMESPACE,
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
                    "metrics": {"bindAddress": "0"},
                    "webhook": {
                        "port": self.webhook_port,
                        "host": "127.0.0.1",
                        "certDir": str(certs),
                    },
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                    "integrations": {"frameworks": FRAMEWORKS},
                    "managedJobsNamespaceSelector": {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/metadata.name",
                                "operator": "NotIn",
                                "values": ["kube-system", NAMESPACE],
                            }
                        ]
                    },
                }
            )
        )
        # Without its own certificate management Kueue reads its metrics server's certificate
        # from /etc/kueue/metrics/certs, as its Deployment mounts it: mounted so here too.
        if os.geteuid() != 0:
            raise ControlPlaneUnavailable(
                "Kueue reads its certificates at fixed paths, which the test cluster mounts in "
                "a mount namespace of Kueue's own: that needs root (CI runs as root)."
            )
        spec = self.folder / "mounts.json"
        spec.write_text(
            json.dumps(
                {
                    "scratch": str(self.folder / "mounts"),
                    "binds": [{"source": str(certs), "target": METRICS_CERTS, "read_only": True}],
                }
            )
        )
        component = Component(
            "kueue",
            [
                sys.executable,
                "-m",
                "tests.support.cluster.mounts",
                str(spec),
                "--",
                str(self.plane.bin / "kueue"),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                # The on-demand visibility API is an aggregated API the API server would
                # reach through a Service; queue positions are read from Workloads instead.
                "--feature-gates=VisibilityOnDemand=false",
                "--zap-log-level=2",
            ],
            self.plane.folder / "logs" / "kueue.log",
        )
        component.start(env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
        self.component = component
        self.plane.components.append(component)
        self._wait_ready()

    def _apply(self, documents: list[Object]) -> None:
        for doc in documents:
            doc["metadata"].setdefault("labels", {})[SESSION_LABEL] = "true"
        for kinds in (("Namespace", "CustomResourceDefinition"), None):
            batch = [
                doc
                for doc in documents
                if (kinds is None and doc["kind"] not in ("Namespace", "CustomResourceDefinition"))
                or (kinds is not None and doc["kind"] in kinds)
            ]
            subprocess.run(
                [
                    str(self.plane.bin / "kubectl"),
                    f"--kubeconfig={self.plane.admin_kubeconfig}",
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "--field-manager=campus-test",
                    "-f",
                    "-",
                ],
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": batch}),
                capture_output=True,
                text=True,
                check=True,
            )
            if kinds is not None:
                crds = [
                    d["metadata"]["name"] for d in batch if d["kind"] == "CustomResourceDefinition"
                ]
                self.plane.wait_established(crds, READY_GUARD, "Kueue")

    def _wait_ready(self) -> None:
        assert self.component is not None
        deadline = time.monotonic() + READY_GUARD
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.health_port}/readyz", timeout=2
                ) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if not self.component.running():
                raise ControlPlaneUnavailable(f"Kueue exited:\n{self.component.tail()}")
            if time.monotonic() > deadline:
                raise ControlPlaneUnavailable(
                    f"Kueue was not ready in {READY_GUARD:.0f} s:\n{self.component.tail()}"
                )
            time.sleep(0.2)
        self._wait_served(deadline)

    def _wait_served(self, deadline: float) -> None:
        """Until the API server lists each of Kueue's kinds: for a few seconds after a CRD is
        made, its storage answers 429 ("storage is (re)initializing"), which the clean-up
        between tests (and a test's first ClusterQueue) would meet."""
        context = self.plane.ssl_context()
        for path in self.served:
            while not _lists(f"{self.plane.url}{path}?limit=1", context):
                if time.monotonic() > deadline:
                    raise ControlPlaneUnavailable(
                        f"The API server did not serve {path} in {READY_GUARD:.0f} s."
                    )
                time.sleep(0.2)


def _lists(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False
