"""The Zero to JupyterHub values deploy the whole hub (issue 12, item 1).

Checked against the real chart, z2jh 4.4.0, without a cluster or helm: its values schema,
its defaults (merged with ours as helm merges them) and its own hub configuration
(``hub-files/jupyterhub_config.py``), run with our values as the hub pod runs it. The chart's
files are the reference copy in ``../shared/reference/z2jh`` (or ``$Z2JH_CHART_DIR``); the
job service's manifests are checked against Kubernetes' OpenAPI schemas (1.32 to 1.34).
"""

from __future__ import annotations

import copy
import os
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from tornado.httpclient import AsyncHTTPClient
from traitlets.config import Config, PyFileConfigLoader

import gpuspawner.policy
from gpuspawner.kubernetes import GPUSpawner
from gpuspawner.policy.roles import course_roles
from gpuspawner.sessions import sessions_service_role
from gpuspawner.sessions.registration import with_reclaim_access
from jupyter_to_job.hub import job_server_token_scopes, job_service_roles, job_service_url
from jupyter_to_job.scopes import hub_custom_scopes
from jupyter_to_job.service.app import JobServiceApp
from tests.support.k8s_spawners import without_a_hub

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "hub_config" / "kubernetes"
IMAGES = K8S / "images"
DEMO_CATALOG = ROOT / "hub_config" / "local" / "catalog.yaml"
Z2JH = Path(os.environ.get("Z2JH_CHART_DIR") or ROOT.parent / "shared" / "reference" / "z2jh")

pytestmark = pytest.mark.skipif(
    not (Z2JH / "values.schema.yaml").is_file(),
    reason=f"the z2jh 4.4.0 chart files are not at {Z2JH} (set Z2JH_CHART_DIR)",
)

OVERLAYS = sorted((K8S / "backends").glob("*.yaml")) + [
    K8S / "sso.yaml",
    K8S / "experimental-zone.yaml",
]
KUBERNETES_VERSIONS = ["1.32.0", "1.33.0", "1.34.0"]
JOB_SERVICE = "jupyter-to-job"
SESSIONS_SERVICE = "course-sessions"
# The chart's own idle culler (cull.enabled, its default) stays on: idle servers free GPUs.
CULLER = "jupyterhub-idle-culler"


# -- helm, as far as these tests need it ---------------------------------------------------


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


def shipped_values(*overlays: Path) -> dict[str, Any]:
    """The chart's defaults with values.yaml and ``overlays`` over them (``--values`` order)."""
    values = load_yaml(Z2JH / "values.yaml")
    for path in (K8S / "values.yaml", *overlays):
        values = helm_merge(values, load_yaml(path))
    return values


