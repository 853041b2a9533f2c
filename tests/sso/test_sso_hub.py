"""Campus single sign-on on a real hub, against a real OpenID Connect provider on loopback.

The provider (hub_config/sso/campus_idp, oidc-provider) knows these campus accounts:

- stu: a student of ML101 (``course-ml101-students``), also on a campus mailing list;
- sam: a student of PHYS201 (``course-phys201-students``);
- ines: an instructor of ML101 (``course-ml101-instructors``);
- rhea: a researcher of the vision lab (``vision-lab``);
- hpc: research computing staff, a hub admin through the alias of ``/campus/it/hpc-admins``;
- olaf: an alumnus, whose groups do not let him in.

The hub runs CampusOAuthenticator (authorization-code flow with PKCE, userinfo), the
SimpleLocalGPUSpawner with two simulated GPUs, the instructor roles built from the catalog
and the Run as Job service, wired as hub_config/sso/ does. Nobody is enrolled or named in
the catalog: who takes and teaches which course comes from the provider's groups only.
Each person logs in through the provider's form, as a browser would.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit, urlunsplit

import pytest
import requests

from ..support.course_catalogs import minute, now, window
from ..support.hub_pages import cards
from ..support.hubprocess import (
    REPO_ROOT,
    BrowserlessUser,
    RunningHub,
    copy_log,
    free_loopback_ports,
)
from ..support.idp import (
    CampusIdP,
    browserless_login,
    follow_redirects,
    free_port,
    login_form,
    page_forms,
    start_campus_idp,
)
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration

ARTIFACTS = REPO_ROOT / "test-artifacts" / "sso"
PASSWORD = "correct horse battery staple"
CLIENT_ID = "campus-gpu-hub"
CLIENT_SECRET = "test-client-secret-0123456789"

PEOPLE = {
    "stu": ["students", "course-ml101-students", "all-campus-mailing-list"],
    "sam": ["students", "course-phys201-students"],
    "ines": ["staff", "instructors", "course-ml101-instructors"],
    "rhea": ["staff", "researchers", "vision-lab"],
    "hpc": ["staff", "/campus/it/hpc-admins"],
    "olaf": ["alumni"],
}


def campus_users() -> list[dict]:
    return [
        {
            "username": name,
            "password": PASSWORD,
            "name": name.title(),
            "email": f"{name}@campus.example",
            "groups": groups,
        }
        for name, groups in PEOPLE.items()
    ]


def sso_catalog() -> str:
    """Two courses in class now, a research allocation, a CPU job flavor; nobody by name."""
    start = minute(now()) - timedelta(minutes=20)
    end = start + timedelta(hours=2)
    first, last = (start - timedelta(days=1)).date(), (start + timedelta(days=60)).date()

    def course(course_id: str, title: str) -> str:
        return f"""\
  - id: {course_id}
    title: {title}
    gpu: {{fraction: 1/4, memory: 4GiB}}
    schedule:
      timezone: UTC
      term: {{first_day: {first}, last_day: {last}}}
      windows:
        - {window(start, end)}
"""

    return (
        """\
standing:
  - id: cpu
    title: CPU only
    default: true
courses:
"""
        + course("ml101", "Machine Learning 101")
        + course("phys201", "Physics 201")
        + """\
research:
  - id: vision-lab
    title: Vision lab
    groups: [vision-lab]
    expires: 2099-12-31
    gpu: {fraction: 1/2}
flavors:
  - id: cpu-job
    title: CPU job
    access: {everyone: true}
