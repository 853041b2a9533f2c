"""The shipped Kubernetes configuration (hub_config/kubernetes) as a cluster gets it.

- the Zero to JupyterHub 4.4.0 chart (``../shared/reference/z2jh``, or ``$Z2JH_CHART_DIR``):
  its defaults merged with our values as helm merges them (:func:`shipped_values`), its own
  hub configuration run as the hub pod runs it (:class:`ChartHub`), and its templates
  rendered by ``helm template`` (:func:`render_z2jh`);
- this folder's own chart, ``hub_config/kubernetes/Chart.yaml`` (the job service and the
  usage database), rendered by helm with the images an admin sets (:func:`render_campus`);
- the z2jh chart as its release packages it (:func:`released_z2jh_chart`), ``helm lint``
  (:func:`helm_lint`) and other helm commands (:func:`helm`), the README's commands
  (:func:`readme_commands`, :func:`overlay_commands`), and every rendered object applied
  to an API server with server-side apply, with the warnings it answers
  (:func:`server_side_apply`, :func:`pod_security_warnings`);
- the job service's configuration as its pod reads it (:func:`job_service_config_file`,
  :func:`job_service_environment`);
- NetworkPolicies read as a network plugin enforces them (:func:`egress_allowed`,
  :func:`ingress_allowed`), since the test cluster has no network plugin.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from tornado.httpclient import AsyncHTTPClient
from traitlets.config import Config, PyFileConfigLoader

import gpuspawner.policy

from .cluster.control_plane import ControlPlaneUnavailable, tools_folder

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "hub_config" / "kubernetes"
IMAGES = K8S / "images"
DEMO_CATALOG = ROOT / "hub_config" / "local" / "catalog.yaml"
Z2JH = Path(os.environ.get("Z2JH_CHART_DIR") or ROOT.parent / "shared" / "reference" / "z2jh")
Z2JH_CHART = Z2JH / "chart"

JOB_SERVICE = "jupyter-to-job"
SESSIONS_SERVICE = "course-sessions"
RELEASE = "campus"
NAMESPACE = "campus"

# What an admin puts in values.yaml's one place for the images once they are pushed
# (README.md, "Build and push the images"): the registry, with the shipped tag.
ADMIN_REGISTRY = "registry.campus.test/gpu-hub"
ADMIN_IMAGES = {
    "hub.image.name": f"{ADMIN_REGISTRY}/hub",
    "singleuser.image.name": f"{ADMIN_REGISTRY}/user",
}
Z2JH_VERSION = "4.4.0"
# What the z2jh 4.4.0 release fills in where the chart's git copy says "set-by-chartpress"
# (the hub's and the servers' image tags are values.yaml's).
Z2JH_RELEASE_TAGS = {
    "singleuser.networkTools.image.tag": "4.4.0",
    "proxy.secretSync.image.tag": "4.4.0",
    "prePuller.hook.image.tag": "4.4.0",
}

Object = dict[str, Any]


def z2jh_missing() -> str | None:
    """Why the z2jh chart files cannot be used here, or None."""
    if not (Z2JH / "values.schema.yaml").is_file():
        return f"the z2jh 4.4.0 chart files are not at {Z2JH} (set Z2JH_CHART_DIR)"
    return None


# -- values, as helm merges them -----------------------------------------------------------


def helm_merge(defaults: Any, override: Any) -> Any:
    """Values as helm merges them: maps key by key, anything else replaced, and a key set
    to null in the override removed."""
    if not (isinstance(defaults, dict) and isinstance(override, dict)):
        return copy.deepcopy(override)
    merged = copy.deepcopy(defaults)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def shipped_values(*overlays: Path, settings: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The chart's defaults with values.yaml and ``overlays`` over them (``--values`` order),
    and ``settings`` (dotted keys, as ``--set``) over those."""
    values = load_yaml(Z2JH / "values.yaml")
    for path in (K8S / "values.yaml", *overlays):
        values = helm_merge(values, load_yaml(path))
    for dotted, value in (settings or {}).items():
        *parents, key = dotted.split(".")
        place = values
        for parent in parents:
            place = place.setdefault(parent, {})
        place[key] = value
    return values


def manifests(name: str) -> list[Object]:
    """The documents of a file of hub_config/kubernetes, as written (not rendered)."""
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def one(docs: Sequence[Object], kind: str, name: str) -> Object:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