def schema_errors(values: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(load_yaml(Z2JH / "values.schema.yaml"))
    return [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(values)
    ]


def manifests(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
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


def hub_pod_environment(values: dict[str, Any]) -> dict[str, str]:
    """The hub container's environment: what the chart and Kubernetes set, and a stand-in
    for each of ``hub.extraEnv`` (a Secret's or the pod's field, as the kubelet fills it)."""
    environment = {
        "POD_NAMESPACE": "campus",
        "HUB_SERVICE_HOST": "10.96.0.10",
        "HUB_SERVICE_PORT": "8081",
        "PROXY_API_SERVICE_HOST": "10.96.0.11",
        "PROXY_API_SERVICE_PORT": "8001",
        "PROXY_PUBLIC_SERVICE_HOST": "10.96.0.12",
        "PROXY_PUBLIC_SERVICE_PORT": "80",
    }
    for name, spec in values["hub"].get("extraEnv", {}).items():
        environment[name] = spec if isinstance(spec, str) else f"stand-in-for-{name.lower()}"
    return environment


class ChartHub:
    """The traitlets Config that z2jh's jupyterhub_config.py makes from some values.

    The chart's files are copied with their one mount point, /usr/local/etc/jupyterhub,
    moved to a temporary folder that holds what the chart mounts there; ``mounts`` move
    our own mount points (a ConfigMap's path) for the catalog the configuration loads.
    """

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.http_clients: list[str] = []
        self.catalogs_loaded: list[str] = []

    def run(self, values: dict[str, Any], *, mounts: dict[str, Path]) -> Config:
        etc = self.tmp_path / "usr-local-etc-jupyterhub"
        hub_files = self.tmp_path / "hub-files"
        for folder in (etc / "secret", etc / "config", hub_files):
            folder.mkdir(parents=True, exist_ok=True)
        for name in ("jupyterhub_config.py", "z2jh.py"):
            text = (Z2JH / "hub-files" / name).read_text()
            assert "/usr/local/etc/jupyterhub" in text or name == "jupyterhub_config.py"
            (hub_files / name).write_text(text.replace("/usr/local/etc/jupyterhub", str(etc)))
        # The hub Secret: the values (with the Chart and Release the chart adds) and secrets.
        secret_values = {
            **values,
            "Chart": {"Name": "jupyterhub", "Version": "4.4.0"},
            "Release": {"Name": "campus", "Namespace": "campus", "Service": "Helm"},
        }
        (etc / "secret" / "values.yaml").write_text(yaml.safe_dump(secret_values))
        for key, value in CHART_SECRETS.items():
            (etc / "secret" / key).write_text(value)
        for name in CHART_NAMES:
            (etc / "config" / name).write_text(name)

        for name, value in hub_pod_environment(values).items():
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


@pytest.fixture
def catalog_mount(tmp_path: Path) -> Path:
    """The course-catalog ConfigMap as mounted: made from the demo catalog."""
    folder = tmp_path / "course-catalog"
    folder.mkdir()
    (folder / "catalog.yaml").write_text(DEMO_CATALOG.read_text())
    return folder


@pytest.fixture
def chart_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ChartHub:
    return ChartHub(tmp_path, monkeypatch)


def catalog_mount_path(values: dict[str, Any]) -> str:
    """Where the hub pod mounts the course-catalog ConfigMap."""
    [volume] = [v for v in values["hub"]["extraVolumes"] if v.get("configMap")]
    assert volume["configMap"]["name"] == "course-catalog"
    [mount] = [m for m in values["hub"]["extraVolumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    return mount["mountPath"]


# -- (a) the chart's schema ------------------------------------------------------------------


@pytest.mark.parametrize("overlay", [None, *OVERLAYS], ids=lambda p: p.stem if p else "alone")
def test_the_shipped_values_pass_the_charts_schema(overlay):
    values = shipped_values(*([overlay] if overlay else []))
    assert schema_errors(values) == []


def test_a_misspelled_setting_fails_the_charts_schema():
    # Given the shipped values with one setting misspelled, as an admin might
    values = shipped_values()
    values["singleuser"]["serviceAccount"] = values["singleuser"].pop("startTimeout")
    # then the schema names it, as `helm install` would
    errors = schema_errors(values)
    assert any("'serviceAccount' was unexpected" in error for error in errors), errors


def test_a_wrongly_typed_setting_fails_the_charts_schema():
    values = shipped_values()
    values["hub"]["networkPolicy"]["ingress"] = {"from": "the proxy"}
    errors = schema_errors(values)
    assert any(error.startswith("hub.networkPolicy.ingress") for error in errors), errors


def test_helm_merge_replaces_lists_and_drops_nulls():
    defaults = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    merged = helm_merge(defaults, {"a": {"c": [3]}, "d": None})
    assert merged == {"a": {"b": 1, "c": [3]}}


# -- (b) the chart's hub configuration with the shipped values --------------------------------


@pytest.fixture
def hub_config(chart_hub: ChartHub, catalog_mount: Path) -> Config:
    values = shipped_values()
    return chart_hub.run(values, mounts={catalog_mount_path(values): catalog_mount})


def test_the_hub_spawns_with_gpuspawner_and_the_mounted_catalog(hub_config, chart_hub):
    values = shipped_values()
    assert hub_config.JupyterHub.spawner_class == "gpuspawner.kubernetes.GPUSpawner"
    from traitlets.utils.importstring import import_item

    assert import_item(hub_config.JupyterHub.spawner_class) is GPUSpawner
    # The one admission reads the catalog ConfigMap where the hub pod mounts it.
    assert hub_config.GPUAdmission.catalog_path == catalog_mount_path(values)
    assert hub_config.GPUAdmission.sharing_backend == "whole"
    assert chart_hub.catalogs_loaded == [catalog_mount_path(values)]
    # The chart's own settings are still there: KubeSpawner traits, the curl client.
    assert hub_config.KubeSpawner.image == "registry.example.edu/campus-gpu-hub/user:0.1.0"
    assert hub_config.KubeSpawner.namespace == "campus"
    assert chart_hub.http_clients == ["tornado.curl_httpclient.CurlAsyncHTTPClient"]


def services_by_name(config: Config) -> dict[str, dict[str, Any]]:
    return {service["name"]: service for service in config.JupyterHub.services}


def test_the_job_service_and_course_sessions_are_registered(hub_config):
    from jupyterhub.services.service import Service

    services = services_by_name(hub_config)
    assert set(services) == {JOB_SERVICE, SESSIONS_SERVICE, CULLER}
    # Every key is a field of JupyterHub's Service (init_services refuses others).
    for spec in services.values():
        assert set(spec) <= set(Service.class_trait_names()), spec

    # The job service runs in its own Deployment: the hub knows its URL and its token.
    job_service = services[JOB_SERVICE]
    assert job_service == {
        "name": JOB_SERVICE,
        "url": "http://jupyter-to-job:8766",
        "display": False,
        "api_token": CHART_SECRETS[f"hub.services.{JOB_SERVICE}.apiToken"],
    }
    assert "command" not in job_service  # not a process in the hub pod

    # The course-sessions service runs in the hub pod, on the pod's address.
    sessions = services[SESSIONS_SERVICE]
    assert sessions["command"][1:] == [
        "-m",
        "gpuspawner.sessions",
        "--catalog",
        "/etc/jupyterhub/courses",
        "--interval",
        "30",
        "--audit-log",
        "/srv/jupyterhub/course-sessions.jsonl",
        "--kubernetes-namespace",
        "campus",
        "--job-service-url",
        "http://jupyter-to-job:8766/services/jupyter-to-job/",
    ]
    assert sessions["url"] == "http://stand-in-for-pod_ip:8767"
    # It shows the GPU map of the hub's namespace, so it is in the hub's Services menu.
    assert sessions["display"] is True
    assert sessions["environment"] == {
        "GPUSPAWNER_PREWARM_SECRET": "stand-in-for-gpuspawner_prewarm_secret"
    }


def test_the_hub_serves_gpuspawners_pages_with_the_gpu_map_link(hub_config):
    # The spawn cards and the home page (running course, share, stop time, GPU map link)
    templates = Path(gpuspawner.policy.__file__).parents[1] / "templates"
    assert hub_config.JupyterHub.template_paths == [str(templates)]
    assert (templates / "home.html").is_file()
    assert hub_config.JupyterHub.template_vars["gpu_map_service"] == SESSIONS_SERVICE


def test_the_roles_are_the_ones_the_services_document(hub_config, catalog_mount):
    roles = hub_config.JupyterHub.load_roles
    names = [role["name"] for role in roles]
    assert len(names) == len(set(names)), "JupyterHub refuses a role defined twice"
    culler = [role for role in roles if role["name"] == CULLER]
    assert [role["services"] for role in culler] == [[CULLER]]
    expected = [
        *culler,
        sessions_service_role(job_service=JOB_SERVICE),
        # Every user may also read and answer their own reclaim warnings.
        *with_reclaim_access(job_service_roles()),
        *course_roles(gpuspawner.policy.load_catalog(catalog_mount)),
    ]
    assert roles == expected
    # The instructors of the demo course ML101 get their course's role.
    assert any(name.startswith("course-ml101") for name in names), names
    assert hub_config.JupyterHub.custom_scopes == hub_custom_scopes()
    assert hub_config.Spawner.server_token_scopes == job_server_token_scopes()


def test_every_scope_of_every_role_exists_in_jupyterhub(hub_config, monkeypatch):
    from jupyterhub import scopes

    # The hub's own table, with the custom scopes defined as the hub defines them at start.
    monkeypatch.setattr(scopes, "scope_definitions", dict(scopes.scope_definitions))
    scopes.define_custom_scopes(hub_config.JupyterHub.custom_scopes)
    services = set(services_by_name(hub_config))
    for role in hub_config.JupyterHub.load_roles:
        scopes._check_scopes_exist(role["scopes"], who_for=f"role {role['name']}")
        assert set(role.get("services", [])) <= services, role
    scopes._check_scopes_exist(hub_config.Spawner.server_token_scopes, who_for="server tokens")


def test_user_servers_relay_run_as_job_to_the_job_services_kubernetes_service(hub_config):
    [service] = [d for d in manifests("job-service.yaml") if d["kind"] == "Service"]
    [port] = service["spec"]["ports"]
    assert hub_config.KubeSpawner.environment["JUPYTER_TO_JOB_SERVICE_URL"] == (
        job_service_url(port["port"], host=service["metadata"]["name"], name=JOB_SERVICE)
    )
    assert services_by_name(hub_config)[JOB_SERVICE]["url"] == (
        f"http://{service['metadata']['name']}:{port['port']}"
    )


def test_the_course_page_reads_students_jobs_from_the_job_services_kubernetes_service(
    hub_config,
):
    # Given the shipped values, the course-sessions service in the hub pod
    command = services_by_name(hub_config)[SESSIONS_SERVICE]["command"]
    # then it is told where the job service answers: its Kubernetes Service's name and
    # port (job-service.yaml), under the job service's hub prefix; without it the course
    # page says it reads no Run as Job jobs.
    docs = manifests("job-service.yaml")
    [service] = [d for d in docs if d["kind"] == "Service"]
    [port] = service["spec"]["ports"]
    assert "--job-service-url" in command, command
    url = command[command.index("--job-service-url") + 1]
    assert url == job_service_url(port["port"], host=service["metadata"]["name"], name=JOB_SERVICE)
    # and its token may read the students' jobs there (and nothing more of it) ...
    [role] = [
        r for r in hub_config.JupyterHub.load_roles if r.get("services") == [SESSIONS_SERVICE]
    ]
    assert set(role["scopes"]) - set(sessions_service_role()["scopes"]) == {
        "custom:jupyter-to-job:read:jobs",
        f"access:services!service={JOB_SERVICE}",
    }
    # ... and the job service's network policy admits the hub pod it runs in.
    [rule] = one(docs, "NetworkPolicy", JOB_SERVICE)["spec"]["ingress"]
    hub_pod = {"component": "hub", "app": "jupyterhub"}
    assert any(
        peer["podSelector"]["matchLabels"].items() <= hub_pod.items() for peer in rule["from"]
    )


@pytest.mark.k8s
@pytest.mark.usefixtures("kubespawner_env")
async def test_a_user_pod_gets_no_service_account_token(hub_config, catalog_mount):
    # Given GPUSpawner configured as the chart configures it (the catalog where mounted)
    config = copy.deepcopy(hub_config)
    config.GPUAdmission.catalog_path = str(catalog_mount)
    config.KubeSpawner.cmd = ["jupyterhub-singleuser"]
    spawner = without_a_hub(GPUSpawner, "ada", config)
    # when it makes a user's pod
    pod = await spawner.get_pod_manifest()
    # then no token is mounted, whatever the service account
    assert pod.spec.automount_service_account_token is False
    assert pod.spec.service_account_name is None
    assert hub_config.KubeSpawner.automount_service_account_token is False


@pytest.mark.k8s
@pytest.mark.usefixtures("kubespawner_env")
async def test_without_the_setting_a_user_pod_would_get_a_token(hub_config, catalog_mount):
    # The check above can fail: with a service account and no setting, KubeSpawner mounts it.
    config = copy.deepcopy(hub_config)
    config.GPUAdmission.catalog_path = str(catalog_mount)
    config.KubeSpawner.cmd = ["jupyterhub-singleuser"]
    del config.KubeSpawner["automount_service_account_token"]
    config.KubeSpawner.service_account = "default"
    pod = await without_a_hub(GPUSpawner, "ada", config).get_pod_manifest()
    assert pod.spec.automount_service_account_token is None  # the token is mounted


def test_single_sign_on_adds_no_second_instructor_role(chart_hub, catalog_mount):
    values = shipped_values(K8S / "sso.yaml")
    config = chart_hub.run(values, mounts={catalog_mount_path(values): catalog_mount})
    names = [role["name"] for role in config.JupyterHub.load_roles]
    assert len(names) == len(set(names)), names
    assert config.JupyterHub.authenticator_class == "gpuspawner.sso.CampusOAuthenticator"


def test_a_broken_extra_config_fails_the_hub_start(chart_hub, catalog_mount):
    # The chart runs hub.extraConfig as it is: an environment variable the values never
    # give the hub pod stops the hub, and this test would see it.
    values = shipped_values()
    del values["hub"]["extraEnv"]["POD_IP"]
    with pytest.raises(KeyError, match="POD_IP"):
        chart_hub.run(values, mounts={catalog_mount_path(values): catalog_mount})


# -- the experimental zone: the hub pod mounts its claim where the service wipes it -------------

ZONE_OVERLAY = K8S / "experimental-zone.yaml"
DEMO_ZONE = 'experimental_zone: {wipe_at: "03:00", warning: 2h}'


def zone_catalog_mount(tmp_path: Path, volume: str) -> Path:
    """The course-catalog ConfigMap of the demo catalog with the zone on ``volume``."""
    folder = tmp_path / "zone-catalog"
    folder.mkdir(exist_ok=True)
    text = DEMO_CATALOG.read_text()
    assert DEMO_ZONE in text
    zone = DEMO_ZONE.replace("}", f", volume: {volume!r}}}")
    (folder / "catalog.yaml").write_text(text.replace(DEMO_ZONE, zone))
    return folder


def hub_pod(values: dict[str, Any]) -> dict[str, Any]:
    """The hub pod's volumes and its container's mounts, as the chart renders them
    (``hub.extraVolumes`` and ``hub.extraVolumeMounts`` beside the chart's own)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hub"},
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": "hub"}},
                {"name": "secret", "secret": {"secretName": "hub"}},
                {"name": "pvc", "persistentVolumeClaim": {"claimName": "hub-db-dir"}},
                *values["hub"]["extraVolumes"],
            ],
            "containers": [
                {
                    "name": "hub",
                    "image": "hub",
                    "volumeMounts": [
                        {
                            "name": "config",
                            "mountPath": "/usr/local/etc/jupyterhub/jupyterhub_config.py",
                            "subPath": "jupyterhub_config.py",
                        },
                        {"name": "secret", "mountPath": "/usr/local/etc/jupyterhub/secret/"},
                        {"name": "pvc", "mountPath": "/srv/jupyterhub"},
                        *values["hub"]["extraVolumeMounts"],
                    ],
                }
            ],
        },
    }


def server_zone_mount(catalog_folder: Path, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The zone's volume and mount in ``user``'s try-out server pod, as admission renders
    them (the same function GPUAdmission.grant_server calls)."""
    from gpuspawner.policy.storage import kubernetes_volumes, parse_mounts, parse_storage_source

    catalog = gpuspawner.policy.load_catalog(catalog_folder)
    [profile] = [p for p in catalog.standing if p.id == "try-out"]
    volumes, mounts = kubernetes_volumes(
        parse_mounts(profile.storage),
        lambda text: text.replace("{username}", user),
        parse_storage_source(catalog.settings.experimental_zone.volume),
    )
    [entry] = [m for m in profile.storage if m.source == "experimental"]
    return (
        next(v for v in volumes if v["name"] == entry.name),
        next(m for m in mounts if m["name"] == entry.name),
    )


@pytest.mark.parametrize(
    ("volume", "hub_sub_path"),
    [("pvc:experimental-zone", None), ("pvc:experimental-zone/spring-term", "spring-term")],
)
def test_with_the_zone_overlay_the_hub_pod_mounts_the_zone_where_the_service_wipes_it(
    volume, hub_sub_path, chart_hub, tmp_path
):
    # Given a catalog whose experimental zone is on a claim, deployed with the zone overlay
    # (the claim's sub-path, if the catalog names one, set on the hub's mount too)
    catalog = zone_catalog_mount(tmp_path, volume)
    values = shipped_values(ZONE_OVERLAY)
    if hub_sub_path:
        [zone_mount] = [
            m for m in values["hub"]["extraVolumeMounts"] if m["name"] == "experimental-zone"
        ]
        zone_mount["subPath"] = hub_sub_path
    assert schema_errors(values) == []
    # When the chart's hub configuration runs
    config = chart_hub.run(values, mounts={catalog_mount_path(values): catalog})

    # Then the course-sessions service is told to wipe where the hub pod mounts the zone's
    # claim, read-write
    command = services_by_name(config)[SESSIONS_SERVICE]["command"]
    root = command[command.index("--experimental-root") + 1]
    pod = hub_pod(values)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    [mount] = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["mountPath"] == root]
    assert not mount.get("readOnly")
    # on the very claim a student's try-out server mounts their folder of
    server_volume, server_mount = server_zone_mount(catalog, "ana")
    assert (
        volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
        == (server_volume["persistentVolumeClaim"]["claimName"])
    )
    # at the layout the wipe expects: <root>/<user>/<entry> is the server's sub-path
    assert server_mount["subPath"] == "/".join(
        p for p in (mount.get("subPath"), "ana", server_mount["name"]) if p
    )
    # And the hub pod mounts no other claim of people's (no home: claim-<user>), and the
    # chart's own database claim only
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"hub-db-dir", server_volume["persistentVolumeClaim"]["claimName"]}
    # And the hub pod is valid Kubernetes
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(pod, version, strict=True)


def test_the_wipe_through_the_hubs_mount_empties_the_folder_a_server_wrote_into(
    chart_hub, tmp_path
):
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from gpuspawner.policy.zones import wipe_schedule
    from gpuspawner.sessions.audit import AuditLog
    from gpuspawner.sessions.zone_wipe import ExperimentalZoneWiper

    # Given the zone's claim and ana's home claim as folders (what the storage holds), and
    # the hub deployed with the zone overlay
    catalog_folder = zone_catalog_mount(tmp_path, "pvc:experimental-zone")
    values = shipped_values(ZONE_OVERLAY)
    config = chart_hub.run(values, mounts={catalog_mount_path(values): catalog_folder})
    command = services_by_name(config)[SESSIONS_SERVICE]["command"]
    root = command[command.index("--experimental-root") + 1]
    storage = tmp_path / "storage"
    home = storage / "claim-ana"
    home.mkdir(parents=True)
    (home / "thesis.tex").write_text("my thesis")
    # When ana's try-out server writes into its zone mount
    server_volume, server_mount = server_zone_mount(catalog_folder, "ana")
    claim = storage / server_volume["persistentVolumeClaim"]["claimName"]
    written = claim / server_mount["subPath"] / "model.pt"
    written.parent.mkdir(parents=True)
    written.write_bytes(b"weights")
    # and the service, in the hub pod, runs its round at the wipe hour over what the hub
    # pod sees at the root it is given
    [mount] = [
        m
        for m in hub_pod(values)["spec"]["containers"][0]["volumeMounts"]
        if m["mountPath"] == root
    ]
    seen_by_hub = claim / (mount.get("subPath") or "")
    catalog = gpuspawner.policy.load_catalog(catalog_folder)
    zone = ZoneInfo(catalog.settings.timezone)
    now = datetime.now(zone)
    wipe_at = wipe_schedule(catalog.settings.experimental_zone, zone, now).next
    entries = ExperimentalZoneWiper(seen_by_hub, AuditLog(tmp_path / "audit.jsonl")).round(
        catalog, wipe_at + timedelta(minutes=1)
    )
    # Then her file is gone (her folder of the zone stays: the kubelet makes the sub-path
    # again for her next server), and her home is intact
    assert [(e["action"], e["user"]) for e in entries] == [("zone-wipe", "ana")]
    assert not written.exists() and (claim / "ana").is_dir()
    assert (home / "thesis.tex").read_text() == "my thesis"


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ("no overlay", "the hub pod does not mount it"),
        ("read-only", "read-only, so the course-sessions service could not wipe it"),
        ("sub-path", "give its mount no subPath"),
        ("home claim", "is the claim of people's homes, which the daily wipe would empty"),
        ("a home mounted", "The hub pod mounts the claim 'claim-ana' of people's homes"),
    ],
)
def test_a_zone_the_hub_pod_does_not_mount_as_servers_do_stops_the_hub(
    change, sentence, chart_hub, tmp_path
):
    # Given a catalog whose experimental zone is on the claim experimental-zone
    catalog = zone_catalog_mount(tmp_path, "pvc:experimental-zone")
    values = shipped_values(*([] if change == "no overlay" else [ZONE_OVERLAY]))
    [zone_mount] = [
        m for m in values["hub"]["extraVolumeMounts"] if m["name"] == "experimental-zone"
    ] or [{}]
    if change == "read-only":
        zone_mount["readOnly"] = True
    elif change == "sub-path":
        zone_mount["subPath"] = "ana"
    elif change == "home claim":
        # people's homes on one static claim, as z2jh's static storage does (<user> below)
        values["singleuser"]["storage"] = {
            **values["singleuser"]["storage"],
            "type": "static",
            "static": {"pvcName": "experimental-zone", "subPath": "{username}"},
        }
    elif change == "a home mounted":
        # ana's home claim (z2jh's dynamic claim-{username}{servername}) beside the zone
        values["hub"]["extraVolumes"].append(
            {"name": "ana-home", "persistentVolumeClaim": {"claimName": "claim-ana"}}
        )
    # When the chart's hub configuration runs, then the hub does not start, and says why
    with pytest.raises(ValueError, match=re.escape(sentence)):
        chart_hub.run(values, mounts={catalog_mount_path(values): catalog})


