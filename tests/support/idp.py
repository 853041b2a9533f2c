"""Run the stand-in campus identity provider (hub_config/sso/campus_idp) for a test.

``start_campus_idp(clients=..., users=..., workdir=...)`` writes the provider's JSON
configuration into ``workdir``, starts ``node hub_config/sso/campus_idp/idp.mjs`` on a free
loopback port and waits until it is ready. The returned ``CampusIdP`` knows its issuer,
port and log, and stops the process (also as a context manager)::

    with start_campus_idp(clients=[HUB_CLIENT], users=[ADA], workdir=tmp_path) as idp:
        config = idp.discovery()

``browserless_login(session, start_url, username, password)`` then signs a person in the
way a browser would: it follows redirects from ``start_url`` (a client's login URL, such as
the hub's ``/hub/oauth_login``) to the provider's form, sends the form and follows the
redirects back to the client.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from .hubprocess import free_loopback_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
IDP_DIR = REPO_ROOT / "hub_config" / "sso" / "campus_idp"
IDP_SCRIPT = IDP_DIR / "idp.mjs"
DEMO_USERS_FILE = IDP_DIR / "demo_users.json"  # the demo's people; password `campus-demo`
DEFAULT_TITLE = "Campus login (demo)"
READY_LINE = "campus-idp ready at "

READY_TIMEOUT = 30.0  # from launch until the discovery document answers; ready in about 1 s
STOP_TIMEOUT = 5.0  # after SIGTERM, before SIGKILL; the provider exits at once
POLL_INTERVAL = 0.05
REQUEST_TIMEOUT = 60.0  # a hub may take a while to answer the pages after its callback
MAX_REDIRECTS = 20


class CampusIdPError(AssertionError):
    """The provider did not start, or a login did not go as a browser's would."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    return free_loopback_ports(1)[0]


