"""Campus single sign-on: GenericOAuthenticator for a campus OpenID Connect provider.

Design notes: docs/design/hub.md, "gpuspawner.sso".
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from html import escape
from urllib.parse import urlencode

from jupyterhub.auth import LocalAuthenticator
from jupyterhub.utils import url_path_join
from oauthenticator.generic import GenericOAuthenticator
from oauthenticator.oauth2 import OAuthCallbackHandler
from tornado import web
from traitlets import Dict, Instance, List, Unicode, Union, default, validate

from .core.accounts import ensure_account
from .core.admission import GPUAdmission
from .policy import Catalog
from .policy.idp_groups import GroupMapping

ROLE_GROUPS = ("students", "instructors", "researchers", "admins")


class _HTMLMessage(web.HTTPError):
    """An HTTPError whose page has ``reason`` as its heading and shows ``html`` (JupyterHub's
    error page reads ``jupyterhub_html_message``); ``text`` is the plain-text message."""

    def __init__(self, status: int, text: str, html: str, reason: str):
        super().__init__(status, "%s", text, reason=reason)
        self.jupyterhub_html_message = html


def _with_sign_in_link(text: str, login_url: str) -> str:
    return (
        f"<p>{escape(text)}</p>"
        f'<p><a class="btn btn-primary" href="{escape(login_url)}">Sign in again</a></p>'
    )


class CampusCallbackHandler(OAuthCallbackHandler):
    """The OAuth callback, with refusals a person can act on."""

    def check_state(self) -> None:
        try:
            super().check_state()
        except web.HTTPError as error:
            if error.status_code != 400:
                raise
            login = self.authenticator.login_url(self.hub.base_url)
            reason = error.log_message or "state mismatch"
            text = (
                "This sign-in cannot be completed: it does not match the one this browser "
                "started (the link was altered, used twice, or is too old). Nothing was "
                "changed. Sign in again from the hub's login page."
            )
            self.log.warning("Refused an OAuth callback: %s", reason)
            raise _HTMLMessage(
                400, text, _with_sign_in_link(text, login), "Sign-in not completed"
            ) from None

    def check_error(self) -> None:
        error = self.get_argument("error", "")
        if error == "access_denied":
            login = self.authenticator.login_url(self.hub.base_url)
            text = "The sign-in was cancelled at the campus login. Nothing was changed."
            raise _HTMLMessage(403, text, _with_sign_in_link(text, login), "Sign-in cancelled")
        super().check_error()

    async def get(self) -> None:
        try:
            await super().get()
        except web.HTTPError as error:
            message = self.authenticator.custom_403_message
            if error.status_code == 403 and error.log_message == message:
                # login_user() found the account outside the allowed groups.
                # The provider's session is still open: signing in again would pass
                # straight through as the same account. The hub's logout ends it first.
                logout = url_path_join(self.hub.base_url, "logout")
                page = (
                    f"<p>{escape(message)}</p>"
                    f'<p><a class="btn btn-primary" href="{escape(logout)}">'
                    "Sign in as someone else</a></p>"
                )
                raise _HTMLMessage(403, message, page, "Not allowed on this hub") from None
            raise


class CampusOAuthenticator(GenericOAuthenticator):
    """GenericOAuthenticator whose groups follow the campus directory and the catalog."""

    callback_handler = CampusCallbackHandler

    admission = Instance(
        GPUAdmission,
        help="""The hub's admission (``c.GPUAdmission.*``): the groups its catalog names
        (course, research, flavor and profile groups) are kept from the identity
        provider's group claim. Without a catalog only role groups, aliases and
        ``keep_group_patterns`` are kept.""",
    )

    @default("admission")
    def _default_admission(self) -> GPUAdmission:
        return GPUAdmission(parent=self)

    group_aliases = Dict(
        key_trait=Unicode(),
        value_trait=Union([Unicode(), List(Unicode())]),
        config=True,
        help="""Identity-provider group values to hub group names, for example::

            {"/campus/staff/research-computing": "admins",
             "7f3c2a10-aaaa-bbbb-cccc-0123456789ab": ["students", "course-ml101-students"]}

        An aliased value is always kept, under its alias(es).
        """,
    )

    keep_group_patterns = List(
        Unicode(),
        config=True,
        help="""Regular expressions (matched in full) of further hub group names to keep,
        such as ``lab-.*`` for research groups not yet in the catalog.""",
    )

    end_session_url = Unicode(
        "",
        config=True,
        help="""The identity provider's ``end_session_endpoint`` (OpenID Connect RP-initiated
        logout), as :func:`oidc_endpoints` reads it from the discovery document. With it,
        logging out of the hub also ends the person's session at the provider, so the next
        "Sign in" on a shared lab PC asks for a password again instead of passing straight
        through. The provider must list :attr:`post_logout_redirect_url` among the client's
        ``post_logout_redirect_uris``.

        Example: ``c.CampusOAuthenticator.end_session_url = "https://login.campus.example/oidc/logout"``.
        """,
    )

    post_logout_redirect_url = Unicode(
        config=True,
        help="""Where the provider sends the browser after logging out: by default the hub's
        login page, next to ``oauth_callback_url``.

        Example: ``c.CampusOAuthenticator.post_logout_redirect_url = "https://gpu.campus.example/hub/login"``.
        """,
    )

    @default("post_logout_redirect_url")
    def _post_logout_default(self) -> str:
        callback = self.oauth_callback_url
        if not callback:
            return ""
        return callback.rsplit("/", 1)[0] + "/login"

    @default("logout_redirect_url")
    def _logout_at_the_provider(self) -> str:
        # OAUTH_LOGOUT_REDIRECT_URL, as OAuthenticator reads it, still wins.
        configured = os.environ.get("OAUTH_LOGOUT_REDIRECT_URL", "")
        if configured or not self.end_session_url:
            return configured
        query = {"client_id": self.client_id}
        if self.post_logout_redirect_url:
            query["post_logout_redirect_uri"] = self.post_logout_redirect_url
        separator = "&" if "?" in self.end_session_url else "?"
        return f"{self.end_session_url}{separator}{urlencode(query)}"

    @default("manage_groups")
    def _manage_groups_default(self) -> bool:
        return True

    @default("allowed_groups")
    def _allowed_groups_default(self) -> set[str]:
        return set(ROLE_GROUPS)

    @default("admin_groups")
    def _admin_groups_default(self) -> set[str]:
        return {"admins"}

    @default("auth_state_groups_key")
    def _groups_key_default(self) -> str:
        # build_auth_state_dict keeps the userinfo response under this key.
        return f"{self.user_auth_state_key}.groups"

    @default("username_claim")
    def _username_claim_default(self) -> str:
        return "preferred_username"

    @default("scope")
    def _scope_default(self) -> list[str]:
        return ["openid", "profile", "email", "groups"]

    @default("login_service")
    def _login_service_default(self) -> str:
        return "your campus account"

    @default("custom_403_message")
    def _custom_403_default(self) -> str:
        return (
            "Your campus account signed in, but it is not in a group that may use this GPU "
            "hub. Students get access through their course enrolment, staff through the "
            "instructors, researchers or admins groups. If you think this is wrong, ask the "
            "hub's administrators to check your groups in the campus directory."
        )

    @validate("keep_group_patterns")
    def _valid_patterns(self, proposal: dict) -> list[str]:
        GroupMapping.build(patterns=proposal["value"])  # raises ValueError naming the bad one
        return list(proposal["value"])

    def catalog(self) -> Catalog | None:
        """The catalog in force, or None without one (or before a valid one)."""
        return self.admission.catalog_in_force()

    def group_mapping(self) -> GroupMapping:
        return GroupMapping.build(
            self.group_aliases,
            keep=set(self.allowed_groups) | set(self.admin_groups),
            patterns=self.keep_group_patterns,
        )

    async def get_user_groups(self, auth_state: dict) -> set[str]:
        """The identity provider's groups, mapped and filtered (see the module's docs)."""
        claimed = await super().get_user_groups(auth_state)
        catalog = self.catalog()
        known = catalog.known_groups() if catalog is not None else frozenset()
        mapped = self.group_mapping().map(claimed, known)
        user = (auth_state or {}).get(self.user_auth_state_key) or {}
        name = user.get(self.username_claim) if isinstance(user, dict) else None
        self.log.info(
            "Campus groups of %s: %s%s",
            name or "a user",
            ", ".join(sorted(mapped.kept)) or "none the hub knows",
            f" (ignored: {', '.join(sorted(mapped.dropped))})" if mapped.dropped else "",
        )
        return set(mapped.kept)


class LocalCampusOAuthenticator(LocalAuthenticator, CampusOAuthenticator):
    """Campus single sign-on on one shared machine (hub_config/workstation): each person's
    system account, which their server and jobs run as, is made at their first login.

    Accounts come from :func:`gpuspawner.core.accounts.ensure_account` (a group of their own, a
    home only they can open). Everything else is as for :class:`CampusOAuthenticator`,
    whose settings (``c.CampusOAuthenticator.*``) apply here too.
    """

    @default("create_system_users")
    def _default_create_system_users(self) -> bool:
        return True

    def check_allowed_groups(self, username, authentication=None):  # type: ignore[no-untyped-def]
        """Who may log in follows the identity provider's groups (``allowed_groups``, checked
        by CampusOAuthenticator), not this machine's /etc/group."""
        return False

    def add_system_user(self, user):  # type: ignore[no-untyped-def]
        try:
            ensure_account(user.name)
        except RuntimeError as error:
            self.log.error("No system account for %s: %s", user.name, error)
            raise web.HTTPError(
                403,
                log_message=str(error),
                reason=f"This machine cannot make an account named {user.name!r}; "
                "ask the hub admins.",
            ) from None