"""
    )


def hub_config(catalog: Path, root: Path, jobs_port: int, sessions_port: int) -> str:
    """The hub as hub_config/sso/ wires it, pointed at the test's provider and catalog."""
    return f"""
import os, sys
from pathlib import Path
from gpuspawner.policy import load_catalog
from gpuspawner.policy.roles import course_roles
from gpuspawner.sessions import course_sessions_service, sessions_service_role
from gpuspawner.sso import CampusOAuthenticator, oidc_endpoints
from jupyter_to_job.hub import (
    job_server_token_scopes, job_service, job_service_roles, job_service_url,
)
from jupyter_to_job.scopes import hub_custom_scopes

c.JupyterHub.authenticator_class = CampusOAuthenticator
auth = c.CampusOAuthenticator
auth.client_id = {CLIENT_ID!r}
auth.client_secret = {CLIENT_SECRET!r}
auth.oauth_callback_url = f"http://127.0.0.1:{{c.JupyterHub.port}}/hub/oauth_callback"
auth.update(oidc_endpoints(os.environ["CAMPUS_OIDC_ISSUER"]))
auth.group_aliases = {{"/campus/it/hpc-admins": "admins"}}

c.JupyterHub.spawner_class = "gpuspawner.local.SimpleLocalGPUSpawner"
c.GPUAdmission.catalog_path = {str(catalog)!r}
c.GPUAdmission.gpu_inventory = "simulated"
c.GPUAdmission.simulated_gpus = [{{"model": "RTX 4090", "memory": "24GiB", "count": 2}}]
c.GPUAdmission.allocation_ledger = {str(root / "ledger.json")!r}
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
c.Spawner.consecutive_failure_limit = 0

c.JupyterHub.custom_scopes = hub_custom_scopes()
c.JupyterHub.services.append(job_service(
    port={jobs_port},
    catalog_path={str(catalog)!r},
    root_dir={str(root / "jobs")!r},
    gpu_inventory="simulated",
    simulated_gpus=c.GPUAdmission.simulated_gpus,
    allocation_ledger=c.GPUAdmission.allocation_ledger,
    args=["--LocalExecutor.poll_interval=0.1", "--JobManager.queue_poll_interval=0.2"],
))
c.JupyterHub.load_roles.extend(job_service_roles())
c.JupyterHub.services.append(course_sessions_service(
    {str(catalog)!r}, interval=3600, audit_log={str(root / "sessions.jsonl")!r},
    port={sessions_port},
))
c.JupyterHub.load_roles.append(sessions_service_role())
c.JupyterHub.load_roles.extend(course_roles(load_catalog({str(catalog)!r})))
c.Spawner.server_token_scopes = job_server_token_scopes()
c.Spawner.environment.update({{"JUPYTER_TO_JOB_SERVICE_URL": job_service_url({jobs_port})}})
"""


@dataclass
class Campus:
    """The provider, the hub, and a browser session for each person who signed in."""

    idp: CampusIdP
    hub: RunningHub
    people: dict[str, BrowserlessUser] = field(default_factory=dict)

    @property
    def login_url(self) -> str:
        return f"{self.hub.url}/hub/oauth_login?next=%2Fhub%2Fhome"

    def sign_in(self, name: str, password: str = PASSWORD) -> BrowserlessUser:
        """``name`` signs in through the provider's form; their session, signed in."""
        if name in self.people:
            return self.people[name]
        person = BrowserlessUser(self.hub, name)
        landed = browserless_login(person.session, self.login_url, name, password)
        assert landed.status_code == 200, (landed.status_code, landed.url, landed.text[:500])
        assert landed.url == f"{self.hub.url}/hub/home", landed.url
        self.people[name] = person
        return person

    def hub_user(self, name: str) -> dict:
        response = self.hub.api("GET", f"/users/{name}")
        assert response.status_code == 200, response.text
        return response.json()

    def as_browser(
        self, person: BrowserlessUser, method: str, path: str, **kwargs
    ) -> requests.Response:
        """``/hub/api<path>`` with the person's login cookie, as the hub's own pages call it."""
        headers = {"X-XSRFToken": person.xsrf(), **kwargs.pop("headers", {})}
        return person.session.request(
            method, self.hub.api_url + path, headers=headers, timeout=60, **kwargs
        )

    def courses(
        self, person: BrowserlessUser, method: str, path: str, **kwargs
    ) -> requests.Response:
        """The course-sessions service's course API through the proxy, with their token."""
        headers = {"Authorization": f"token {person.token}"}
        url = f"{self.hub.url}/services/course-sessions/api/courses{path}"
        return requests.request(method, url, headers=headers, timeout=60, **kwargs)

    def jobs(self, person: BrowserlessUser, method: str, path: str, **kwargs) -> requests.Response:
        """The job service through the proxy, with the person's own token."""
        headers = {"Authorization": f"token {person.token}"}
        url = f"{self.hub.url}/services/jupyter-to-job/api/{path}"
        return requests.request(method, url, headers=headers, timeout=60, **kwargs)


