"""The course page lists the Run as Job jobs of the viewer's students, read from the job
service of a real hub (tests/support/job_hub.py: ines teaches ML101 to alice and bob
through the group ml101-students; olga teaches PHYS201 to pete).

Alice runs a notebook as a job; ines sees it on her course page, with its status and
flavor; olga, who does not teach alice, does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from jupyter_to_job.hub import job_server_token_scopes

from ..support.hubprocess import BrowserlessUser, free_loopback_ports
from ..support.job_hub import JobHub, start_job_hub, stopped_afterwards
from ..support.notebooks import notebook_json

PAGE = "/services/course-sessions/courses"


def sessions_with_jobs(catalog_folder_hint: str) -> str:
    (port,) = free_loopback_ports(1)
    return f"""
from gpuspawner.sessions import course_sessions_service, sessions_service_role
from gpuspawner.sessions.registration import with_reclaim_access
jobs = next(s for s in c.JupyterHub.services if s["name"] == "jupyter-to-job")
c.JupyterHub.services.append(course_sessions_service(
    {catalog_folder_hint!r}, interval=60, port={port},
    job_service_url=jobs["url"] + "/services/jupyter-to-job/",
))
c.JupyterHub.load_roles.append(sessions_service_role(job_service="jupyter-to-job"))
c.JupyterHub.load_roles = with_reclaim_access(c.JupyterHub.load_roles)
"""


@pytest.fixture(scope="module")
def hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JobHub]:
    workdir = tmp_path_factory.mktemp("course-page-jobs")
    extra = sessions_with_jobs(str(workdir / "catalog.yaml"))
    with stopped_afterwards(start_job_hub(workdir, extra), request) as setup:
        setup.tokens["alice"] = setup.token("alice", job_server_token_scopes())
        yield setup


def course_card(page_text: str, course_id: str) -> str:
    match = re.search(
        rf'<section class="course-card" id="course-{course_id}".*?</section>', page_text, re.S
    )
    assert match, page_text[:1000]
    return match.group(0)


def test_the_instructor_sees_her_students_jobs_and_another_instructor_does_not(hub):
    # Given alice ran a notebook as a job on the CPU flavor
    created = hub.as_("alice").create(
        notebook_json("print('hello')"), name="homework-3", flavor="cpu-job"
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    hub.as_("alice").wait_for(job_id, "COMPLETED", "FAILED")

    # When ines opens her course page
    ines = BrowserlessUser(hub.hub, "ines")
    ines.login()
    page = ines.session.get(f"{hub.hub.url}{PAGE}", timeout=60)
    assert page.status_code == 200, page.text[:500]

    # Then ML101's card lists alice's job with its status and flavor
    card = course_card(page.text, "ml101")
    row = re.search(rf'<tr data-job="{job_id}">(.*?)</tr>', card, re.S)
    assert row, card
    cells = re.findall(r"<td>(.*?)</td>", row.group(1))
    assert cells[:4] == ["homework-3", "alice", "completed", "cpu-job"]

    # And olga, who teaches PHYS201, sees no job of alice's
    olga = BrowserlessUser(hub.hub, "olga")
    olga.login()
    hers = olga.session.get(f"{hub.hub.url}{PAGE}", timeout=60)
    assert hers.status_code == 200
    assert "course-ml101" not in hers.text
    assert job_id not in hers.text and "homework-3" not in hers.text
    assert "No jobs of your students." in course_card(hers.text, "phys201")
