"""The Zero to JupyterHub values deploy the whole hub (issue 12, item 1).

Checked against the real chart, z2jh 4.4.0: its values schema, its defaults (merged with
ours as helm merges them), its own hub configuration (``hub-files/jupyterhub_config.py``),
run with our values as the hub pod runs it, and its templates rendered by helm. The chart's
files are the reference copy in ``../shared/reference/z2jh`` (or ``$Z2JH_CHART_DIR``); the
job service and the usage database are this folder's own chart (``Chart.yaml``), rendered
by helm and checked against Kubernetes' OpenAPI schemas (1.32 to 1.34). What only a cluster
shows (Pod Security, RBAC, the API server's own checks) is in tests/k8s/test_values_*.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
import yaml
from traitlets.config import Config

import gpuspawner.policy
from gpuspawner.policy.roles import course_roles
from gpuspawner.sessions import sessions_service_role
from gpuspawner.sessions.registration import with_reclaim_access
from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job.hub import job_server_token_scopes, job_service_roles, job_service_url
from jupyter_to_job.scopes import hub_custom_scopes
from jupyter_to_job.service.app import JobServiceApp
from tests.support.z2jh_chart import (
    ADMIN_IMAGES,
    CHART_SECRETS,
    DEMO_CATALOG,
    IMAGES,
    JOB_SERVICE,
    K8S,
    ROOT,
    SESSIONS_SERVICE,
    Z2JH,
    ChartHub,
    HelmRefused,
    catalog_mount_path,
    granted_to,
    helm_merge,
    job_service_config_file,
    job_service_environment,
    load_yaml,
    manifests,
    one,
    render_campus,
    render_z2jh,
    secret_stand_in,
    services_by_name,
    shipped_values,
    z2jh_missing,
)

pytestmark = pytest.mark.skipif(z2jh_missing() is not None, reason=z2jh_missing() or "")

OVERLAYS = sorted((K8S / "backends").glob("*.yaml")) + [
    K8S / "sso.yaml",
    K8S / "experimental-zone.yaml",
]
KUBERNETES_VERSIONS = ["1.32.0", "1.33.0", "1.34.0"]
# The chart's own idle culler (cull.enabled, its default) stays on: idle servers free GPUs.
CULLER = "jupyterhub-idle-culler"


def schema_errors(values: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(load_yaml(Z2JH / "values.schema.yaml"))
    return [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(values)
    ]


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
    image = values["singleuser"]["image"]
    assert hub_config.KubeSpawner.image == f"{image['name']}:{image['tag']}"
    assert hub_config.KubeSpawner.namespace == "campus"
    assert chart_hub.http_clients == ["tornado.curl_httpclient.CurlAsyncHTTPClient"]


def test_the_job_service_and_course_sessions_are_registered(hub_config):
    from jupyterhub.services.service import Service

    services = services_by_name(hub_config)
    assert set(services) == {JOB_SERVICE, SESSIONS_SERVICE, CULLER}
    # Every key is a field of JupyterHub's Service (init_services refuses others).
    for spec in services.values():
        assert set(spec) <= set(Service.class_trait_names()), spec

    # The job service runs in its own Deployment: the hub knows its URL and its token,
    # and its jobs page is in the Services menu as "Jobs", signed in through the hub's
    # OAuth with no more than the job scopes a person holds.
    job_service = services[JOB_SERVICE]
    assert job_service == {
        "name": JOB_SERVICE,
        "url": "http://jupyter-to-job:8766",
        "display": True,
        "info": {"display_name": "Jobs"},
        "oauth_no_confirm": True,
        "oauth_client_allowed_scopes": [
            "custom:jupyter-to-job:read:jobs",
            "custom:jupyter-to-job:write:jobs",
        ],
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
    # Its secrets travel in its environment: the pre-warm secret, and the usage database's
    # URL (with its password) for the course API's GPU-hour reports.
    password = quote(secret_stand_in("campus-gpu-hub", "usage-db-password"), safe="")
    assert sessions["environment"] == {
        "GPUSPAWNER_PREWARM_SECRET": secret_stand_in("campus-gpu-hub", "prewarm-secret"),
        "GPUSPAWNER_SESSIONS_USAGE_DB": (
            f"postgresql+psycopg://gpuhub:{password}@gpu-usage-db:5432/gpuhub"
        ),
    }
    assert (
        hub_config.GPUAdmission.usage_db_url
        == sessions["environment"]["GPUSPAWNER_SESSIONS_USAGE_DB"]
    )


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


def job_service(
    tmp_path: Path, overlay: Path, monkeypatch: pytest.MonkeyPatch, docs: list[dict[str, Any]]
) -> JobServiceApp:
    """The job service as its pod starts it: the config of ``docs`` (the rendered chart),
    the gpu-sharing ConfigMap made from ``overlay``, the Deployment's environment."""
    for name, value in job_service_environment(docs).items():
        monkeypatch.setenv(name, value)
    app = JobServiceApp()
    config = job_service_config_file(tmp_path, overlay, docs)
    app.initialize([f"--JobServiceApp.config_file={config}"])
    return app