# -- the job service: its configuration, its RBAC, its pods ------------------------------------


def job_service_config_file(tmp_path: Path, overlay: Path) -> Path:
    """The job service's config file as its pod sees it: the ConfigMap's file, with the
    gpu-sharing ConfigMap (made from ``overlay``) at its mount point under ``tmp_path``."""
    docs = manifests("job-service.yaml")
    text = one(docs, "ConfigMap", "jupyter-to-job-config")["data"]["jupyter_to_job_config.py"]
    sharing = tmp_path / "sharing"
    sharing.mkdir()
    (sharing / "values.yaml").write_text(overlay.read_text())
    mount = "/etc/jupyter-to-job/sharing/"
    assert mount in text
    path = tmp_path / "jupyter_to_job_config.py"
    path.write_text(text.replace(mount, f"{sharing}/"))
    return path


@pytest.mark.parametrize("overlay", sorted((K8S / "backends").glob("*.yaml")), ids=lambda p: p.stem)
def test_the_job_service_admits_with_the_hubs_settings(overlay, tmp_path, chart_hub, catalog_mount):
    # Given the hub installed with a back end, and the job service given the same file
    values = shipped_values(overlay)
    hub = chart_hub.run(values, mounts={catalog_mount_path(values): catalog_mount})
    app = JobServiceApp()
    app.initialize([f"--JobServiceApp.config_file={job_service_config_file(tmp_path, overlay)}"])
    # then both admit with the same catalog and the same sharing back end
    assert app.config.GPUAdmission == hub.GPUAdmission
    assert app.executor_class.__name__ == "KubernetesExecutor"
    # and jobs run from the user image, with no service account of their own
    assert app.config.KubernetesExecutor.image == hub.KubeSpawner.image
    assert app.config.KubernetesExecutor.service_account is None
    # and it listens where the hub and the Service expect it
    assert f"http://{JOB_SERVICE}:{app.port}" == services_by_name(hub)[JOB_SERVICE]["url"]
    assert app.ip == "0.0.0.0"


