"""Campus single sign-on: the local hub (hub_config/local/) logging in through OpenID Connect.

People, their groups and their course enrolment come from the campus identity provider
(Keycloak, Azure AD / Entra ID, or any OpenID Connect provider) at every login; see
README.md beside this file. Two ways to run it:

- ``make demo-sso``: no settings. The hub starts a stand-in campus provider
  (campus_idp/, on http://127.0.0.1:8010) as a managed service, with the demo people of
  campus_idp/demo_users.json (password ``campus-demo``).
- A real provider: set the variables below, then ``jupyterhub -f
  hub_config/sso/jupyterhub_config.py``. The client in the provider must allow the
  redirect URI ``<CAMPUS_HUB_URL>/hub/oauth_callback`` and release a ``groups`` claim.

Variables:

- ``CAMPUS_OIDC_ISSUER``: the issuer URL (Keycloak: ``https://sso.example.edu/realms/campus``;
  Azure AD: ``https://login.microsoftonline.com/<tenant>/v2.0``). Unset: the demo provider.
- ``CAMPUS_OIDC_CLIENT_ID``, ``CAMPUS_OIDC_CLIENT_SECRET`` (or ``..._SECRET_FILE``).
- ``CAMPUS_HUB_URL``: the hub's public URL (default ``http://127.0.0.1:<port>``).
- ``CAMPUS_OIDC_GROUPS_CLAIM``: where the groups are in the userinfo response (``groups``;
  Keycloak realm roles: ``realm_access.roles``).
- ``CAMPUS_GROUP_ALIASES``: a JSON object renaming the provider's group values to hub
  groups, such as ``{"/staff/hpc": "admins"}`` (Azure AD sends object ids).
"""

import json
import os
import shutil
import sys
from pathlib import Path

from gpuspawner.persistent_secret import persistent_secret
from gpuspawner.sso import CampusOAuthenticator, oidc_endpoints

c = get_config()  # noqa: F821

HERE = Path(__file__).resolve().parent
BASE_CONFIG = Path(
    os.environ.get("CAMPUS_BASE_CONFIG", HERE.parent / "local" / "jupyterhub_config.py")
)

# The local hub, without its demo authenticator and its hand-made groups.
os.environ["GPUSPAWNER_DEMO_AUTH"] = "sso"
load_subconfig(str(BASE_CONFIG))  # noqa: F821

RUNTIME = Path(os.environ.get("GPUSPAWNER_DEMO_RUNTIME", Path.cwd()))
HUB_URL = os.environ.get("CAMPUS_HUB_URL", f"http://127.0.0.1:{c.JupyterHub.port}").rstrip("/")

c.JupyterHub.authenticator_class = CampusOAuthenticator
auth = c.CampusOAuthenticator
auth.oauth_callback_url = f"{HUB_URL}/hub/oauth_callback"
# The course catalog in force (c.GPUAdmission.catalog_path, the hub's one setting): its
# course, research and flavor groups are kept at login.
# Enrolment follows the provider at every login (manage_groups, the authenticator's
# default): the hub defines no groups itself, and nobody is allowed or admin by name.
c.JupyterHub.load_groups = {}
c.Authenticator.allowed_users = set()
c.Authenticator.admin_users = set()
# Who may log in at all (members of any), and who is a hub admin.
auth.allowed_groups = {"students", "instructors", "researchers", "admins"}
auth.admin_groups = {"admins"}
auth.group_aliases = json.loads(os.environ.get("CAMPUS_GROUP_ALIASES") or "{}")
claim = os.environ.get("CAMPUS_OIDC_GROUPS_CLAIM", "groups")
auth.auth_state_groups_key = f"oauth_user.{claim}"
# CampusOAuthenticator's defaults do the rest: PKCE, the scopes openid, profile, email and
# groups, and preferred_username as the hub user name.

issuer = os.environ.get("CAMPUS_OIDC_ISSUER")
if issuer:
    auth.client_id = os.environ["CAMPUS_OIDC_CLIENT_ID"]
    secret_file = os.environ.get("CAMPUS_OIDC_CLIENT_SECRET_FILE")
    auth.client_secret = (
        Path(secret_file).read_text().strip()
        if secret_file
        else os.environ["CAMPUS_OIDC_CLIENT_SECRET"]
    )
    auth.login_service = os.environ.get("CAMPUS_LOGIN_SERVICE", "your campus account")
    auth.update(oidc_endpoints(issuer))
else:
    # The demo: a stand-in campus provider, started and stopped by the hub.
    idp_port = int(os.environ.get("CAMPUS_IDP_PORT", "8010"))
    issuer = f"http://127.0.0.1:{idp_port}"
    hub_login_url = f"{HUB_URL}/hub/login"
    # Kept across restarts, as the provider's configuration file is.
    client_secret = persistent_secret(RUNTIME / "campus-idp-client-secret")
    idp_config = RUNTIME / "campus-idp.json"
    idp_config.write_text(
        json.dumps(
            {
                "issuer": issuer,
                "host": "127.0.0.1",
                "port": idp_port,
                "title": "Campus login (demo)",
                "clients": [
                    {
                        "client_id": "campus-gpu-hub",
                        "client_secret": client_secret,
                        "redirect_uris": [auth.oauth_callback_url],
                        # Logging out of the hub ends the campus session too, then
                        # comes back to the hub's login page.
                        "post_logout_redirect_uris": [hub_login_url],
                    }
                ],
                "users_file": str(HERE / "campus_idp" / "demo_users.json"),
            },
            indent=2,
        )
    )
    idp_config.chmod(0o600)
    node = shutil.which("node") or "node"
    c.JupyterHub.services.append(
        {
            "name": "campus-idp",
            # Through service_process, so the provider ends with the hub like every
            # service and a restarted hub finds its port free.
            "command": [
                sys.executable,
                "-m",
                "gpuspawner.core.service_process",
                "--",
                node,
                str(HERE / "campus_idp" / "idp.mjs"),
                "--config",
                str(idp_config),
            ],
            "display": False,
        }
    )
    auth.client_id = "campus-gpu-hub"
    auth.client_secret = client_secret
    # The demo directory calls its admins "hub-admins": renamed, as a real campus would.
    auth.group_aliases = {"hub-admins": "admins", **auth.group_aliases}
    auth.login_service = "the campus login (demo)"
    # The routes of the stand-in provider (its discovery document says the same; it is
    # not read here because the provider starts after this file).
    auth.authorize_url = f"{issuer}/auth"
    auth.token_url = f"{issuer}/token"
    auth.userdata_url = f"{issuer}/me"
    auth.end_session_url = f"{issuer}/session/end"
    auth.post_logout_redirect_url = hub_login_url