@dataclass
class CampusIdP:
    """A running campus identity provider; ``stop()`` it, or use it as a context manager."""

    issuer: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def discovery(self) -> dict[str, Any]:
        """The provider's OpenID Connect discovery document."""
        response = requests.get(
            f"{self.issuer}/.well-known/openid-configuration", timeout=REQUEST_TIMEOUT
        )
        response.raise_for_status()
        return response.json()

    def log_text(self) -> str:
        """Everything the provider wrote so far (stdout and stderr)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the provider's log."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self) -> None:
        """Ask the provider to exit (SIGTERM), then kill it if it has not; safe to repeat."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                self.process.wait()

    def __enter__(self) -> CampusIdP:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_campus_idp(
    *,
    clients: Sequence[Mapping[str, Any]],
    users: Sequence[Mapping[str, Any]] | Path,
    workdir: Path,
    port: int | None = None,
    title: str = DEFAULT_TITLE,
) -> CampusIdP:
    """Start the provider on 127.0.0.1 and return it once its discovery document answers.

    ``clients`` are OAuth clients (``client_id``, ``client_secret``, ``redirect_uris`` and
    any other client metadata); ``users`` are people (``username``, ``password``, ``name``,
    ``email``, ``groups``), or the path of a JSON file listing them, such as
    ``DEMO_USERS_FILE``. The configuration (``campus_idp-<port>.json``) and the log
    (``campus_idp-<port>.log``) go into ``workdir``, which is created if needed.
    """
    node = shutil.which("node")
    if node is None:
        raise CampusIdPError("`node` is not on PATH; the campus identity provider needs Node.js.")
    if not (REPO_ROOT / "node_modules" / "oidc-provider").is_dir():
        raise CampusIdPError(
            "node_modules/oidc-provider is missing: run `make setup` (npm ci) first."
        )
    port = port if port is not None else free_port()
    issuer = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"campus_idp-{port}.json"
    log_path = workdir / f"campus_idp-{port}.log"
    config = {
        "issuer": issuer,
        "port": port,
        "host": "127.0.0.1",
        "clients": [dict(client) for client in clients],
        "title": title,
    }
    if isinstance(users, Path):
        config["users_file"] = str(users.resolve())
    else:
        config["users"] = [dict(user) for user in users]
    config_path.write_text(json.dumps(config, indent=2))

    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [node, str(IDP_SCRIPT), "--config", str(config_path)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    idp = CampusIdP(issuer=issuer, port=port, log_path=log_path, process=process)
    try:
        _wait_ready(idp)
    except BaseException:
        idp.stop()
        raise
    return idp


def _wait_ready(idp: CampusIdP) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if idp.process.poll() is not None:
            raise CampusIdPError(
                f"The campus identity provider exited with code {idp.process.returncode} "
                f"before it was ready. Log tail ({idp.log_path}):\n{idp.log_tail()}"
            )
        if READY_LINE in idp.log_text():
            return
        # The ready line is the usual signal; an answering discovery document is as good.
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{idp.issuer}/.well-known/openid-configuration", timeout=1).ok:
                return
        time.sleep(POLL_INTERVAL)
    raise CampusIdPError(
        f"The campus identity provider did not get ready at {idp.issuer} within "
        f"{READY_TIMEOUT:.0f} s. Log tail ({idp.log_path}):\n{idp.log_tail()}"
    )


# ---------------------------------------------------------------------------------------
# A person in front of a browser, without the browser


@dataclass
class HtmlForm:
    """One ``<form>`` of a page: where it goes and the inputs it carries."""

    action: str
    method: str
    inputs: dict[str, str] = field(default_factory=dict)
    input_types: set[str] = field(default_factory=set)


class _FormParser(HTMLParser):
    """Collects the forms of a page with their named ``<input>`` values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[HtmlForm] = []
        self._current: HtmlForm | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._current = HtmlForm(
                action=attributes.get("action", ""),
                method=attributes.get("method", "get").lower(),
            )
            self.forms.append(self._current)
        elif tag == "input" and self._current is not None:
            self._current.input_types.add(attributes.get("type", "text").lower())
            if attributes.get("name"):
                self._current.inputs[attributes["name"]] = attributes.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def page_forms(html: str) -> list[HtmlForm]:
    """The forms of an HTML page, in document order."""
    parser = _FormParser()
    parser.feed(html)
    parser.close()
    return parser.forms


def login_form(html: str) -> HtmlForm | None:
    """The page's sign-in form (the one with a password field), or None."""
    return next((form for form in page_forms(html) if "password" in form.input_types), None)


def follow_redirects(
    session: requests.Session, response: requests.Response, stop_at: str | None = None
) -> requests.Response:
    """Follow ``response``'s redirects with GET, as a browser does after a form or a link.

    With ``stop_at``, the first redirect whose target starts with it is returned unfollowed,
    e.g. one to an OAuth redirect_uri that nothing serves in a test.
    """
    for _ in range(MAX_REDIRECTS):
        if not response.is_redirect:
            return response
        target = urljoin(response.url, response.headers["Location"])
        if stop_at is not None and target.startswith(stop_at):
            return response
        response = session.get(target, allow_redirects=False, timeout=REQUEST_TIMEOUT)
    raise CampusIdPError(f"More than {MAX_REDIRECTS} redirects; the last went to {response.url}.")


def browserless_login(
    session: requests.Session,
    start_url: str,
    username: str,
    password: str,
    *,
    stop_at: str | None = None,
) -> requests.Response:
    """Sign in through the identity provider's form as a browser would; the final response.

    GET ``start_url`` and follow redirects to the provider's sign-in form, fill in
    ``username`` and ``password`` and send it, then follow the redirects back to the client
    (the hub's ``/hub/oauth_callback`` and on). Cookies stay in ``session``, so a session
    that signed in before passes straight through without a form. A refused password
    returns the provider's form again (HTTP 401). ``stop_at`` stops at a redirect, as in
    ``follow_redirects``.
    """
    page = follow_redirects(
        session,
        session.get(start_url, allow_redirects=False, timeout=REQUEST_TIMEOUT),
        stop_at,
    )
    form = login_form(page.text) if not page.is_redirect else None
    if form is None:
        return page  # already signed in at the provider, stopped, or not a sign-in page
    if form.method != "post":
        raise CampusIdPError(f"The sign-in form at {page.url} uses {form.method}, not post.")
    data = {**form.inputs, "username": username, "password": password}
    response = session.post(
        urljoin(page.url, form.action), data=data, allow_redirects=False, timeout=REQUEST_TIMEOUT
    )
    return follow_redirects(session, response, stop_at)