def test_the_job_services_pod_gets_the_hubs_token_for_it():
    docs = manifests("job-service.yaml")
    deployment = one(docs, "Deployment", JOB_SERVICE)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "hub",
        "key": f"hub.services.{JOB_SERVICE}.apiToken",
    }
    assert env["JUPYTERHUB_API_URL"]["value"] == "http://hub:8081/hub/api"
    assert env["JUPYTERHUB_SERVICE_PREFIX"]["value"] == f"/services/{JOB_SERVICE}/"
    assert pod["serviceAccountName"] == JOB_SERVICE
    # z2jh's hub NetworkPolicy lets it call the hub's API
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["hub.jupyter.org/network-access-hub"] == "true"
    # It runs from the hub image, which has the [hub] extra.
    values = shipped_values()
    assert container["image"] == f"{values['hub']['image']['name']}:{values['hub']['image']['tag']}"


# What KubernetesExecutor sends to the API (jupyter_to_job/executors/kubernetes.py), as
# (scope, API group, resource, verb):
EXECUTOR_REQUESTS = {
    ("namespace", "batch", "jobs", "create"),  # execute
    ("namespace", "batch", "jobs", "get"),  # _read_job, still_running, reattach, _create on 409
    ("namespace", "batch", "jobs", "patch"),  # _expire_later: ttlSecondsAfterFinished
    ("namespace", "batch", "jobs", "delete"),  # _delete_job
    ("namespace", "", "configmaps", "create"),  # execute: the notebook and job.json
    ("namespace", "", "configmaps", "get"),  # _create on 409
    ("namespace", "", "configmaps", "patch"),  # execute: owned by the Job
    ("namespace", "", "configmaps", "delete"),  # execute: the Job could not be made
    # The runner's per-job upload token (make_upload_secret), like the ConfigMap, plus a
    # PUT that replaces an earlier try's Secret (_replace).
    ("namespace", "", "secrets", "create"),
    ("namespace", "", "secrets", "get"),
    ("namespace", "", "secrets", "update"),
    ("namespace", "", "secrets", "patch"),
    ("namespace", "", "secrets", "delete"),
    ("namespace", "", "pods", "list"),  # _watch_pods; cluster_pool_reader
    ("namespace", "", "pods", "watch"),  # _watch_pods
    ("namespace", "", "pods/log", "get"),  # _read_log
    ("namespace", "resource.k8s.io", "resourceclaimtemplates", "create"),  # execute (DRA)
    ("cluster", "", "nodes", "list"),  # cluster_pool_reader
}