def oidc_endpoints(issuer: str, *, attempts: int = 10, delay: float = 1.0) -> dict[str, str]:
    """The authorize, token and userinfo URLs of ``issuer`` (and its end-session URL when it
    offers RP-initiated logout), from its discovery document.

    For ``jupyterhub_config.py``, at hub start: ``c.CampusOAuthenticator.update(...)``.
    Retries while the provider is unreachable (it may be starting alongside the hub), then
    raises SystemExit with what to check, so a wrong issuer stops the hub with a clear line
    rather than at the first login.
    """
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    problem = ""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (config)
                document = json.load(response)
            break
        except (OSError, ValueError) as error:
            problem = str(error)
            if attempt + 1 < attempts:
                time.sleep(delay)
    else:
        raise SystemExit(
            f"Cannot read the identity provider's discovery document {url}: {problem}. "
            "Check CAMPUS_OIDC_ISSUER (the issuer URL, without /.well-known/...) and that the "
            "hub can reach it."
        )
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer.rstrip(
        "/"
    ):
        raise SystemExit(
            f"{url} describes the issuer {document.get('issuer') if isinstance(document, dict) else None!r}, "
            f"not {issuer!r}: set CAMPUS_OIDC_ISSUER to exactly the provider's issuer."
        )
    missing = [
        key
        for key in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint")
        if not document.get(key)
    ]
    if missing:
        raise SystemExit(f"{url} has no {', '.join(missing)}; is this an OpenID Connect issuer?")
    endpoints = {
        "authorize_url": document["authorization_endpoint"],
        "token_url": document["token_endpoint"],
        "userdata_url": document["userinfo_endpoint"],
    }
    if document.get("end_session_endpoint"):
        endpoints["end_session_url"] = document["end_session_endpoint"]
    return endpoints