@pytest.fixture(scope="module")
def campus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campus]:
    work = tmp_path_factory.mktemp("sso")
    catalog = work / "catalog"
    catalog.mkdir()
    (catalog / "catalog.yaml").write_text(sso_catalog())
    issuer_port = free_port()
    issuer = f"http://127.0.0.1:{issuer_port}"
    hub = RunningHub.prepare(
        hub_config(catalog, work, *free_loopback_ports(2)),
        work / "hub",
        extra_env={"CAMPUS_OIDC_ISSUER": issuer},
    )
    idp = start_campus_idp(
        clients=[
            {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{hub.url}/hub/oauth_callback"],
                "post_logout_redirect_uris": [f"{hub.url}/hub/login"],
            }
        ],
        users=campus_users(),
        workdir=work / "idp",
        port=issuer_port,
    )
    try:
        hub.launch()
        yield Campus(idp, hub)
    finally:
        hub.stop()
        idp.stop()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        if hub.log_path.exists():
            copy_log(hub, ARTIFACTS / "sso-hub.log")
        if idp.log_path.exists():
            shutil.copyfile(idp.log_path, ARTIFACTS / "campus-idp.log")


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll ``condition`` (a bound for a broken test, never a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


# -- landing with the right groups ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "groups", "admin"),
    [
        ("stu", ["course-ml101-students", "students"], False),
        ("sam", ["course-phys201-students", "students"], False),
        ("ines", ["course-ml101-instructors", "instructors"], False),
        ("rhea", ["researchers", "vision-lab"], False),
        ("hpc", ["admins"], True),
    ],
)
def test_each_person_lands_with_the_groups_their_campus_account_gives(campus, name, groups, admin):
    campus.sign_in(name)
    model = campus.hub_user(name)
    # Only the groups that mean something to the hub: role groups, the catalog's groups,
    # aliases. "staff" and the mailing list are dropped.
    assert sorted(model["groups"]) == groups
    assert model["admin"] is admin


@pytest.mark.parametrize(
    ("name", "offered", "startable"),
    [
        ("stu", {"cpu", "ml101"}, {"cpu", "ml101"}),
        ("sam", {"cpu", "phys201"}, {"cpu", "phys201"}),
        ("ines", {"cpu", "ml101"}, {"cpu", "ml101"}),
        ("rhea", {"cpu", "vision-lab"}, {"cpu", "vision-lab"}),
        # Admins see every course; a research allocation stays its grantees' own
        ("hpc", {"cpu", "ml101", "phys201"}, {"cpu", "ml101", "phys201"}),
    ],
)
def test_each_person_sees_the_profiles_their_groups_give(campus, name, offered, startable):
    person = campus.sign_in(name)
    page = person.get_spawn_page()
    assert page.status_code == 200, page.text[:500]
    seen = cards(page.text)
    assert set(seen) == offered
    assert {pid for pid, card in seen.items() if card["available"]} >= startable
    if name == "ines":
        assert "Instructor access" in seen["ml101"]["status"]
    if name == "rhea":
        assert "Granted until" in seen["vision-lab"]["status"]


def test_a_student_cannot_start_a_course_they_do_not_take(campus):
    sam = campus.sign_in("sam")
    refused = sam.post_spawn_form({"profile": "ml101"})
    assert refused.status_code == 403, refused.text[:500]
    assert "ml101" not in sam.model().get("servers", {})


# -- what each role may do ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def course_servers(campus: Campus) -> Iterator[dict[str, BrowserlessUser]]:
    """stu's ML101 server and sam's PHYS201 server, started from the spawn page."""
    started = {}
    for name, profile in (("stu", "ml101"), ("sam", "phys201")):
        person = campus.sign_in(name)
        response = person.post_spawn_form({"profile": profile})
        assert response.status_code == 200, response.text[:500]
        person.wait_ready()
        started[name] = person
    yield started
    for person in started.values():
        if "" in person.model().get("servers", {}):
            person.stop_server()


def test_an_instructor_sees_only_their_students_on_the_admin_page(campus, course_servers):
    ines = campus.sign_in("ines")
    admin_page = ines.session.get(f"{campus.hub.url}/hub/admin", timeout=60)
    assert admin_page.status_code == 200
    listed = campus.as_browser(ines, "GET", "/users")
    assert listed.status_code == 200, listed.text
    users = {user["name"]: user for user in listed.json()}
    assert set(users) == {"stu"}
    assert users["stu"]["servers"][""]["user_options"]["profile"] == "ml101"
    # A student has no admin page at all
    stu = course_servers["stu"]
    assert stu.session.get(f"{campus.hub.url}/hub/admin", timeout=60).status_code == 403


def assert_hidden_by_the_hub(response: requests.Response) -> None:
    assert response.status_code == 404, response.text
    assert response.json()["message"] == "No access to resources or resources not found"