def granted_to(service_account: str, docs: list[dict[str, Any]]) -> set[tuple[str, ...]]:
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


def test_the_job_services_rbac_grants_exactly_what_the_executor_does():
    docs = manifests("job-service.yaml") + manifests("rbac.yaml")
    assert granted_to(JOB_SERVICE, docs) == EXECUTOR_REQUESTS
    # The hub's service account gets none of it: it never creates Jobs.
    assert not any(resource == "jobs" for _, _, resource, _ in granted_to("hub", docs))


def test_the_table_names_every_resource_the_executor_touches_and_no_other():
    # The table above is read from the executor's source; a resource it starts to use
    # (events, say) shows here before it shows as a 403 in a cluster, and one it stops
    # using before the service keeps a permission it no longer needs.
    source = (ROOT / "jupyter_to_job" / "executors" / "kubernetes.py").read_text()
    paths = re.findall(r"\"(/apis?/[^\"]*)\"", source) + re.findall(r"f\"(/apis?/[^\"]*)\"", source)
    paths += re.findall(r"f\"\{self\._pods_path\}/\{\w+\}(/\w+)\"", source)
    used = set()
    for path in paths:
        if path.startswith("/api"):
            resource = path.rstrip("/").split("/")[-1]
            resource = re.sub(r"\{.*\}", "", resource) or path.rstrip("/").split("/")[-2]
            used.add(resource)
        else:
            used.add("pods/" + path.strip("/"))
    used = {name for name in used if name and not name.startswith("{")}
    assert used == {resource for _, _, resource, _ in EXECUTOR_REQUESTS}