@pytest.mark.parametrize("overlay", sorted((K8S / "backends").glob("*.yaml")), ids=lambda p: p.stem)
def test_the_job_service_admits_with_the_hubs_settings(
    overlay, tmp_path, chart_hub, catalog_mount, monkeypatch
):
    # Given the hub installed with a back end and the images an admin pushed, and the job
    # service installed with the same values and given the same back-end file
    values = shipped_values(overlay, settings=ADMIN_IMAGES)
    hub = chart_hub.run(values, mounts={catalog_mount_path(values): catalog_mount})
    app = job_service(tmp_path, overlay, monkeypatch, render_campus(overlay))
    # then both admit with the same catalog and the same sharing back end, and record
    # GPU-hours in the same usage database (the catalog's budgets count both)
    assert app.config.GPUAdmission == hub.GPUAdmission
    assert app.admission.usage_db_url == hub.GPUAdmission.usage_db_url
    assert app.admission.usage_db_url.startswith("postgresql+psycopg://")
    assert app.executor_class.__name__ == "KubernetesExecutor"
    # and jobs run from the user image, with no service account of their own
    assert app.config.KubernetesExecutor.image == hub.KubeSpawner.image
    assert app.config.KubernetesExecutor.service_account is None
    # and it listens where the hub and the Service expect it
    assert f"http://{JOB_SERVICE}:{app.port}" == services_by_name(hub)[JOB_SERVICE]["url"]
    assert app.ip == "0.0.0.0"


def test_the_jobs_page_signs_in_with_the_oauth_client_the_hub_makes_for_it(hub_config, monkeypatch):
    """Given the chart, the hub makes an OAuth client for the job service (it has a URL
    and is registered for OAuth), and the service's pod signs people in to its jobs page
    as that client, with the callback the hub allows: no 'cannot be empty' client id and
    no redirect the hub refuses."""
    from jupyterhub.services.auth import HubOAuth
    from jupyterhub.services.service import Service

    spec = services_by_name(hub_config)[JOB_SERVICE]
    registered = Service(name=spec["name"], url=spec["url"])
    [container] = one(render_campus(), "Deployment", JOB_SERVICE)["spec"]["template"]["spec"][
        "containers"
    ]
    for variable in container["env"]:
        if "value" in variable:
            monkeypatch.setenv(variable["name"], variable["value"])
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "stand-in")
    pod = HubOAuth()
    assert pod.oauth_client_id == registered.oauth_client_id == f"service-{JOB_SERVICE}"
    # the hub's default callback for a service with a URL is under its prefix
    assert pod.oauth_redirect_uri == f"/services/{JOB_SERVICE}/oauth_callback"
    assert spec["oauth_client_allowed_scopes"]


def test_the_job_services_pod_gets_the_hubs_token_for_it():
    docs = render_campus()
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
    values = shipped_values(settings=ADMIN_IMAGES)
    assert container["image"] == f"{values['hub']['image']['name']}:{values['hub']['image']['tag']}"


