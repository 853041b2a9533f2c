"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, controller-manager, scheduler.

Built from their Go modules by ``make k8s-tools`` (tools/k8s). The API server runs as a
managed cluster's does: client certificates and service-account tokens, ``Node,RBAC``
authorisation, and the admission plugins managed clusters enable (Pod Security among them).
Only the node is ours (node_agent.py).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .pki import CertificateAuthority, KeyPair, service_account_keys
from .pod_network import session_ranges

REPO = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO / "tools" / "k8s" / "build.sh"
TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")

ADMISSION_PLUGINS = (
    "NamespaceLifecycle,ServiceAccount,LimitRanger,ResourceQuota,PodSecurity,"
    "DefaultTolerationSeconds,NodeRestriction"
)
# The API server relays pods/exec to the node as the client asked (WebSocket): the node
# agent speaks the WebSocket channel protocol, not SPDY, which the translation would use.
FEATURE_GATES = "TranslateStreamCloseWebsocketRequests=false"
STARTUP_GUARD = 120.0
PR_SET_PDEATHSIG = 1
# Every request of a service account is written down (who, verb, resource, answer), so
# tests can check the components' RBAC against what they really asked for.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}


class ControlPlaneUnavailable(RuntimeError):
    """The binaries are not built (``make k8s-tools``) or a component did not start."""


def tools_folder() -> Path:
    """The folder holding the built binaries, from ``$K8S_TOOLS_BIN`` or the build cache."""
    configured = os.environ.get("K8S_TOOLS_BIN")
    if configured:
        folder = Path(configured)
    else:
        result = subprocess.run(
            [str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=False
        )
        folder = Path(result.stdout.strip())
    missing = [tool for tool in TOOLS if not (folder / tool).is_file()]
    if missing:
        raise ControlPlaneUnavailable(
            f"The Kubernetes control plane is not built ({', '.join(missing)} missing in "
            f"{folder}): run `make k8s-tools` (it builds them from their Go modules, once)."
        )
    return folder


def _end_with_parent() -> None:
    """In the child: SIGTERM when the test process ends, even if it is killed (no orphaned
    control plane outlives a test run)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    server: str,
    ca_pem: bytes,
    *,
    user: str,
    client: KeyPair | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A kubeconfig for ``server`` as ``user``, by client certificate or bearer token."""
    credentials: dict[str, Any] = {}
    if client is not None:
        credentials["client-certificate-data"] = _b64(client.cert.read_bytes())
        credentials["client-key-data"] = _b64(client.key.read_bytes())
    if token is not None:
        credentials["token"] = token
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "campus-test",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {
                "name": user,
                "context": {"cluster": "campus-test", "user": user, "namespace": namespace},
            }
        ],
        "current-context": user,
    }