def test_a_job_pod_gets_no_service_account_token(tmp_path):
    from gpuspawner.backends import cpu_only_plan
    from jupyter_to_job.k8s_objects import make_job

    overlay = K8S / "backends" / "whole.yaml"
    app = JobServiceApp()
    app.initialize([f"--JobServiceApp.config_file={job_service_config_file(tmp_path, overlay)}"])
    executor = app.config.KubernetesExecutor
    job = make_job(
        job_id="j1",
        owner="ada",
        image=executor.image,
        plan=cpu_only_plan(),
        service_account=executor.service_account,
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod


def test_the_job_services_network_policy_admits_its_callers_and_job_pods_reach_it(tmp_path):
    from gpuspawner.backends import cpu_only_plan
    from jupyter_to_job.k8s_objects import make_job

    docs = manifests("job-service.yaml")
    [rule] = one(docs, "NetworkPolicy", JOB_SERVICE)["spec"]["ingress"]
    selectors = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]

    def admitted(labels: dict[str, str]) -> bool:
        return any(selector.items() <= labels.items() for selector in selectors)

    # Job pods, as the executor labels them, upload their outputs to the Service
    job = make_job(job_id="j1", owner="ada", image="user", plan=cpu_only_plan())
    assert admitted(job["spec"]["template"]["metadata"]["labels"])
    app = JobServiceApp()
    overlay = K8S / "backends" / "whole.yaml"
    app.initialize([f"--JobServiceApp.config_file={job_service_config_file(tmp_path, overlay)}"])
    [port] = one(docs, "Service", JOB_SERVICE)["spec"]["ports"]
    assert app.config.KubernetesExecutor.upload_url == (
        job_service_url(port["port"], host=JOB_SERVICE, name=JOB_SERVICE)
    )
    # User servers (KubeSpawner's component label) and the proxy call it too, and the hub
    # checks every minute that it answers (JupyterHub.check_services_health); nobody else.
    assert admitted({"component": "singleuser-server", "app": "jupyterhub"})
    assert admitted({"component": "proxy", "app": "jupyterhub"})
    assert admitted({"component": "hub", "app": "jupyterhub"})
    assert not admitted({"component": "autohttps", "app": "jupyterhub"})
    assert not admitted({"component": "user-scheduler", "app": "jupyterhub"})