# -- helm ------------------------------------------------------------------------------------


class HelmRefused(Exception):
    """A helm command (``helm template``, ``lint``, ``install``...) stopped; ``message`` is
    what it said."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def helm_binary() -> Path:
    """The helm built by ``make k8s-tools``; skips (fails under CI) when it is not built."""
    try:
        return tools_folder() / "helm"
    except ControlPlaneUnavailable as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))


def helm(*arguments: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``helm ARGUMENTS`` (with the cluster of ``kubeconfig``, else none); raises
    :class:`HelmRefused` with what helm said when it exits with an error."""
    command = [str(helm_binary()), *arguments]
    if kubeconfig is not None:
        command.append(f"--kubeconfig={kubeconfig}")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stdout.strip(), done.stderr.strip())  # lint's findings are on stdout
        raise HelmRefused("\n".join(part for part in said if part))
    return done


def _value_options(values: Sequence[Path], settings: Mapping[str, str] | None) -> list[str]:
    return [
        *(f"--values={path}" for path in values),
        *(f"--set-string={key}={value}" for key, value in (settings or {}).items()),
    ]


def helm_template(
    chart: Path,
    *,
    release: str,
    namespace: str = NAMESPACE,
    values: Sequence[Path] = (),
    settings: Mapping[str, str] | None = None,
    show_only: Sequence[str] = (),
) -> list[Object]:
    """The objects ``helm template`` renders; raises :class:`HelmRefused`."""
    done = helm(
        "template",
        release,
        str(chart),
        f"--namespace={namespace}",
        *_value_options(values, settings),
        *(f"--show-only={template}" for template in show_only),
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def helm_lint(
    chart: Path, *, values: Sequence[Path] = (), settings: Mapping[str, str] | None = None
) -> str:
    """What ``helm lint --strict`` says of ``chart`` with ``values``; raises
    :class:`HelmRefused` (with its findings) when the chart fails."""
    done = helm("lint", "--strict", str(chart), *_value_options(values, settings))
    return done.stdout


def released_z2jh_chart(folder: Path) -> Path:
    """The z2jh chart as its 4.4.0 release packages it, made in ``folder`` from the git copy.

    The release tool (chartpress) puts the version in Chart.yaml and the image tags in
    values.yaml, and z2jh's tools/generate-json-schema.py writes ``values.schema.json``
    from ``values.schema.yaml`` (it drops the descriptions, which validate nothing; they
    are kept here). helm validates values only against ``values.schema.json``: with the
    git copy alone, ``helm lint`` and ``helm install`` would take any misspelt value.
    """
    chart = folder / "jupyterhub"
    if chart.is_dir():
        return chart
    shutil.copytree(Z2JH_CHART, chart)
    metadata = chart / "Chart.yaml"
    text = metadata.read_text()
    assert text.count("version: 0.0.1-set.by.chartpress") == 1
    metadata.write_text(text.replace("0.0.1-set.by.chartpress", Z2JH_VERSION))
    values = chart / "values.yaml"
    values.write_text(values.read_text().replace("set-by-chartpress", Z2JH_VERSION))
    schema = load_yaml(chart / "values.schema.yaml")
    (chart / "values.schema.json").write_text(json.dumps(schema))
    return chart


def render_campus(
    *overlays: Path, images: Mapping[str, str] | None = ADMIN_IMAGES, namespace: str = NAMESPACE
) -> list[Object]:
    """This folder's chart (the job service, the usage database) as ``helm upgrade
    --install campus-gpu-hub .`` renders it, with ``images`` set as an admin sets them
    (None: as shipped)."""
    return helm_template(
        K8S,
        release="campus-gpu-hub",
        namespace=namespace,
        values=overlays,
        settings=images or {},
    )


def render_z2jh(
    *overlays: Path,
    settings: Mapping[str, str] | None = None,
    show_only: Sequence[str] = (),
    chart: Path = Z2JH_CHART,
    namespace: str = NAMESPACE,
) -> list[Object]:
    """The z2jh 4.4.0 release with values.yaml and ``overlays``, as helm renders it (from
    ``chart``: the git copy, or :func:`released_z2jh_chart`)."""
    return helm_template(
        chart,
        release=RELEASE,
        namespace=namespace,
        values=[K8S / "values.yaml", *overlays],
        settings={**Z2JH_RELEASE_TAGS, **(settings or {})},
        show_only=show_only,
    )


# -- the README's commands, as an admin runs them --------------------------------------------


def readme_commands(heading: str) -> str:
    """The ``sh`` block under the README's heading that starts with ``heading`` (its
    "Deploy" steps: ``"### 2."``, ``"### 3."``)."""
    text = (K8S / "README.md").read_text()
    found = re.search(
        rf"^{re.escape(heading)}[^\n]*\n+```sh\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE
    )
    assert found, f"README.md has no sh block under a heading starting {heading!r}"
    return found.group(1)


def overlay_commands(overlay: Path) -> str:
    """The ``kubectl`` commands an overlay's opening comment tells the admin to run first
    (the Secret sso.yaml reads, the claim experimental-zone.yaml mounts), for the release's
    namespace ``$NS`` where they say ``campus``."""
    commands: list[str] = []
    continued = False  # the comment's next indented line continues the last command
    for line in overlay.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.removeprefix("#").removeprefix("   ")
        if text.startswith("kubectl"):
            commands.append(text)
            continued = True
        elif continued and text.startswith("  "):
            commands[-1] += "\n" + text
        else:
            continued = False
    return "".join(command.replace(" -n campus ", " -n $NS ") + "\n" for command in commands)


# -- applied to an API server ------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """One object the API server took by server-side apply, with the warnings it answered
    (the ``Warning`` headers' texts, as kubectl prints them after ``Warning:``)."""

    kind: str
    name: str
    warnings: tuple[str, ...]


@dataclass
class ApplyOutcome:
    """What the API server answered to each object: ``applied``, or ``refused`` (by
    ``Kind/name``, its sentence)."""

    applied: list[Applied] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def warnings(self) -> dict[str, tuple[str, ...]]:
        return {f"{a.kind}/{a.name}": a.warnings for a in self.applied if a.warnings}


class ApiResources:
    """Where each kind is served (its resource name, and whether it is namespaced), read
    from the API server's discovery as kubectl reads it."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.found: dict[tuple[str, str], tuple[str, bool]] = {}
        self.read: set[str] = set()

    async def of(self, api_version: str, kind: str) -> tuple[str, bool]:
        if api_version not in self.read:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing, _, _ = await self.api.call_api(
                path, "GET", response_types_map={200: "object"}, auth_settings=["BearerToken"]
            )
            for resource in listing["resources"]:
                if "/" not in resource["name"]:
                    key = (api_version, resource["kind"])
                    self.found[key] = (resource["name"], resource["namespaced"])
            self.read.add(api_version)
        if (api_version, kind) not in self.found:
            raise LookupError(
                f"The API server serves no {kind} in {api_version}: install what defines it "
                "(its CustomResourceDefinition) first."
            )
        return self.found[(api_version, kind)]

    async def path(self, obj: Object, namespace: str) -> str:
        api_version, name = obj["apiVersion"], obj["metadata"]["name"]
        plural, namespaced = await self.of(api_version, obj["kind"])
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            return f"{base}/namespaces/{namespace}/{plural}/{name}"
        return f"{base}/{plural}/{name}"

    async def is_namespaced(self, obj: Object) -> bool:
        return (await self.of(obj["apiVersion"], obj["kind"]))[1]


def warning_texts(headers: Any) -> tuple[str, ...]:
    """The texts of an answer's ``Warning`` headers (``299 - "text"``, RFC 7234)."""
    texts = []
    for header in headers.getall("Warning", []):
        quoted = re.fullmatch(r'\d{3} \S+ "(.*)"', header)
        texts.append(quoted.group(1).replace('\\"', '"') if quoted else header)
    return tuple(texts)


async def server_side_apply(
    api: client.ApiClient,
    objects: Sequence[Object],
    namespace: str,
    *,
    dry_run: bool,
    field_manager: str = "campus-gpu-hub-admin",
) -> ApplyOutcome:
    """``kubectl apply --server-side [--dry-run=server] -n NAMESPACE`` of ``objects``, one
    object at a time so that each answer's warnings are its own: namespaced objects go to
    ``namespace``, unknown fields are refused (strict field validation, kubectl's default),
    and a field another manager owns is a conflict, not taken over."""
    resources = ApiResources(api)
    outcome = ApplyOutcome()
    query = [("fieldManager", field_manager), ("fieldValidation", "Strict")]
    if dry_run:
        query.append(("dryRun", "All"))
    for original in objects:
        obj = copy.deepcopy(original)
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        if await resources.is_namespaced(obj):
            obj["metadata"]["namespace"] = namespace
        try:
            _, _, headers = await api.call_api(
                await resources.path(obj, namespace),
                "PATCH",
                query_params=query,
                header_params={
                    "Content-Type": "application/apply-patch+yaml",
                    "Accept": "application/json",
                },
                body=obj,
                response_types_map={200: "object", 201: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=False,
            )
        except client.ApiException as error:
            outcome.refused[name] = json.loads(error.body).get("message", error.body)
            continue
        outcome.applied.append(
            Applied(obj["kind"], obj["metadata"]["name"], warning_texts(headers))
        )
    return outcome


POD_SECURITY_WARNING = re.compile(r'^would violate PodSecurity "(?P<level>[a-z]+):[^"]*": ')


def pod_security_warnings(outcome: ApplyOutcome, level: str) -> dict[str, list[str]]:
    """The Pod Security warnings of ``level`` (baseline, restricted) by ``Kind/name``: each
    check the object's pods would fail, as the API server words it."""
    found: dict[str, list[str]] = {}
    for name, texts in outcome.warnings.items():
        for text in texts:
            matched = POD_SECURITY_WARNING.match(text)
            if matched and matched["level"] == level:
                checks = re.split(r", (?=[a-zA-Z]+[^,(]*\()", text[matched.end() :])
                found.setdefault(name, []).extend(checks)
    return found


def other_warnings(outcome: ApplyOutcome) -> dict[str, list[str]]:
    """The warnings that are not Pod Security's (deprecations, unknown fields...)."""
    found: dict[str, list[str]] = {}
    for name, texts in outcome.warnings.items():
        for text in texts:
            if not POD_SECURITY_WARNING.match(text):
                found.setdefault(name, []).append(text)
    return found


# -- the chart's hub configuration, run as the hub pod runs it -------------------------------

# The chart's names ConfigMap (/usr/local/etc/jupyterhub/config/<short name>), as rendered
# with fullnameOverride: "" (its default): every name is the short name.
CHART_NAMES = [
    "hub",
    "proxy-api",
    "proxy-public",
    "image-pull-secret",
    "singleuser",
    "user-scheduler",
    "priority",
]
# What the chart puts in the hub Secret besides values.yaml.
CHART_SECRETS = {
    "hub.config.JupyterHub.cookie_secret": "c0ffee" * 10,
    "hub.config.CryptKeeper.keys": "k" * 64,
    f"hub.services.{JOB_SERVICE}.apiToken": "generated-by-the-chart",
}


def secret_stand_in(name: str, key: str) -> str:
    """What a Secret's key holds in these tests: the same for every pod that reads it."""
    return f"{key}-of-{name}"


def env_stand_in(name: str, spec: Any) -> str:
    """The value the kubelet gives an environment variable: a Secret's key, a pod's field."""
    if isinstance(spec, str):
        return spec
    if "value" in spec:
        return str(spec["value"])
    secret = spec.get("valueFrom", {}).get("secretKeyRef")
    if secret:
        return secret_stand_in(secret["name"], secret["key"])
    return f"stand-in-for-{name.lower()}"


def hub_pod_environment(values: dict[str, Any], namespace: str = NAMESPACE) -> dict[str, str]:
    """The hub container's environment: what the chart and Kubernetes set, and a stand-in
    for each of ``hub.extraEnv`` (a Secret's or the pod's field, as the kubelet fills it)."""
    environment = {
        "POD_NAMESPACE": namespace,
        "HUB_SERVICE_HOST": "10.96.0.10",
        "HUB_SERVICE_PORT": "8081",
        "PROXY_API_SERVICE_HOST": "10.96.0.11",
        "PROXY_API_SERVICE_PORT": "8001",
        "PROXY_PUBLIC_SERVICE_HOST": "10.96.0.12",
        "PROXY_PUBLIC_SERVICE_PORT": "80",
    }
    for name, spec in values["hub"].get("extraEnv", {}).items():
        environment[name] = env_stand_in(name, spec)
    return environment


def hub_secret_values(values: dict[str, Any], folder: Path, namespace: str) -> dict[str, Any]:
    """The values.yaml of the hub Secret helm renders from ``values`` (helm's own merge,
    with the Chart and Release it adds): what the hub pod reads."""
    given = folder / "given-values.yaml"
    given.write_text(yaml.safe_dump(values))
    [secret] = helm_template(
        Z2JH_CHART,
        release=RELEASE,
        namespace=namespace,
        values=[given],
        show_only=["templates/hub/secret.yaml"],
    )
    rendered: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"]["values.yaml"]))
    return rendered


class ChartHub:
    """The traitlets Config that z2jh's jupyterhub_config.py makes from some values.

    The values reach it as helm renders them into the hub Secret. The chart's files are
    copied with their one mount point, /usr/local/etc/jupyterhub, moved to a temporary
    folder that holds what the chart mounts there; ``mounts`` move our own mount points (a
    ConfigMap's path) for the catalog the configuration loads.
    """

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.http_clients: list[str] = []
        self.catalogs_loaded: list[str] = []

    def run(
        self, values: dict[str, Any], *, mounts: dict[str, Path], namespace: str = NAMESPACE
    ) -> Config:
        """The configuration of a hub pod in ``namespace`` installed with ``values``."""
        etc = self.tmp_path / "usr-local-etc-jupyterhub"
        hub_files = self.tmp_path / "hub-files"
        for folder in (etc / "secret", etc / "config", hub_files):
            folder.mkdir(parents=True, exist_ok=True)
        for name in ("jupyterhub_config.py", "z2jh.py"):
            text = (Z2JH / "hub-files" / name).read_text()
            assert "/usr/local/etc/jupyterhub" in text or name == "jupyterhub_config.py"
            (hub_files / name).write_text(text.replace("/usr/local/etc/jupyterhub", str(etc)))
        # The hub Secret: the values as helm renders them, and the generated secrets.
        secret_values = hub_secret_values(values, self.tmp_path, namespace)
        (etc / "secret" / "values.yaml").write_text(yaml.safe_dump(secret_values))
        for key, value in CHART_SECRETS.items():
            (etc / "secret" / key).write_text(value)
        for name in CHART_NAMES:
            (etc / "config" / name).write_text(name)

        for name, value in hub_pod_environment(values, namespace).items():
            self.monkeypatch.setenv(name, value)
        # The hub image has pycurl; this test needs only to see which client was asked for.
        self.monkeypatch.setattr(
            AsyncHTTPClient, "configure", classmethod(lambda cls, impl, **_: self._http(impl))
        )
        real_load_catalog = gpuspawner.policy.load_catalog

        def load_mounted_catalog(path: Any, *args: Any, **kwargs: Any) -> Any:
            self.catalogs_loaded.append(str(path))
            return real_load_catalog(mounts.get(str(path), path), *args, **kwargs)

        self.monkeypatch.setattr(gpuspawner.policy, "load_catalog", load_mounted_catalog)
        self.monkeypatch.setattr(sys, "path", list(sys.path))  # the config prepends its folder
        try:
            return PyFileConfigLoader("jupyterhub_config.py", path=str(hub_files)).load_config()
        finally:
            sys.modules.pop("z2jh", None)  # its values are cached per process

    def _http(self, impl: str) -> None:
        self.http_clients.append(impl)


def catalog_mount_path(values: dict[str, Any]) -> str:
    """Where the hub pod mounts the course-catalog ConfigMap."""
    [volume] = [v for v in values["hub"]["extraVolumes"] if v.get("configMap")]
    assert volume["configMap"]["name"] == "course-catalog"
    [mount] = [m for m in values["hub"]["extraVolumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    return mount["mountPath"]


def services_by_name(config: Config) -> dict[str, dict[str, Any]]:
    return {service["name"]: service for service in config.JupyterHub.services}


# -- the job service's configuration, as its pod reads it -------------------------------------


def job_service_config_file(tmp_path: Path, overlay: Path, docs: Sequence[Object]) -> Path:
    """The job service's config file as its pod sees it: the rendered ConfigMap's file
    (``docs``: :func:`render_campus`), with the gpu-sharing ConfigMap (made from
    ``overlay``) at its mount point under ``tmp_path``."""
    text = one(docs, "ConfigMap", "jupyter-to-job-config")["data"]["jupyter_to_job_config.py"]
    sharing = tmp_path / "sharing"
    sharing.mkdir(exist_ok=True)
    (sharing / "values.yaml").write_text(overlay.read_text())
    mount = "/etc/jupyter-to-job/sharing/"
    assert mount in text
    path = tmp_path / "jupyter_to_job_config.py"
    path.write_text(text.replace(mount, f"{sharing}/"))
    return path


def job_service_environment(docs: Sequence[Object]) -> dict[str, str]:
    """The job service container's environment, as the kubelet fills it (Secrets' keys
    by :func:`secret_stand_in`, the same values the hub pod gets for the same keys)."""
    deployment = one(docs, "Deployment", JOB_SERVICE)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: env_stand_in(e["name"], e) for e in container.get("env", [])}


# -- RBAC, as written in manifests -----------------------------------------------------------


def granted_to(service_account: str, docs: Sequence[Object]) -> set[tuple[str, ...]]:
    """What the bindings among ``docs`` grant ``service_account``, rule by rule, expanded."""
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"].endswith("Role")}
    granted = set()
    for binding in (d for d in docs if d["kind"].endswith("RoleBinding")):
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == service_account
            for s in binding["subjects"]
        ):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else "namespace"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((scope, group, resource, verb))
    return granted


# -- NetworkPolicies, as a network plugin enforces them ---------------------------------------


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (its labels, namespace and named ports) or an address
    outside the cluster's pods (``ip`` only)."""

    ip: str
    labels: Mapping[str, str] | None = None
    namespace: str = ""
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    named_ports: Mapping[str, int] = field(default_factory=dict)

    @property
    def is_pod(self) -> bool:
        return self.labels is not None


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    selector = selector or {}
    if set(selector) - {"matchLabels"}:
        raise NotImplementedError(f"only matchLabels selectors are read here: {selector}")
    return dict(selector.get("matchLabels") or {}).items() <= dict(labels).items()


def _peer_matches(entry: Mapping[str, Any], peer: Peer, namespace: str) -> bool:
    if "ipBlock" in entry:
        block = entry["ipBlock"]
        address = ipaddress.ip_address(peer.ip)
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(cidr) for cidr in block.get("except", [])
        )
    if not peer.is_pod:
        return False
    assert peer.labels is not None
    if "namespaceSelector" in entry:
        if not _selects(entry["namespaceSelector"], peer.namespace_labels):
            return False
    elif peer.namespace != namespace:
        return False
    return _selects(entry.get("podSelector"), peer.labels)


def _port_matches(rule: Mapping[str, Any], port: int, protocol: str, target: Peer) -> bool:
    ports = rule.get("ports")
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str) and not wanted.isdigit():
            if target.named_ports.get(wanted) == port:
                return True
        elif int(wanted) == port:
            return True
    return False


def _policies_for(
    policies: Sequence[Object], pod: Peer, namespace: str, direction: str
) -> list[Object]:
    return [
        policy
        for policy in policies
        if policy["kind"] == "NetworkPolicy"
        and (policy["metadata"].get("namespace") or namespace) == pod.namespace
        and _selects(policy["spec"].get("podSelector"), pod.labels or {})
        and direction in policy["spec"].get("policyTypes", ["Ingress"])
    ]


def egress_allowed(
    policies: Sequence[Object], source: Peer, target: Peer, port: int, protocol: str = "TCP"
) -> bool:
    """Whether ``source`` (a pod) may open ``port`` on ``target`` under ``policies``
    (egress only: what the source's own policies allow)."""
    selecting = _policies_for(policies, source, source.namespace, "Egress")
    if not selecting:
        return True
    return any(
        _port_matches(rule, port, protocol, target)
        and (
            "to" not in rule or any(_peer_matches(e, target, source.namespace) for e in rule["to"])
        )
        for policy in selecting
        for rule in policy["spec"].get("egress") or []
    )


def ingress_allowed(
    policies: Sequence[Object], target: Peer, source: Peer, port: int, protocol: str = "TCP"
) -> bool:
    """Whether ``source`` may reach ``port`` of ``target`` (a pod) under ``target``'s
    policies (ingress only)."""
    selecting = _policies_for(policies, target, target.namespace, "Ingress")
    if not selecting:
        return True
    return any(
        _port_matches(rule, port, protocol, target)
        and (
            "from" not in rule
            or any(_peer_matches(e, source, target.namespace) for e in rule["from"])
        )
        for policy in selecting
        for rule in policy["spec"].get("ingress") or []
    )


def as_json(objects: Sequence[Object]) -> str:
    """A kubectl ``List`` of ``objects``."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
