"""hub_config/sso/jupyterhub_config.py as JupyterHub loads it: with a real provider's issuer
(endpoints from its discovery document), and as the demo that starts the stand-in one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader

from gpuspawner.sso import CampusOAuthenticator, oidc_endpoints

from ..support.hubprocess import REPO_ROOT
from ..support.idp import start_campus_idp

SSO_CONFIG = REPO_ROOT / "hub_config" / "sso" / "jupyterhub_config.py"
CLIENT = {"client_id": "gpu-hub", "client_secret": "x", "redirect_uris": ["http://h/cb"]}
USER = {"username": "ada", "password": "pw", "groups": ["students"]}


def load_config(runtime: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch):
    for key in list(os.environ):
        if key.startswith(("CAMPUS_", "GPUSPAWNER_DEMO_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("GPUSPAWNER_DEMO_RUNTIME", str(runtime))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loader = PyFileConfigLoader(SSO_CONFIG.name, path=str(SSO_CONFIG.parent))
    return loader.load_config()


def test_a_real_provider_is_configured_from_its_discovery_document(tmp_path, monkeypatch):
    secret_file = tmp_path / "client-secret"
    secret_file.write_text("s3cret-from-a-file\n")
    with start_campus_idp(clients=[CLIENT], users=[USER], workdir=tmp_path / "idp") as idp:
        config = load_config(
            tmp_path,
            {
                "CAMPUS_OIDC_ISSUER": idp.issuer,
                "CAMPUS_OIDC_CLIENT_ID": "gpu-hub",
                "CAMPUS_OIDC_CLIENT_SECRET_FILE": str(secret_file),
                "CAMPUS_HUB_URL": "https://gpu.campus.example/",
                "CAMPUS_GROUP_ALIASES": '{"/staff/hpc": "admins"}',
            },
            monkeypatch,
        )
        discovery = idp.discovery()
    auth = config.CampusOAuthenticator
    assert config.JupyterHub.authenticator_class is CampusOAuthenticator
    assert auth.authorize_url == discovery["authorization_endpoint"]
    assert auth.token_url == discovery["token_endpoint"]
    assert auth.userdata_url == discovery["userinfo_endpoint"]
    assert (auth.client_id, auth.client_secret) == ("gpu-hub", "s3cret-from-a-file")
    assert auth.oauth_callback_url == "https://gpu.campus.example/hub/oauth_callback"
    assert auth.group_aliases == {"/staff/hpc": "admins"}
    assert auth.admin_groups == {"admins"}
    # Nobody is let in or made admin by name, and the hub defines no groups of its own
    assert config.Authenticator.allowed_users == set()
    assert config.Authenticator.admin_users == set()
    assert config.JupyterHub.load_groups == {}
    assert not [s for s in config.JupyterHub.services if s["name"] == "campus-idp"]
    # The demo course enrols nobody by name: its groups do, and its instructors' role is
    # held by its instructor group
    roles = {role["name"]: role for role in config.JupyterHub.load_roles}
    instructor = roles["course-gpu-demo-instructor"]
    assert instructor["groups"] == ["course-gpu-demo-instructors"] and instructor["users"] == []
    course = (tmp_path / "catalog" / "gpu-demo.yaml").read_text()
    assert "instructors:" not in course and "users:" not in course


def test_the_demo_starts_the_stand_in_provider_with_the_hubs_callback(tmp_path, monkeypatch):
    config = load_config(
        tmp_path, {"GPUSPAWNER_DEMO_PORT": "8123", "CAMPUS_IDP_PORT": "8124"}, monkeypatch
    )
    (idp,) = [s for s in config.JupyterHub.services if s["name"] == "campus-idp"]
    assert idp["command"][1:4] == [
        "-m",
        "gpuspawner.core.service_process",
        "--",
    ]  # ends with the hub
    assert idp["command"][5].endswith("campus_idp/idp.mjs")
    idp_config = json.loads(Path(idp["command"][-1]).read_text())
    assert idp_config["issuer"] == "http://127.0.0.1:8124"
    (client,) = idp_config["clients"]
    assert client["redirect_uris"] == ["http://127.0.0.1:8123/hub/oauth_callback"]
    assert client["client_secret"] == config.CampusOAuthenticator.client_secret
    assert Path(idp["command"][-1]).stat().st_mode & 0o077 == 0  # holds the client secret
    assert config.CampusOAuthenticator.authorize_url == "http://127.0.0.1:8124/auth"
    assert config.CampusOAuthenticator.group_aliases == {"hub-admins": "admins"}


def test_an_unreachable_or_wrong_issuer_stops_the_hub_with_what_to_check(tmp_path):
    with pytest.raises(SystemExit, match="Check CAMPUS_OIDC_ISSUER"):
        oidc_endpoints("http://127.0.0.1:9", attempts=1)
    with start_campus_idp(clients=[CLIENT], users=[USER], workdir=tmp_path) as idp:
        with pytest.raises(SystemExit, match="set CAMPUS_OIDC_ISSUER to exactly"):
            # reachable, but the provider calls itself http://127.0.0.1:<port>
            oidc_endpoints(idp.issuer.replace("127.0.0.1", "localhost"), attempts=1)