def api_permission(method: str, path: str, query: list[tuple[str, Any]]) -> tuple[str, ...]:
    """The RBAC (scope, API group, resource, verb) that an API request needs."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    scope = "cluster"
    if rest[0] == "namespaces" and len(rest) > 2:
        scope, rest = "namespace", rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method == "GET":
        watch = any(key == "watch" and str(value) == "true" for key, value in query)
        verb = "watch" if watch else "get" if len(rest) > 1 else "list"
    else:
        verb = verbs[method]
    return scope, group, resource, verb


def test_api_permission_reads_requests_as_rbac_does():
    assert api_permission("GET", "/api/v1/nodes", []) == ("cluster", "", "nodes", "list")
    pods = "/api/v1/namespaces/campus/pods"
    assert api_permission("GET", pods, [("watch", "true")])[3] == "watch"
    assert api_permission("GET", f"{pods}/p/log", [])[2:] == ("pods/log", "get")
    jobs = "/apis/batch/v1/namespaces/campus/jobs/j"
    assert api_permission("PATCH", jobs, []) == ("namespace", "batch", "jobs", "patch")


@pytest.mark.k8s
async def test_what_the_executor_sends_to_the_cluster_is_granted(
    k8s_cluster, k8s_controls, tmp_path, monkeypatch
):
    """On the emulator, a job that completes and one that is stopped, and the GPU pool's
    read: every request the executor makes is one the job service's RBAC allows."""
    import nbformat

    from jupyter_to_job.executors.kube_client import KubeClient
    from jupyter_to_job.executors.kubernetes import KubernetesExecutor
    from jupyter_to_job.manager import JobManager
    from jupyter_to_job.models import CreateJob, JobStatus
    from tests.support import eventually
    from tests.support.job_managers import finished, shut_down
    from tests.support.k8s_job_pods import JOB_PODS, PodProcesses, k8s_job_config, kill_kernels
    from tests.support.notebooks import notebook, wait_for_file

    sent: set[tuple[str, ...]] = set()
    send = KubeClient._send

    async def recorded(self: KubeClient, method: str, path: str, **options: Any) -> Any:
        sent.add(api_permission(method, path, options.get("query") or []))
        return await send(self, method, path, **options)

    monkeypatch.setattr(KubeClient, "_send", recorded)
    pods_dir = tmp_path / "pods"
    k8s_controls.add_gpu_nodes(1, product="NVIDIA-A100-SXM4-80GB", gpu_count=4)
    k8s_controls.run_processes(PodProcesses(match=JOB_PODS, workdir=pods_dir))
    config = k8s_job_config(k8s_cluster.kubeconfig, ttl_seconds_after_finished=60)
    manager = JobManager(root_dir=str(tmp_path / "jobs"), config=config)
    await manager.start()
    try:

        async def submit(nb: Any) -> str:
            request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"])
            return (await manager.create("ada", request, notebook=nbformat.writes(nb))).job_id

        done = await finished(manager, await submit(notebook("print('one')")))
        assert done.status is JobStatus.COMPLETED, done.status_message
        waiting = await submit(notebook("print('ready')\n" + wait_for_file(tmp_path / "never")))
        await eventually(
            lambda: "ready" in manager.read_log(waiting).data, what="the second job to run"
        )
        await manager.stop(waiting)
        stopped = await finished(manager, waiting)
        assert stopped.status is JobStatus.STOPPED, stopped.status_message
        await KubernetesExecutor.cluster_pool_reader(config)()
    finally:
        await shut_down([manager])
        kill_kernels(pods_dir)

    granted = granted_to(JOB_SERVICE, manifests("job-service.yaml") + manifests("rbac.yaml"))
    assert sent - granted == set()
    # The scenario went the whole way: created, followed, expired, deleted, and the pool.
    assert {
        ("namespace", "batch", "jobs", "create"),
        ("namespace", "", "pods", "watch"),
        ("namespace", "", "pods/log", "get"),
        ("namespace", "batch", "jobs", "patch"),
        ("namespace", "batch", "jobs", "delete"),
        ("cluster", "", "nodes", "list"),
    } <= sent


