"""The GPU map page and its JSON API, served by the course-sessions service of a real hub.

Given two GPUs of one machine whose allocation ledger holds three course servers and a
research job (tests/support/gpu_map_scene.py), each person asks the map with their own
hub token, or opens the page signed in through the hub's OAuth, and sees the names their
role allows: the admin everyone's, each instructor their own course's students', a
student only themselves ("you").
"""

from __future__ import annotations

import json
import re

import pytest
import requests

from gpuspawner.core.inventory import simulated_gpus

from ..support import gpu_map_scene as scene
from ..support.hubprocess import free_loopback_ports

pytestmark = pytest.mark.integration

SERVICE = "/services/course-sessions"


def hub_config(tmp_path) -> str:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(scene.CATALOG)
    (port,) = free_loopback_ports(1)
    return f"""
from gpuspawner.policy import load_catalog
from gpuspawner.policy.roles import course_roles
from gpuspawner.sessions import course_sessions_service, sessions_service_role
from gpuspawner.sessions.registration import reclaim_access_scopes

c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = set({scene.PEOPLE!r})
c.Authenticator.admin_users = {{{scene.ADMIN!r}}}
c.JupyterHub.load_groups = {{g: {{"users": u}} for g, u in {scene.INSTRUCTOR_GROUPS!r}.items()}}
c.JupyterHub.services.append(course_sessions_service(
    {str(catalog)!r}, interval=60, port={port},
    allocation_ledger={str(tmp_path / "gpu-allocations.json")!r},
    simulated_gpus={scene.SIMULATED_GPUS!r},
))
c.JupyterHub.load_roles.append(sessions_service_role())
c.JupyterHub.load_roles.extend(course_roles(load_catalog({str(catalog)!r}), job_service=None))
c.JupyterHub.load_roles.append(
    {{"name": "user", "scopes": ["self", *reclaim_access_scopes()]}}
)
"""


@pytest.fixture
def hub(start_hub, tmp_path):
    running = start_hub(hub_config(tmp_path))
    scene.book(tmp_path / "gpu-allocations.json", simulated_gpus(scene.SIMULATED_GPUS))
    return running


def ask_map(hub, token: str | None) -> requests.Response:
    headers = {"Authorization": f"token {token}"} if token else {}
    return requests.get(f"{hub.url}{SERVICE}/api/gpus", headers=headers, timeout=30)


def test_each_person_sees_the_names_their_role_allows_servers_and_the_job(hub, browserless_user):
    for person, expected in sorted(scene.EXPECTED_NAMES.items()):
        # When the person asks the map with their own hub token
        reply = ask_map(hub, browserless_user(hub, person).token)
        # Then they see both GPUs, all four slices, and only the names they may see
        assert reply.status_code == 200, reply.text
        picture = reply.json()
        assert picture["viewer"]["name"] == person
        assert picture["totals"] == {
            "gpus": 2,
            "slices": 4,
            "servers": 3,
            "jobs": 1,
            "free_gpus": 0,
        }
        assert picture["where"] == "one machine"
        assert scene.names_in(picture) == expected, person
        hidden = set(scene.PEOPLE) - expected - {person}
        assert [name for name in hidden if f'"{name}"' in reply.text] == [], person
        # And their own slice, if any, says "you"
        own = [s["label"] for g in picture["gpus"] for s in g["slices"] if s["mine"]]
        assert own == (["you"] if person in {"ana", "rex"} else []), person

    # And the job is the admin's to identify, and anonymous to a student
    def job_as_seen_by(person):
        picture = ask_map(hub, browserless_user(hub, person).token).json()
        return next(s for g in picture["gpus"] for s in g["slices"] if s["kind"] == "job")

    admin_view, student_view = job_as_seen_by("root"), job_as_seen_by("ana")
    assert (admin_view["holder"], admin_view["job_id"], admin_view["fraction"]) == (
        "rex",
        "7f3a",
        "1/2",
    )
    assert (student_view["holder"], student_view["job_id"], student_view["label"]) == (
        None,
        None,
        "vision-lab",
    )


def test_a_student_opens_the_page_through_the_hub_and_the_services_menu(hub, browserless_user):
    # Given nobody signed in, the API says how to sign in
    reply = ask_map(hub, None)
    assert reply.status_code == 401
    assert "Sign in to the hub" in reply.json()["message"]
    # Given ana is signed in to the hub
    ana = browserless_user(hub, "ana")
    home = ana.login()
    # Then the hub's Services menu links to the service, whose address leads to the map
    assert f'href="{SERVICE}/"' in home.text
    page = ana.session.get(f"{hub.url}{SERVICE}/", timeout=60)
    # (signing in to the service through the hub's OAuth, without a confirmation page)
    assert page.status_code == 200, page.text[:500]
    assert page.url.endswith(f"{SERVICE}/gpus")
    assert "<h1" in page.text and "GPU map" in page.text
    # And the page carries the picture she may see; the same cookie reads the JSON API
    initial = re.search(
        r'<script id="gpumap-initial" type="application/json">(.*?)</script>', page.text, re.S
    )
    picture = json.loads(initial.group(1))
    assert scene.names_in(picture) == {"ana"}
    assert "ben" not in page.text and "cleo" not in page.text
    # (the page's script sends its XSRF token, as the hub's OAuth asks of a fetch; a
    # cross-site fetch without it gets nothing)
    xsrf = re.search(r"const XSRF = \"([^\"]+)\"", page.text).group(1)
    fetch = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin"}
    again = ana.session.get(
        f"{hub.url}{SERVICE}/api/gpus", headers={**fetch, "X-XSRFToken": xsrf}, timeout=30
    )
    assert again.status_code == 200 and scene.names_in(again.json()) == {"ana"}
    forged = ana.session.get(f"{hub.url}{SERVICE}/api/gpus", headers=fetch, timeout=30)
    assert forged.status_code == 403 and "ana" not in forged.text