# The modules of KubernetesExecutor that send requests to the API.
KUBERNETES_EXECUTOR_MODULES = (
    "kubernetes.py",
    "k8s_create.py",
    "k8s_settings.py",
    "queue_eviction.py",
)
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
    # The headless Service of a job on several nodes, owned by its Job as it is made.
    ("namespace", "", "services", "create"),
    ("namespace", "", "services", "get"),  # _create on 409
    ("namespace", "", "pods", "list"),  # _watch_pods; cluster_pool_reader
    ("namespace", "", "pods", "watch"),  # _watch_pods
    ("namespace", "", "pods/log", "get"),  # _read_log
    ("namespace", "resource.k8s.io", "resourceclaimtemplates", "create"),  # execute (DRA)
    # queue_eviction.read_eviction: why Kueue took a running job's GPU back (Kueue only)
    ("namespace", "kueue.x-k8s.io", "workloads", "list"),
    ("cluster", "", "nodes", "list"),  # cluster_pool_reader
}


def test_the_job_services_rbac_grants_exactly_what_the_executor_does():
    docs = render_campus() + manifests("rbac.yaml")
    assert granted_to(JOB_SERVICE, docs) == EXECUTOR_REQUESTS
    # The hub's service account gets none of it: it never creates Jobs.
    assert not any(resource == "jobs" for _, _, resource, _ in granted_to("hub", docs))


def test_the_table_names_every_resource_the_executor_touches_and_no_other():
    # The table above is read from the executor's source; a resource it starts to use
    # (events, say) shows here before it shows as a 403 in a cluster, and one it stops
    # using before the service keeps a permission it no longer needs.
    executors = ROOT / "jupyter_to_job" / "executors"
    source = "".join((executors / name).read_text() for name in KUBERNETES_EXECUTOR_MODULES)
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


def test_a_job_pod_gets_no_service_account_token(tmp_path, monkeypatch):
    from gpuspawner.backends import cpu_only_plan
    from jupyter_to_job.k8s_objects import make_job

    overlay = K8S / "backends" / "whole.yaml"
    app = job_service(tmp_path, overlay, monkeypatch, render_campus())
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


def test_the_job_services_network_policy_admits_its_callers_and_job_pods_reach_it(
    tmp_path, monkeypatch
):
    from gpuspawner.backends import cpu_only_plan
    from jupyter_to_job.k8s_objects import make_job

    docs = render_campus()
    [rule] = one(docs, "NetworkPolicy", JOB_SERVICE)["spec"]["ingress"]
    selectors = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]

    def admitted(labels: dict[str, str]) -> bool:
        return any(selector.items() <= labels.items() for selector in selectors)

    # Job pods, as the executor labels them, upload their outputs to the Service
    job = make_job(job_id="j1", owner="ada", image="user", plan=cpu_only_plan())
    assert admitted(job["spec"]["template"]["metadata"]["labels"])
    app = job_service(tmp_path, K8S / "backends" / "whole.yaml", monkeypatch, docs)
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
            "metadata": {"name": "values-hub-egress"},
            "spec": {"podSelector": {}, "egress": hub["networkPolicy"]["egress"]},
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
    named += [(f"chart {d['kind']} {d['metadata']['name']}", d) for d in render_campus()]
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