def test_an_instructor_cannot_stop_another_courses_server_nor_start_their_students(
    campus, course_servers
):
    ines = campus.sign_in("ines")
    # JupyterHub refuses what a filtered scope does not cover with 404, the same answer as
    # for a user who does not exist (jupyterhub.scopes.needs_scope)
    other = campus.as_browser(ines, "DELETE", "/users/sam/server")
    assert_hidden_by_the_hub(other)
    assert "" in course_servers["sam"].model()["servers"]
    start = campus.as_browser(ines, "POST", "/users/stu/servers/extra", json={"profile": "cpu"})
    assert_hidden_by_the_hub(start)
    assert_hidden_by_the_hub(campus.as_browser(ines, "GET", "/users/stu/tokens"))
    # Nor may a student stop anyone else's server
    stu = course_servers["stu"]
    assert_hidden_by_the_hub(campus.as_browser(stu, "DELETE", "/users/sam/server"))


def test_the_course_api_refuses_another_courses_server_with_a_403_that_says_why(
    campus, course_servers
):
    ines = campus.sign_in("ines")
    assert campus.courses(ines, "GET", "").json()["courses"] == [
        {"id": "ml101", "title": "Machine Learning 101", "changes": []}
    ]
    servers = campus.courses(ines, "GET", "/ml101/servers")
    assert servers.status_code == 200, servers.text
    assert [(s["user"], s["server"]) for s in servers.json()["servers"]] == [("stu", "")]
    # PHYS201 is not hers: neither its list nor its servers
    for method, path in [("GET", "/phys201/servers"), ("DELETE", "/phys201/servers/sam")]:
        refused = campus.courses(ines, method, path)
        assert refused.status_code == 403, refused.text
        assert refused.json()["reason"] == "not-your-course"
        assert "You do not teach Physics 201" in refused.json()["message"]
    # Nor sam's PHYS201 server through her own course's address
    sideways = campus.courses(ines, "DELETE", "/ml101/servers/sam")
    assert sideways.status_code == 403, sideways.text
    assert "does not run Machine Learning 101" in sideways.json()["message"]
    assert "" in course_servers["sam"].model()["servers"]
    # A student may not use the course API at all
    stu = course_servers["stu"]
    student = campus.courses(stu, "DELETE", "/ml101/servers/sam")
    assert student.status_code == 403, student.text
    assert student.json()["reason"] == "missing-scope"


@pytest.mark.parametrize("way", ["course API", "hub admin page"])
def test_an_instructor_stops_their_students_course_server(campus, course_servers, way):
    ines = campus.sign_in("ines")
    if way == "course API":
        stopped = campus.courses(ines, "DELETE", "/ml101/servers/stu")
        assert stopped.status_code == 202, stopped.text
        assert stopped.json()["message"] == "Stopping stu's Machine Learning 101 server."
    else:
        stopped = campus.as_browser(ines, "DELETE", "/users/stu/server")
        assert stopped.status_code in (202, 204), stopped.text
    stu = course_servers["stu"]
    wait_until(lambda: "" not in stu.model().get("servers", {}), "stu's server to stop")
    # And the GPU slice went back: stu starts again
    again = stu.post_spawn_form({"profile": "ml101"})
    assert again.status_code == 200, again.text[:500]
    stu.wait_ready()


