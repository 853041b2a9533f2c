"""The stand-in campus identity provider, as a browser and the hub see it.

Every test talks to a real ``node hub_config/sso/campus_idp/idp.mjs`` process; no JupyterHub
is involved. The client's redirect_uri points at a port where nothing listens: the browser
side stops at that redirect and reads ``code`` and ``state`` from it, as the hub's
/hub/oauth_callback would.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.idp import (
    DEMO_USERS_FILE,
    CampusIdP,
    CampusIdPError,
    browserless_login,
    follow_redirects,
    login_form,
    page_forms,
    start_campus_idp,
)

REDIRECT_URI = "http://127.0.0.1:9/hub/oauth_callback"  # port 9 (discard): nothing answers
HUB_CLIENT = {
    "client_id": "jupyterhub",
    "client_secret": "hub-client-secret",
    "client_name": "Campus GPU Hub",
    "redirect_uris": [REDIRECT_URI],
}
ADA = {
    "username": "ada",
    "password": "analytical-engine",
    "name": "Ada Lovelace",
    "email": "ada@campus.example",
    "groups": ["students", "ml101-students"],
}
SCOPE = "openid profile email groups"
WRONG_CREDENTIALS = "Wrong user name or password."
STOP_GUARD = 10.0  # seconds; only so a hanging provider fails the test instead of the run


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CampusIdP]:
    """One provider for the module, with the hub as its client and Ada as its user."""
    workdir = tmp_path_factory.mktemp("campus-idp")
    with start_campus_idp(clients=[HUB_CLIENT], users=[ADA], workdir=workdir) as provider:
        yield provider


# ---------------------------------------------------------------------------------------
# What the hub does around the browser's part: PKCE, the authorize URL, the token request


@dataclass
class AuthorizationRequest:
    """What the hub remembers between sending the browser off and the callback."""

    state: str
    nonce: str
    code_verifier: str

    @classmethod
    def new(cls) -> AuthorizationRequest:
        return cls(
            state=secrets.token_urlsafe(16),
            nonce=secrets.token_urlsafe(16),
            code_verifier=secrets.token_urlsafe(48),
        )

    @property
    def code_challenge(self) -> str:
        digest = hashlib.sha256(self.code_verifier.encode("ascii")).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def url(self, idp: CampusIdP) -> str:
        query = {
            "response_type": "code",
            "client_id": HUB_CLIENT["client_id"],
            "redirect_uri": REDIRECT_URI,
            "scope": SCOPE,
            "state": self.state,
            "nonce": self.nonce,
            "code_challenge": self.code_challenge,
            "code_challenge_method": "S256",
        }
        return f"{idp.discovery()['authorization_endpoint']}?{urlencode(query)}"


def callback_query(response: requests.Response) -> dict[str, str]:
    """The query of the redirect to the hub's callback, one value per parameter."""
    assert response.is_redirect, f"expected a redirect to the client, got {response.status_code}"
    location = response.headers["Location"]
    assert location.startswith(REDIRECT_URI), location
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def sign_in(
    idp: CampusIdP, username: str, password: str, session: requests.Session | None = None
) -> tuple[AuthorizationRequest, dict[str, str]]:
    """A browser signs in; the authorization request and the callback's query."""
    request = AuthorizationRequest.new()
    response = browserless_login(
        session or requests.Session(), request.url(idp), username, password, stop_at=REDIRECT_URI
    )
    return request, callback_query(response)


def token_request(
    idp: CampusIdP,
    code: str,
    code_verifier: str,
    *,
    client_secret: str = HUB_CLIENT["client_secret"],
    secret_in_body: bool = False,
) -> requests.Response:
    """The hub's code exchange, with client_secret_basic (default) or client_secret_post."""
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": code_verifier,
    }
    auth = None
    if secret_in_body:
        data |= {"client_id": HUB_CLIENT["client_id"], "client_secret": client_secret}
    else:
        auth = (HUB_CLIENT["client_id"], client_secret)
    return requests.post(idp.discovery()["token_endpoint"], data=data, auth=auth, timeout=10)


