"""How a hub registers the job service: scopes, roles, server token, and the demo config.

Also the static half of "no endpoint is anonymous": every handler verb of the service and
of the server extension is decorated to authenticate (and, in the server, to authorize),
except the service's health check.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from jupyterhub.roles import get_default_roles
from jupyterhub.scopes import _custom_scope_pattern
from traitlets.config.loader import PyFileConfigLoader

from gpuspawner.sessions.registration import reclaim_access_scopes
from jupyter_to_job.extension.handlers import extension_handlers
from jupyter_to_job.hub import (
    HUB_SERVER_TOKEN_DEFAULTS,
    job_server_token_scopes,
    job_service,
    job_service_roles,
    job_service_url,
)
from jupyter_to_job.scopes import READ_JOBS_SCOPE, WRITE_JOBS_SCOPE, hub_custom_scopes
from jupyter_to_job.service.handlers import HealthHandler, service_handlers

REPO = Path(__file__).resolve().parents[2]
VERBS = ("get", "post", "put", "patch", "delete")


def test_custom_scopes_are_valid_for_jupyterhub_and_write_implies_read():
    scopes = hub_custom_scopes()
    assert set(scopes) == {READ_JOBS_SCOPE, WRITE_JOBS_SCOPE}
    assert all(_custom_scope_pattern.match(name) for name in scopes)
    assert scopes[WRITE_JOBS_SCOPE]["subscopes"] == [READ_JOBS_SCOPE]
    assert all(definition["description"] for definition in scopes.values())


def test_the_server_token_keeps_jupyterhubs_defaults_and_adds_the_job_service_for_its_user():
    server_role = next(role for role in get_default_roles() if role["name"] == "server")
    assert set(HUB_SERVER_TOKEN_DEFAULTS) == set(server_role["scopes"])
    assert job_server_token_scopes() == [
        "users:activity!user",
        "access:servers!server",
        "access:services!service=jupyter-to-job",
        f"{READ_JOBS_SCOPE}!user",
        f"{WRITE_JOBS_SCOPE}!user",
    ]


def test_roles_give_users_their_own_jobs_and_the_service_only_group_lookups():
    user, service, admins = job_service_roles(admins=["ada"])
    assert user == {
        "name": "user",
        "description": user["description"],
        "scopes": ["self", f"{WRITE_JOBS_SCOPE}!user", "access:services!service=jupyter-to-job"],
    }
    assert service["services"] == ["jupyter-to-job"]
    assert service["scopes"] == ["read:users:groups", "read:groups"]
    assert admins["users"] == ["ada"] and set(admins["scopes"]) >= {
        READ_JOBS_SCOPE,
        WRITE_JOBS_SCOPE,
    }
    assert len(job_service_roles()) == 2  # no admins role unless someone is named


def test_the_service_entry_passes_settings_through_its_environment():
    entry = job_service(
        port=9000,
        catalog_path="/etc/courses",
        root_dir="/srv/jobs",
        simulated_gpus=[{"model": "T4", "memory": "16GiB"}],
        args=["--JobManager.max_running_jobs=8"],
    )
    assert entry["url"] == "http://127.0.0.1:9000"
    assert entry["command"][1:] == [
        "-m",
        "jupyter_to_job.service",
        "--JobManager.max_running_jobs=8",
    ]
    assert entry["environment"] == {
        "JUPYTER_TO_JOB_CATALOG": "/etc/courses",
        "JUPYTER_TO_JOB_ROOT": "/srv/jobs",
        "JUPYTER_TO_JOB_SIMULATED_GPUS": '[{"model": "T4", "memory": "16GiB"}]',
    }
    assert job_service_url(9000) == "http://127.0.0.1:9000/services/jupyter-to-job/"


def test_the_hubs_services_menu_names_the_jobs_page_jobs():
    """Given the job service's entry, the hub lists its page in the Services menu as
    'Jobs' (not 'jupyter-to-job') and signs people in to it through its OAuth, with no
    more than the job scopes they hold."""
    entry = job_service()
    assert entry["display"] is True
    assert entry["info"] == {"display_name": "Jobs"}
    assert entry["oauth_no_confirm"] is True
    assert entry["oauth_client_allowed_scopes"] == [READ_JOBS_SCOPE, WRITE_JOBS_SCOPE]


def test_the_demo_hub_wires_the_job_service(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSPAWNER_DEMO_RUNTIME", str(tmp_path))
    monkeypatch.setenv("GPUSPAWNER_PREWARM_SECRET", "test-secret")  # restored afterwards
    config = PyFileConfigLoader(
        "jupyterhub_config.py", path=str(REPO / "hub_config" / "local")
    ).load_config()
    service = next(s for s in config.JupyterHub.services if s["name"] == "jupyter-to-job")
    assert service["environment"]["JUPYTER_TO_JOB_CATALOG"] == str(tmp_path / "catalog")
    assert service["environment"]["JUPYTER_TO_JOB_ALLOCATION_LEDGER"] == str(
        tmp_path / "gpu-allocations.json"
    )
    # One GPU-hour usage record for the hub, the job service and the course-sessions service
    usage = f"sqlite:///{tmp_path / 'gpu-usage.sqlite'}"
    assert config.GPUAdmission.usage_db_url == usage
    assert service["environment"]["JUPYTER_TO_JOB_USAGE_DB"] == usage
    sessions = next(s for s in config.JupyterHub.services if s["name"] == "course-sessions")
    assert sessions["environment"]["GPUSPAWNER_SESSIONS_USAGE_DB"] == usage
    assert config.JupyterHub.custom_scopes == hub_custom_scopes()
    assert {"user", "jupyter-to-job-service", "jupyter-to-job-admins"} <= {
        role["name"] for role in config.JupyterHub.load_roles
    }
    # Each server's token calls the job service for its own user, and the course-sessions
    # service for its reclaim warning (the lab's notification and "I'm still using it")
    assert config.Spawner.server_token_scopes == (
        job_server_token_scopes() + reclaim_access_scopes()
    )
    assert "--ServerApp.jpserver_extensions=jupyter_to_job=True" in config.Spawner.args


def _handler_classes():
    for _pattern, handler, *_ in service_handlers("/services/jupyter-to-job/", api=None):
        yield "service", handler
    for _pattern, handler in extension_handlers():
        yield "extension", handler


@pytest.mark.parametrize(
    ("side", "handler"),
    list(_handler_classes()),
    ids=lambda value: getattr(value, "__name__", value),
)
def test_every_endpoint_authenticates(side, handler):
    if handler is HealthHandler:
        return  # the one anonymous endpoint, by design: {"status": "ok"} and nothing else
    verbs = [verb for verb in VERBS if verb in vars(handler)]
    assert verbs, f"{handler.__name__} defines no verb"
    for verb in verbs:
        source = inspect.getsource(getattr(handler, verb))
        assert "@web.authenticated" in source, f"{handler.__name__}.{verb} is not authenticated"
        if side == "extension":
            assert "@authorized" in source, f"{handler.__name__}.{verb} is not authorized"
            assert handler.auth_resource == "jupyter_to_job"