def test_students_jobs_are_read_by_their_instructor_and_nobody_else(campus):
    stu, sam, ines = (campus.sign_in(name) for name in ("stu", "sam", "ines"))
    created = campus.jobs(
        stu,
        "POST",
        "jobs",
        json={
            "input_path": "homework.ipynb",
            "notebook": notebook_json("print('stu was here')"),
            "flavor": "cpu-job",
        },
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    # Another student: refused, without a word about the job
    refused = campus.jobs(sam, "GET", f"jobs/{job_id}")
    assert refused.status_code == 403, refused.text
    assert refused.json()["reason"] == "not-yours"
    words = re.findall(r"\w+", refused.json()["message"])
    assert "stu" not in words and "homework" not in words
    assert campus.jobs(sam, "GET", f"jobs/{job_id}/logs").status_code == 403
    assert job_id not in {j["job_id"] for j in campus.jobs(sam, "GET", "jobs").json()["jobs"]}
    # The instructor of stu's course (through the provider's group) reads it, never stops it
    read = campus.jobs(ines, "GET", f"jobs/{job_id}")
    assert read.status_code == 200, read.text
    assert read.json()["owner"] == "stu"
    assert job_id in {j["job_id"] for j in campus.jobs(ines, "GET", "jobs").json()["jobs"]}
    stop = campus.jobs(ines, "PATCH", f"jobs/{job_id}", json={"status": "STOPPED"})
    assert stop.status_code in (403, 409), stop.text
    # A researcher sees nothing of it; the admin does
    rhea = campus.sign_in("rhea")
    assert campus.jobs(rhea, "GET", f"jobs/{job_id}").status_code == 403
    hpc = campus.sign_in("hpc")
    assert campus.jobs(hpc, "GET", f"jobs/{job_id}").status_code == 200


# -- refusals ------------------------------------------------------------------------------


def test_a_wrong_password_is_refused_at_the_campus_login(campus):
    session = requests.Session()
    page = browserless_login(session, campus.login_url, "stu", "not the password")
    assert page.status_code == 401
    assert page.url.startswith(campus.idp.issuer)
    assert "Wrong user name or password." in page.text
    assert not any(c.name == "jupyterhub-hub-login" for c in session.cookies)


def test_an_account_outside_the_allowed_groups_gets_a_clear_page(campus):
    session = requests.Session()
    page = browserless_login(session, campus.login_url, "olaf", PASSWORD)
    assert page.status_code == 403
    assert "Not allowed on this hub" in page.text
    assert "not in a group that may use this GPU hub" in page.text
    assert not any(c.name == "jupyterhub-hub-login" for c in session.cookies)
    assert campus.hub.api("GET", "/users/olaf").status_code == 404

    # And "Sign in as someone else" ends olaf's campus session, so the next sign-in
    # asks who is there instead of passing straight through as olaf again
    (link,) = re.findall(r'href="([^"]*)"[^>]*>\s*Sign in as someone else', page.text)
    back_at_login = sign_out_at_the_provider(session, session.get(urljoin(page.url, link)))
    assert back_at_login.url == f"{campus.hub.url}/hub/login", back_at_login.url
    ask = session.get(campus.login_url, timeout=60)
    assert ask.url.startswith(campus.idp.issuer) and login_form(ask.text) is not None


def sign_out_at_the_provider(
    session: requests.Session, logout_page: requests.Response
) -> requests.Response:
    """Confirm on the provider's "Do you want to sign out?" page; where the browser lands."""
    assert "Do you want to sign out" in logout_page.text, logout_page.text[:500]
    (form,) = page_forms(logout_page.text)
    return session.post(form.action, data={**form.inputs, "logout": "yes"}, timeout=60)


def test_logging_out_of_the_hub_ends_the_campus_session_too(campus):
    # Given a student signed in on a shared lab PC
    session = requests.Session()
    landed = browserless_login(session, campus.login_url, "stu", PASSWORD)
    assert landed.url == f"{campus.hub.url}/hub/home"

    # When she logs out of the hub and confirms at the campus login
    confirm = session.get(f"{campus.hub.url}/hub/logout", timeout=60)
    assert confirm.url.startswith(campus.idp.issuer), confirm.url
    back = sign_out_at_the_provider(session, confirm)

    # Then she is back on the hub's login page, signed out of both
    assert back.status_code == 200 and back.url == f"{campus.hub.url}/hub/login", back.url
    assert not any(c.name == "jupyterhub-hub-login" for c in session.cookies)
    # And "Sign in" shows the campus login form again rather than signing her back in
    again = session.get(campus.login_url, timeout=60)
    assert again.url.startswith(campus.idp.issuer), again.url
    assert login_form(again.text) is not None


def _with_state(url: str, state: str) -> str:
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    query["state"] = [state]
    return urlunsplit(parts._replace(query=urlencode(query, doseq=True)))


@pytest.mark.parametrize("tamper", ["altered", "other-browser"])
def test_a_tampered_state_is_refused_with_a_way_back(campus, tamper):
    callback = f"{campus.hub.url}/hub/oauth_callback"
    session = requests.Session()
    back = browserless_login(session, campus.login_url, "stu", PASSWORD, stop_at=callback)
    assert back.is_redirect
    location = back.headers["Location"]
    assert location.startswith(callback)
    if tamper == "altered":
        state = parse_qs(urlsplit(location).query)["state"][0]
        target, browser = _with_state(location, state[:-4] + "AAAA"), session
    else:
        # The callback replayed in a browser that never started this sign-in
        target, browser = location, requests.Session()
    page = follow_redirects(browser, browser.get(target, allow_redirects=False, timeout=60))
    assert page.status_code == 400, page.text[:500]
    assert "Sign-in not completed" in page.text
    assert "Sign in again" in page.text and "/hub/oauth_login" in page.text
    assert not any(c.name == "jupyterhub-hub-login" for c in browser.cookies)