def userinfo(idp: CampusIdP, access_token: str) -> requests.Response:
    """The userinfo endpoint, asked with the access token as the hub asks it."""
    return requests.get(
        idp.discovery()["userinfo_endpoint"],
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=10,
    )


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verified_jwt_claims(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The payload of an RS256 JWT after checking its signature against the provider's keys."""
    header_b64, payload_b64, signature_b64 = token.split(".")
    header = json.loads(b64url_decode(header_b64))
    assert header["alg"] == "RS256"
    key = next(key for key in jwks["keys"] if key["kid"] == header["kid"])
    public_key = rsa.RSAPublicNumbers(
        e=int.from_bytes(b64url_decode(key["e"])), n=int.from_bytes(b64url_decode(key["n"]))
    ).public_key()
    # Raises InvalidSignature when the token was not signed by this provider.
    public_key.verify(
        b64url_decode(signature_b64),
        f"{header_b64}.{payload_b64}".encode("ascii"),
        padding.PKCS1v15(),
        hashes.SHA256(),
    )
    return json.loads(b64url_decode(payload_b64))


def open_sign_in_page(idp: CampusIdP, session: requests.Session) -> requests.Response:
    """Follow an authorization request to the provider's sign-in form."""
    url = AuthorizationRequest.new().url(idp)
    return follow_redirects(session, session.get(url, allow_redirects=False, timeout=10))


def closed_by_server(connection: socket.socket) -> bool:
    """Whether the other end closed the connection (an orderly close or a reset)."""
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True


def without_interaction_ids(html: str) -> str:
    return re.sub(r"/interaction/[A-Za-z0-9_-]+", "/interaction/ID", html)


# ---------------------------------------------------------------------------------------
# Scenarios


def test_discovery_document_names_the_endpoints_the_hub_uses(idp: CampusIdP) -> None:
    config = idp.discovery()

    assert config["issuer"] == idp.issuer
    assert config["authorization_endpoint"] == f"{idp.issuer}/auth"
    assert config["token_endpoint"] == f"{idp.issuer}/token"
    assert config["userinfo_endpoint"] == f"{idp.issuer}/me"
    assert config["jwks_uri"] == f"{idp.issuer}/jwks"
    assert "S256" in config["code_challenge_methods_supported"]
    assert {"openid", "profile", "email", "groups"} <= set(config["scopes_supported"])
    assert {"client_secret_basic", "client_secret_post"} <= set(
        config["token_endpoint_auth_methods_supported"]
    )
    assert "groups" in config["claims_supported"]


def test_sign_in_page_is_a_labelled_form_naming_the_hub(idp: CampusIdP) -> None:
    page = open_sign_in_page(idp, requests.Session())

    assert page.status_code == 200
    assert page.url.startswith(f"{idp.issuer}/interaction/")
    assert "<h1>Campus login (demo)</h1>" in page.text
    assert "Campus GPU Hub" in page.text
    assert '<label for="username">User name</label>' in page.text
    assert '<label for="password">Password</label>' in page.text
    assert '<button type="submit">Sign in</button>' in page.text
    form = login_form(page.text)
    assert form is not None and form.method == "post"
    assert {"username", "password"} <= set(form.inputs)


def test_student_signs_in_and_hub_gets_id_token_and_userinfo_with_groups(
    idp: CampusIdP,
) -> None:
    # Given a student who signs in with the right password
    request, callback = sign_in(idp, "ada", ADA["password"])

    # then the browser goes straight back to the hub with a code and the hub's state
    assert callback["state"] == request.state
    assert callback["iss"] == idp.issuer
    assert callback["code"]

    # When the hub exchanges the code with client_secret_basic and its PKCE verifier
    response = token_request(idp, callback["code"], request.code_verifier)

    # then it gets tokens, and the ID token, signed by the provider, says who this is
    assert response.status_code == 200, response.text
    tokens = response.json()
    assert tokens["token_type"].lower() == "bearer"
    jwks = requests.get(idp.discovery()["jwks_uri"], timeout=10).json()
    claims = verified_jwt_claims(tokens["id_token"], jwks)
    assert claims["iss"] == idp.issuer
    assert claims["aud"] == HUB_CLIENT["client_id"]
    assert claims["nonce"] == request.nonce
    assert claims["sub"] == claims["preferred_username"] == "ada"
    assert claims["name"] == "Ada Lovelace"
    assert claims["email"] == "ada@campus.example"
    assert claims["email_verified"] is True
    assert claims["groups"] == ["students", "ml101-students"]

    # and userinfo answers the access token with the same person and groups
    person = userinfo(idp, tokens["access_token"])
    assert person.status_code == 200, person.text
    assert person.json() == {
        "sub": "ada",
        "preferred_username": "ada",
        "name": "Ada Lovelace",
        "email": "ada@campus.example",
        "email_verified": True,
        "groups": ["students", "ml101-students"],
    }


def test_hub_may_send_its_secret_in_the_body_instead(idp: CampusIdP) -> None:
    request, callback = sign_in(idp, "ada", ADA["password"])

    response = token_request(idp, callback["code"], request.code_verifier, secret_in_body=True)

    assert response.status_code == 200, response.text
    assert "id_token" in response.json()


def test_browser_already_signed_in_goes_back_to_the_hub_without_the_form(
    idp: CampusIdP,
) -> None:
    session = requests.Session()
    sign_in(idp, "ada", ADA["password"], session)

    # A second login from the same browser: no form, only redirects back with a new code.
    request, callback = sign_in(idp, "ada", "not-asked-again", session)

    assert callback["state"] == request.state
    assert token_request(idp, callback["code"], request.code_verifier).status_code == 200


def test_wrong_password_shows_the_form_again_with_the_user_name_kept(idp: CampusIdP) -> None:
    request = AuthorizationRequest.new()

    page = browserless_login(
        requests.Session(), request.url(idp), "ada", "wrong", stop_at=REDIRECT_URI
    )

    assert page.status_code == 401
    assert WRONG_CREDENTIALS in page.text
    form = login_form(page.text)
    assert form is not None
    assert form.inputs["username"] == "ada"
    assert form.inputs["password"] == ""


def test_unknown_user_gets_the_same_answer_as_a_wrong_password(idp: CampusIdP) -> None:
    wrong_password = browserless_login(
        requests.Session(), AuthorizationRequest.new().url(idp), "ada", "wrong"
    )
    unknown_user = browserless_login(
        requests.Session(), AuthorizationRequest.new().url(idp), "adb", ADA["password"]
    )

    assert wrong_password.status_code == unknown_user.status_code == 401
    # Apart from the user name typed, nothing tells which part was wrong.
    assert without_interaction_ids(unknown_user.text).replace(
        'value="adb"', 'value="ada"'
    ) == without_interaction_ids(wrong_password.text)


def test_typed_user_name_is_escaped_when_shown_again(idp: CampusIdP) -> None:
    typed = '<script>alert("x")</script>\'&'

    page = browserless_login(
        requests.Session(), AuthorizationRequest.new().url(idp), typed, "anything"
    )

    assert page.status_code == 401
    assert "<script>" not in page.text
    assert 'value="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;"' in page.text
    form = login_form(page.text)
    assert form is not None and form.inputs["username"] == typed


def test_wrong_client_secret_is_refused_at_the_token_endpoint(idp: CampusIdP) -> None:
    request, callback = sign_in(idp, "ada", ADA["password"])

    response = token_request(
        idp, callback["code"], request.code_verifier, client_secret="not-the-secret"
    )

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert "id_token" not in response.json()


def test_wrong_pkce_verifier_is_refused(idp: CampusIdP) -> None:
    request, callback = sign_in(idp, "ada", ADA["password"])

    response = token_request(idp, callback["code"], AuthorizationRequest.new().code_verifier)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert "access_token" not in response.json()


def test_cancel_sends_access_denied_back_to_the_hub(idp: CampusIdP) -> None:
    session = requests.Session()
    request = AuthorizationRequest.new()
    page = follow_redirects(
        session, session.get(request.url(idp), allow_redirects=False, timeout=10)
    )
    cancel_action = re.search(r'action="(/interaction/[^"]+/abort)"', page.text)
    assert cancel_action is not None

    response = follow_redirects(
        session,
        session.post(idp.issuer + cancel_action.group(1), allow_redirects=False, timeout=10),
        stop_at=REDIRECT_URI,
    )

    callback = callback_query(response)
    assert callback["error"] == "access_denied"
    assert callback["state"] == request.state
    assert "code" not in callback


def test_expired_sign_in_page_explains_what_to_do(idp: CampusIdP) -> None:
    # A form sent from a browser whose sign-in request is gone (restart, timeout, other tab)
    response = requests.post(
        f"{idp.issuer}/interaction/no-such-interaction/login",
        data={"username": "ada", "password": ADA["password"]},
        allow_redirects=False,
        timeout=10,
    )

    assert response.status_code == 400
    assert response.headers["Content-Type"].startswith("text/html")
    assert "This sign-in page has expired" in response.text
    assert "sign in again" in response.text
    assert "SessionNotFound" not in response.text and "    at " not in response.text


def test_unknown_client_gets_a_page_that_says_what_to_do(idp: CampusIdP) -> None:
    response = requests.get(
        idp.discovery()["authorization_endpoint"],
        params={"response_type": "code", "client_id": "not-registered", "scope": "openid"},
        headers={"Accept": "text/html"},
        timeout=10,
    )

    assert response.status_code == 400
    assert "<h1>Sign-in could not continue</h1>" in response.text
    assert "sign in again" in response.text


def test_after_signing_out_at_the_provider_the_next_login_asks_again(idp: CampusIdP) -> None:
    # Given a browser signed in at the provider (as after a hub login)
    session = requests.Session()
    sign_in(idp, "ada", ADA["password"], session)

    # When the person signs out there and confirms
    confirm = session.get(idp.discovery()["end_session_endpoint"], timeout=10)
    assert confirm.status_code == 200
    assert "Do you want to sign out of the campus sign-in service?" in confirm.text
    (logout_form,) = page_forms(confirm.text)
    signed_out = session.post(
        logout_form.action, data={**logout_form.inputs, "logout": "yes"}, timeout=10
    )
    assert "<h1>Signed out</h1>" in signed_out.text

    # then the next login shows the form again instead of passing straight through
    assert login_form(open_sign_in_page(idp, session).text) is not None


def test_every_demo_person_signs_in_with_their_groups(tmp_path: Path) -> None:
    people = json.loads(DEMO_USERS_FILE.read_text())
    assert [person["username"] for person in people] == [
        "student1",
        "student2",
        "student3",
        "instructor",
        "researcher",
        "admin",
        "visitor",
    ]

    with start_campus_idp(clients=[HUB_CLIENT], users=DEMO_USERS_FILE, workdir=tmp_path) as demo:
        for person in people:
            request, callback = sign_in(demo, person["username"], "campus-demo")
            tokens = token_request(demo, callback["code"], request.code_verifier).json()
            claims = userinfo(demo, tokens["access_token"]).json()

            assert claims["sub"] == person["username"]
            assert claims["groups"] == person["groups"]
            assert claims["name"] == person["name"]
            assert claims["email"].endswith("@campus.example")


def test_configuration_without_users_fails_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(CampusIdPError, match="exited with code 2") as failure:
        start_campus_idp(clients=[HUB_CLIENT], users=[], workdir=tmp_path)

    assert "needs at least one user" in str(failure.value)


def test_sigterm_closes_open_connections_and_exits(tmp_path: Path) -> None:
    provider = start_campus_idp(clients=[HUB_CLIENT], users=[ADA], workdir=tmp_path)
    address = ("127.0.0.1", provider.port)
    host = f"Host: 127.0.0.1:{provider.port}\r\n"
    try:
        # Given a kept-alive connection, as the hub's HTTP client holds one,
        kept_alive = socket.create_connection(address, timeout=STOP_GUARD)
        kept_alive.sendall(f"GET /jwks HTTP/1.1\r\n{host}\r\n".encode("ascii"))
        assert kept_alive.recv(65536).startswith(b"HTTP/1.1 200")
        # and a client that is still in the middle of sending its request
        mid_request = socket.create_connection(address, timeout=STOP_GUARD)
        mid_request.sendall(f"GET /jwks HTTP/1.1\r\n{host}".encode("ascii"))

        # When the provider is asked to stop
        provider.process.send_signal(signal.SIGTERM)

        # then it closes both connections itself and exits cleanly, without a SIGKILL
        assert provider.process.wait(STOP_GUARD) == 0
        assert closed_by_server(kept_alive)
        assert closed_by_server(mid_request)
        kept_alive.close()
        mid_request.close()
        log = provider.log_text()
        assert "SIGTERM received" in log
        assert "campus-idp: stopped" in log
        assert "exiting anyway" not in log
    finally:
        provider.stop()
    provider.stop()  # stopping twice is harmless