def setup_extra(setup: str, extra: str) -> list[str]:
    """The requirements setup.py lists for ``extra``: names of its constants, or strings."""
    for node in ast.walk(ast.parse(setup)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == extra:
                    assert isinstance(value, ast.List), ast.dump(value)
                    return [
                        item.id if isinstance(item, ast.Name) else item.value
                        for item in value.elts
                        if isinstance(item, ast.Name | ast.Constant)
                    ]
    raise AssertionError(f"setup.py has no {extra!r} extra")


def test_the_extras_the_images_install_exist_and_name_what_each_needs():
    setup = (ROOT / "setup.py").read_text()
    # A user's server: JupyterHub's single-user server, JupyterLab, and TensorBoard behind
    # the server's login (jupyter-server-proxy, tensorboard, tensorboardX).
    assert setup_extra(setup, "singleuser") == [
        "JUPYTERHUB",
        "JUPYTERLAB",
        "jupyter-server-proxy>=4.6,<5",
        "tensorboard>=2.21,<3",
        "tensorboardX>=2.6,<3",
    ]
    hub_base, hub_steps = dockerfile_stages(IMAGES / "hub.Dockerfile")[-1]
    assert hub_base == "quay.io/jupyterhub/k8s-hub:4.4.0"
    assert any('"${wheel}[hub]"' in step for step in hub_steps), hub_steps


def test_servers_and_jobs_run_from_the_user_image(tmp_path, monkeypatch, chart_hub, catalog_mount):
    values = shipped_values(settings=ADMIN_IMAGES)
    hub = chart_hub.run(values, mounts={catalog_mount_path(values): catalog_mount})
    assert values["singleuser"]["image"]["name"].endswith("/user")
    app = job_service(tmp_path, K8S / "backends" / "whole.yaml", monkeypatch, render_campus())
    assert app.config.KubernetesExecutor.image == hub.KubeSpawner.image
    assert "user.Dockerfile" in (K8S / "values.yaml").read_text()


# Where the shipped files name images: a key "image" (a string, or z2jh's name and tag), and
# the job service's c.KubernetesExecutor.image.
EXECUTOR_IMAGE = re.compile(r'c\.KubernetesExecutor\.image = "([^"]*)"')
THE_IMAGES = {
    "values.yaml": {
        "hub.image": {"name": "REGISTRY/campus-gpu-hub/hub", "tag": "0.1.0"},
        "singleuser.image": {"name": "REGISTRY/campus-gpu-hub/user", "tag": "0.1.0"},
    }
}
FROM_THE_VALUES = {
    "{{ .Values.hub.image.name }}:{{ .Values.hub.image.tag }}",
    "{{ .Values.singleuser.image.name }}:{{ .Values.singleuser.image.tag }}",
}
# Images of others, pinned to a release: PostgreSQL's official image for the usage database.
PINNED_PUBLIC_IMAGE = re.compile(r"docker\.io/library/postgres:\d+\.\d+")


def image_references(value: Any, where: str = "") -> list[tuple[str, Any]]:
    """(dotted path, reference) of every image named in a parsed YAML document."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if key == "image" and isinstance(item, (str, dict)):
                found.append((path, item))
            else:
                found += image_references(item, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += image_references(item, f"{where}[{index}]")
    elif isinstance(value, str):
        found += [(f"{where} (config)", match) for match in EXECUTOR_IMAGE.findall(value)]
    return found


def shipped_image_references() -> dict[str, dict[str, Any]]:
    """Every image reference of the shipped files, by file and place."""
    files = [
        *sorted(K8S.glob("*.yaml")),
        *sorted((K8S / "backends").glob("*.yaml")),
    ]
    references = {}
    for path in files:
        found = {}
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            found.update(
                (f"{index}:{where}" if index else where, ref)
                for where, ref in image_references(doc)
            )
        if found:
            references[str(path.relative_to(K8S))] = found
    return references


def test_every_image_is_named_in_one_place_of_the_values():
    # Given every file an admin installs (values.yaml, the overlays, the job service, the
    # usage database, RBAC)
    references = shipped_image_references()
    # Then the hub's and the servers' images are named once, in values.yaml, and share one
    # tag (a YAML anchor: one value to change)
    assert references.pop("values.yaml") == THE_IMAGES["values.yaml"]
    text = (K8S / "values.yaml").read_text()
    assert text.count("&release") == 1 and re.search(r"tag: \*release\b", text)
    # and the job service's Deployment and its jobs read them from there (rendered by the
    # chart, not written twice)
    job_service = references.pop("job-service.yaml")
    assert set(job_service.values()) == FROM_THE_VALUES, job_service
    # and every other image is someone else's, pinned to a release
    others = {
        f"{name} {where}": ref for name, found in references.items() for where, ref in found.items()
    }
    assert all(PINNED_PUBLIC_IMAGE.fullmatch(ref) for ref in others.values()), others


def edited_values(tmp_path: Path, registry: str, tag: str) -> Path:
    """values.yaml after an admin put their registry and tag where its comments say (the
    README's REGISTRY and TAG)."""
    text = (K8S / "values.yaml").read_text()
    assert text.count('&release "0.1.0"') == 1
    edited = text.replace("REGISTRY/", f"{registry}/").replace(
        '&release "0.1.0"', f'&release "{tag}"'
    )
    path = tmp_path / "values.yaml"
    path.write_text(edited)
    return path


def rendered_images(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Every image the rendered ``objects`` run or hand on, by object and place."""
    images = {}
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        for where, ref in image_references(obj):
            images[f"{name} {where}"] = ref
    return images


def test_with_the_registry_and_tag_set_once_every_image_comes_from_them(
    tmp_path, monkeypatch, chart_hub, catalog_mount
):
    # Given values.yaml with the admin's registry and tag, set once
    registry, tag = "registry.campus.test", "2026.2"
    values_file = edited_values(tmp_path, registry, tag)
    hub_image = f"{registry}/campus-gpu-hub/hub:{tag}"
    user_image = f"{registry}/campus-gpu-hub/user:{tag}"
    # When helm renders the hub (z2jh 4.4.0, as released) and this folder's chart with it
    campus = render_campus(values_file, images=None)
    images = rendered_images(render_z2jh(values_file) + campus)
    # Then the hub and the job service run the hub image, the image pullers pull the user
    # image, and the job service runs jobs from it
    ours = {where: ref for where, ref in images.items() if ref.startswith(registry)}
    pod = "spec.template.spec"
    assert ours == {
        f"Deployment/hub {pod}.containers[0].image": hub_image,
        f"Deployment/jupyter-to-job {pod}.containers[0].image": hub_image,
        f"DaemonSet/hook-image-puller {pod}.initContainers[0].image": user_image,
        f"DaemonSet/continuous-image-puller {pod}.initContainers[0].image": user_image,
        "ConfigMap/jupyter-to-job-config data.jupyter_to_job_config.py (config)": user_image,
    }
    # and the hub starts servers, and the job service jobs, from the user image
    values = yaml.safe_load(values_file.read_text())
    hub = chart_hub.run(
        helm_merge(load_yaml(Z2JH / "values.yaml"), values),
        mounts={catalog_mount_path(values): catalog_mount},
    )
    assert hub.KubeSpawner.image == user_image
    app = job_service(tmp_path, K8S / "backends" / "whole.yaml", monkeypatch, campus)
    assert app.config.KubernetesExecutor.image == user_image
    # and no other image is a placeholder that cannot be pulled
    others = [ref for ref in images.values() if not ref.startswith(registry)]
    assert others and not [
        ref for ref in others if re.search(r"REGISTRY|example|set-by-chartpress", ref)
    ]


@pytest.mark.parametrize(
    ("settings", "sentence"),
    [
        (None, "values.yaml still names the images REGISTRY/campus-gpu-hub/hub"),
        (
            {"hub.image.name": "registry.campus.test/gpu-hub/hub"},
            "values.yaml still names the images",
        ),
        (
            {**ADMIN_IMAGES, "singleuser.image.name": "registry.campus.test/other/user"},
            "put both in the same registry folder",
        ),
        ({**ADMIN_IMAGES, "hub.image.tag": "0.2.0"}, "give both the same tag"),
    ],
    ids=["as shipped", "half set", "two registries", "two tags"],
)
def test_the_chart_refuses_images_that_were_not_pushed_as_the_readme_says(settings, sentence):
    # Given values.yaml as shipped, or with the images set by halves
    # When the job service's chart is installed, then helm refuses with what to do, before
    # any pod exists that could not pull its image
    with pytest.raises(HelmRefused) as refused:
        render_campus(images=settings)
    assert sentence in refused.value.message
    assert "README.md" in refused.value.message or "then install again" in refused.value.message


def test_the_readme_builds_and_pushes_the_images_values_yaml_names():
    readme = (K8S / "README.md").read_text()
    values = load_yaml(K8S / "values.yaml")
    for part, dockerfile in (("hub", "hub.Dockerfile"), ("singleuser", "user.Dockerfile")):
        name = values[part]["image"]["name"].replace("REGISTRY", "$REGISTRY")
        assert f"-f hub_config/kubernetes/images/{dockerfile} -t {name}:$TAG" in readme
        assert f"docker push {name}:$TAG" in readme


def test_the_image_builds_send_no_local_environment():
    for name in ("user", "hub"):
        ignored = (IMAGES / f"{name}.Dockerfile.dockerignore").read_text().split()
        assert {".venv", "**/node_modules", ".git"} <= set(ignored)