@dataclass
class Component:
    """One control-plane process, its log file and its process group."""

    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=cwd,
            preexec_fn=_end_with_parent,
        )
        log.close()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 10.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler in ``folder``."""

    folder: Path
    bin: Path = field(default_factory=tools_folder)
    components: list[Component] = field(default_factory=list)
    _started: ClassVar[int] = 0

    def __post_init__(self) -> None:
        ControlPlane._started += 1
        self.index = ControlPlane._started % 4
        self.pod_range, self.service_range = session_ranges(os.getpid(), self.index)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.pki = CertificateAuthority(self.folder / "pki")
        self.api_port = free_port()
        self.url = f"https://127.0.0.1:{self.api_port}"
        self.audit_log = self.folder / "logs" / "audit.log"
        self.admin = self.pki.issue(
            "admin", common_name="campus-test-admin", organisations=("system:masters",), client=True
        )

    # -- identities ----------------------------------------------------------------------

    def client_identity(self, name: str, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        return self.pki.issue(name, common_name=user, organisations=groups, client=True)

    def node_identity(self, node: str) -> KeyPair:
        """The kubelet credentials of ``node``: user ``system:node:<node>`` in ``system:nodes``."""
        return self.client_identity(f"node-{node}", f"system:node:{node}", ("system:nodes",))

    def write_kubeconfig(
        self,
        path: Path,
        *,
        user: str = "campus-test-admin",
        client: KeyPair | None = None,
        token: str | None = None,
        namespace: str = "default",
    ) -> Path:
        if client is None and token is None:
            client = self.admin
        document = kubeconfig(
            self.url, self.pki.pem, user=user, client=client, token=token, namespace=namespace
        )
        path.write_text(json.dumps(document, indent=2))
        path.chmod(0o600)
        return path

    def ssl_context(self, client: KeyPair | None = None) -> ssl.SSLContext:
        """Verifies the API server by the cluster's CA; presents ``client`` (admin by default)."""
        context = ssl.create_default_context(cafile=str(self.pki.cert_path))
        identity = client or self.admin
        context.load_cert_chain(str(identity.cert), str(identity.key))
        return context

    def wait_established(self, crds: list[str], timeout: float, what: str) -> None:
        """Until each CRD is Established, reading it (``kubectl wait
        --for=condition=Established`` fails at once on a CRD whose status has no conditions
        yet, as on a loaded machine right after it is made, instead of waiting)."""
        deadline = time.monotonic() + timeout
        context = self.ssl_context()
        for name in crds:
            url = f"{self.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            while not _established(url, context):
                if time.monotonic() > deadline:
                    raise ControlPlaneUnavailable(
                        f"{what}'s CRD {name} was not established in {timeout:.0f} s."
                    )
                time.sleep(0.2)

    # -- life ----------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        pki = self.folder / "pki"
        serving = self.pki.issue(
            "apiserver",
            common_name="kube-apiserver",
            hosts=(
                "127.0.0.1",
                "localhost",
                str(next(self.service_range.hosts())),
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            server=True,
        )
        kubelet_client = self.client_identity(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
        )
        sa = service_account_keys(pki)
        audit_policy = self.folder / "audit-policy.yaml"
        audit_policy.write_text(json.dumps(AUDIT_POLICY))
        etcd_port, etcd_peer = free_port(), free_port()
        logs = self.folder / "logs"
        logs.mkdir(exist_ok=True)
        etcd = Component(
            "etcd",
            [
                str(self.bin / "etcd"),
                f"--data-dir={self.folder / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
            logs / "etcd.log",
        )
        self._launch(etcd)
        self._wait(
            etcd, lambda: _http_ok(f"http://127.0.0.1:{etcd_port}/health", None), "etcd /health"
        )
        apiserver = Component(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.pki.cert_path}",
                f"--service-cluster-ip-range={self.service_range}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={sa.cert}",
                f"--service-account-signing-key-file={sa.key}",
                "--authorization-mode=Node,RBAC",
                f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                f"--kubelet-client-certificate={kubelet_client.cert}",
                f"--kubelet-client-key={kubelet_client.key}",
                f"--kubelet-certificate-authority={self.pki.cert_path}",
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
                f"--feature-gates={FEATURE_GATES}",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--profiling=false",
                "--v=1",
            ],
            logs / "kube-apiserver.log",
        )
        self._launch(apiserver)
        context = self.ssl_context()
        self._wait(apiserver, lambda: _http_ok(f"{self.url}/readyz", context), "/readyz")
        manager_config = self.write_kubeconfig(
            self.folder / "controller-manager.kubeconfig",
            user="system:kube-controller-manager",
            client=self.client_identity("controller-manager", "system:kube-controller-manager"),
        )
        self._launch(
            Component(
                "kube-controller-manager",
                [
                    str(self.bin / "kube-controller-manager"),
                    f"--kubeconfig={manager_config}",
                    f"--authentication-kubeconfig={manager_config}",
                    f"--authorization-kubeconfig={manager_config}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={free_port()}",
                    "--leader-elect=false",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={sa.key}",
                    f"--root-ca-file={self.pki.cert_path}",
                    f"--cluster-signing-cert-file={self.pki.cert_path}",
                    f"--cluster-signing-key-file={self.folder / 'pki' / 'ca.key'}",
                    "--controllers=*,bootstrapsigner,tokencleaner",
                    # New nodes lose the not-ready taint admission gives them within a
                    # second of reporting Ready, rather than five.
                    "--node-monitor-period=1s",
                    "--profiling=false",
                    "--v=1",
                ],
                logs / "kube-controller-manager.log",
            )
        )
        scheduler_config = self.write_kubeconfig(
            self.folder / "scheduler.kubeconfig",
            user="system:kube-scheduler",
            client=self.client_identity("scheduler", "system:kube-scheduler"),
        )
        settings = self.folder / "scheduler.yaml"
        settings.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(scheduler_config)},
                    "leaderElection": {"leaderElect": False},
                    # A pod that did not fit is tried again within a second of a change
                    # rather than after up to ten: the same decisions, sooner.
                    "podInitialBackoffSeconds": 1,
                    "podMaxBackoffSeconds": 1,
                }
            )
        )
        self._launch(
            Component(
                "kube-scheduler",
                [
                    str(self.bin / "kube-scheduler"),
                    f"--config={settings}",
                    f"--authentication-kubeconfig={scheduler_config}",
                    f"--authorization-kubeconfig={scheduler_config}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={free_port()}",
                    "--profiling=false",
                    "--v=1",
                ],
                logs / "kube-scheduler.log",
            )
        )
        self.admin_kubeconfig = self.write_kubeconfig(self.folder / "admin.kubeconfig")
        self._wait_for_default_service_account(context)

    def _launch(self, component: Component) -> None:
        component.start()
        self.components.append(component)

    def _wait(self, component: Component, ready: Any, what: str) -> None:
        deadline = time.monotonic() + STARTUP_GUARD
        while not ready():
            if not component.running():
                raise ControlPlaneUnavailable(
                    f"{component.name} exited before {what} answered:\n{component.tail()}"
                )
            if time.monotonic() > deadline:
                raise ControlPlaneUnavailable(
                    f"{component.name} did not answer {what} in {STARTUP_GUARD:.0f} s:\n"
                    f"{component.tail()}"
                )
            time.sleep(0.2)

    def _wait_for_default_service_account(self, context: ssl.SSLContext) -> None:
        """Pods can be made once the controllers gave ``default`` its service account."""
        manager = next(c for c in self.components if c.name == "kube-controller-manager")
        url = f"{self.url}/api/v1/namespaces/default/serviceaccounts/default"
        self._wait(manager, lambda: _http_ok(url, context), "the default service account")

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()
        self.components.clear()

    def check_running(self) -> None:
        """Raise, with its log, if a component has exited since the start."""
        for component in self.components:
            if not component.running():
                raise ControlPlaneUnavailable(f"{component.name} has exited:\n{component.tail()}")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@dataclass(frozen=True)
class AuditedRequest:
    """One request the API server answered, as its audit log has it."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int


def audited_requests(log: Path, user: str) -> list[AuditedRequest]:
    """Every request ``user`` made so far (``system:serviceaccount:<ns>:<name>``)."""
    found = []
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        event = json.loads(line)
        if event.get("user", {}).get("username") != user or "objectRef" not in event:
            continue
        ref = event["objectRef"]
        found.append(
            AuditedRequest(
                user=user,
                verb=event["verb"],
                group=ref.get("apiGroup", ""),
                resource=ref.get("resource", ""),
                subresource=ref.get("subresource", ""),
                namespace=ref.get("namespace", ""),
                name=ref.get("name", ""),
                code=int(event.get("responseStatus", {}).get("code", 0)),
            )
        )
    return found


def _established(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as answer:
            conditions = (json.load(answer).get("status") or {}).get("conditions") or []
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