# -- (c) the manifests against Kubernetes' OpenAPI schemas -------------------------------------


def values_snippets() -> list[dict[str, Any]]:
    """The Kubernetes parts of our values, each in an object Kubernetes validates."""
    values = load_yaml(K8S / "values.yaml")
    hub = values["hub"]
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "values-hub-ingress"},
            "spec": {"podSelector": {}, "ingress": hub["networkPolicy"]["ingress"]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "values-singleuser-egress"},
            "spec": {"podSelector": {}, "egress": values["singleuser"]["networkPolicy"]["egress"]},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "values-hub"},
            "spec": {
                "volumes": hub["extraVolumes"],
                "containers": [
                    {
                        "name": "hub",
                        "image": "hub",
                        "volumeMounts": hub["extraVolumeMounts"],
                        "env": [{"name": k, **v} for k, v in hub["extraEnv"].items()],
                    }
                ],
            },
        },
    ]


def all_objects() -> list[tuple[str, dict[str, Any]]]:
    named = [(f"rbac.yaml {d['kind']}", d) for d in manifests("rbac.yaml")]
    named += [(f"job-service.yaml {d['kind']}", d) for d in manifests("job-service.yaml")]
    named += [(f"values.yaml {d['metadata']['name']}", d) for d in values_snippets()]
    return named


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_kubernetes(version):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    problems = []
    for name, manifest in all_objects():
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            problems.append(f"{name}: {error.message}")
    assert problems == []


def test_an_invalid_manifest_fails_kubernetes_validation():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    role = one(manifests("job-service.yaml"), "Role", JOB_SERVICE)
    role["rules"][0]["verb"] = role["rules"][0].pop("verbs")  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(role, KUBERNETES_VERSIONS[-1], strict=True)


# -- the images ------------------------------------------------------------------------------


def dockerfile_stages(path: Path) -> list[tuple[str, list[str]]]:
    """(base image, instructions) of each stage, ARGs before the first FROM expanded."""
    args: dict[str, str] = {}
    stages: list[tuple[str, list[str]]] = []
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif instruction == "FROM":
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest.split()[0])
            stages.append((base, []))
        else:
            stages[-1][1].append(line)
    return stages


def test_the_user_image_is_a_pinned_docker_stacks_image_with_both_extensions():
    stages = dockerfile_stages(IMAGES / "user.Dockerfile")
    base, steps = stages[-1]
    assert re.fullmatch(r"quay\.io/jupyter/[a-z-]+-notebook:\d{4}-\d{2}-\d{2}", base), base
    # The project with the singleuser extra, from a wheel that carries the lab extension,
    # and a build that fails when either extension is missing.
    assert any('"${wheel}[singleuser]"' in step for step in steps), steps
    assert any(
        "jupyter server extension list" in step and "jupyter_to_job" in step for step in steps
    )
    assert any(
        "labextension list" in step and "@campus-gpu-hub/jupyter-to-job" in step for step in steps
    )
    wheel_steps = stages[0][1]
    assert any("nodejs" in step for step in wheel_steps), "the lab extension needs Node.js"
    assert any("pip wheel" in step for step in wheel_steps)


def test_the_extras_the_images_install_exist_and_name_what_each_needs():
    setup = (ROOT / "setup.py").read_text()
    assert '"singleuser": [JUPYTERHUB, JUPYTERLAB]' in setup
    hub_base, hub_steps = dockerfile_stages(IMAGES / "hub.Dockerfile")[-1]
    assert hub_base == "quay.io/jupyterhub/k8s-hub:4.4.0"
    assert any('"${wheel}[hub]"' in step for step in hub_steps), hub_steps


def test_servers_and_jobs_run_from_the_user_image(tmp_path):
    values = shipped_values()
    image = f"{values['singleuser']['image']['name']}:{values['singleuser']['image']['tag']}"
    assert values["singleuser"]["image"]["name"].endswith("/campus-gpu-hub/user")
    app = JobServiceApp()
    config = job_service_config_file(tmp_path, K8S / "backends" / "whole.yaml")
    app.initialize([f"--JobServiceApp.config_file={config}"])
    assert app.config.KubernetesExecutor.image == image
    assert "user.Dockerfile" in (K8S / "values.yaml").read_text()


def test_the_image_builds_send_no_local_environment():
    for name in ("user", "hub"):
        ignored = (IMAGES / f"{name}.Dockerfile.dockerignore").read_text().split()
        assert {".venv", "**/node_modules", ".git"} <= set(ignored)
