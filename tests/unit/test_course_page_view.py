"""The course page as an instructor reads it: the hub's own header, a roster of the
course's students with their server, share and GPU-hours this week, the course's
environments and storage zone, the seats in words, a Stop that asks first, and reports
that open in the browser."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from gpuspawner.policy import load_catalog
from gpuspawner.sessions.course_page import course_view
from gpuspawner.sessions.hub_page import menu_services, page_vars, templates

NOW = datetime(2026, 11, 18, 9, 30, tzinfo=UTC)  # a Wednesday, in class
CATALOG = """\
environments:
  - id: torch
    title: PyTorch
    image: campus/torch:2.4
    contains: [PyTorch 2.4, CUDA 12.4]
  - id: plain
    title: Plain Python
    image: campus/python:3.12
courses:
  - id: ml101
    title: Machine Learning 101
    instructors: [bob]
    enrolment: {users: [ana, cy, dan]}
    gpu: {fraction: 1/4}
    max_gpu_servers: 6
    environments: [torch, plain]
    schedule:
      timezone: UTC
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows:
        - {days: [Wed], start: "09:00", end: "11:00"}
"""


def server(profile: str) -> dict:
    return {"started": "2026-11-18T09:05:00Z", "user_options": {"profile": profile}}


def page(tmp_path: Path, users: list[dict], viewer: dict, history: list | None = None) -> str:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    course = catalog.courses_by_id["ml101"]
    view = course_view(
        catalog,
        course,
        users,
        NOW,
        history or [],
        "3.5",
        students=["ana", "cy", "dan"],
        week_hours={"ana": "1.2"},
    )
    return templates.get_template("course_page.html").render(
        **page_vars("/hub/", viewer, "token"),
        views=[view],
        bounds=catalog.settings.instructor_bounds,
        message="",
        problems=[],
        hub_prefix="/hub/",
        page_url="/services/course-sessions/courses",
        xsrf="token",
    )


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_instructor_sees_the_roster_setup_and_seats_under_the_hubs_header(tmp_path):
    # Given ana runs ML101 now, cy and dan do not
    html = page(tmp_path, [{"name": "ana", "servers": {"": server("ml101")}}], {"name": "bob"})

    # Then the page wears the hub's header: its logo, Home, Token, the dark-mode toggle
    # (which the hub's darkmode.js looks for) and bob's sign-out; no Admin for bob
    assert 'id="dark-theme-toggle"' in html
    assert 'href="/hub/home">Home</a>' in html and 'href="/hub/logout"' in html
    assert 'href="/hub/admin"' not in html
    # And the roster lists each student with their server, share and GPU-hours this week
    rows = dict(re.findall(r'<tr data-student="(\w+)">(.*?)</tr>', html, re.S))
    assert (
        text_of(rows["ana"]) == "ana Running since 09:05 UTC , stops 11:10 UTC 1/4 of a GPU 1.2"
    )  # (class end + grace; each time names its zone)
    assert text_of(rows["cy"]) == "cy No server — 0.0"
    # And the course's environments and zone
    assert "PyTorch (PyTorch 2.4, CUDA 12.4); Plain Python" in text_of(html)
    assert "Production: its folders are kept" in text_of(html)
    # And the seats read as English: "1 of 6 GPU seats", not "1 of 6 GPU seat"
    assert "1 of 6 GPU seats in use: ana." in text_of(html)
    # And Stop is a form the page's script confirms before sending
    assert 'data-stop-server="ana"' in html and "window.confirm(" in html
    # And the reports open as CSV and JSON from the page
    assert re.search(
        r'href="[^"]*api/usage\?course=ml101&amp;from=2026-09-14&amp;to=2026-12-18'
        r'&amp;by=user&amp;format=csv"',
        html,
    )
    assert "format=json" in html


def test_a_hub_admin_gets_the_admin_link(tmp_path):
    html = page(tmp_path, [], {"name": "root", "admin": True})
    assert 'href="/hub/admin"' in html
    assert "0 of 6 GPU seats in use." in text_of(html)


def test_the_recent_changes_tell_their_time_with_its_zone_for_the_readers_own(tmp_path):
    # Given bob cancelled a class at 09:12 UTC
    entry = {
        "time": "2026-11-18T09:12:40+00:00",
        "detail": "bob cancelled the class of Wed 25 Nov.",
    }
    html = page(tmp_path, [], {"name": "bob"}, history=[entry])

    # Then the change's time names its zone, and is a moment the page tells again in the
    # reader's zone (where it said "2026-11-18 09:12", zone unsaid)
    assert (
        '<time datetime="2026-11-18T09:12:40+00:00" data-local-time>2026-11-18 09:12 UTC</time>'
        in html
    )
    assert "time[data-local-time]" in html  # (templates/local_times.html's script)


def test_class_and_server_times_name_their_zone_for_the_readers_own(tmp_path):
    # Given ana's ML101 server started at 09:05 UTC, in the Wednesday class of 09:00-11:00
    html = page(tmp_path, [{"name": "ana", "servers": {"": server("ml101")}}], {"name": "bob"})

    # Then the class's times are clock times of their listed day, each naming its zone,
    # which the page tells again in the reader's zone (where they said "09:00–11:00")
    wednesday = re.search(r'<tr class="" data-day="2026-11-18".*?</tr>', html, re.S)
    assert wednesday is not None
    assert (
        '<td class="course-class-time">'
        '<time datetime="2026-11-18T09:00:00+00:00" data-local-time="clock" '
        'data-day="2026-11-18">09:00 UTC</time>–'
        '<time datetime="2026-11-18T11:00:00+00:00" data-local-time="clock" '
        'data-day="2026-11-18">11:00 UTC</time></td>'
    ) in wednesday.group(0)
    # And so are the server's start and stop, in the servers table and the roster
    started = (
        '<time datetime="2026-11-18T09:05:00+00:00" data-local-time="clock" '
        'data-day="2026-11-18">09:05 UTC</time>'
    )
    stops = (
        '<time datetime="2026-11-18T11:10:00+00:00" data-local-time="clock" '
        'data-day="2026-11-18">11:10 UTC</time>'
    )
    assert f"<td>{started}</td>" in html
    assert f"<td data-stops>{stops}" in html
    assert f"<td data-server-state>Running since {started}, stops {stops}</td>" in html
    # And the page says in whose zone the class times are entered
    assert "the class times you enter are in the course's, UTC." in text_of(html)
    # (templates/local_times.html tells a clock time as a clock time)
    assert 'getAttribute("data-local-time") === "clock"' in html


HUB_SERVICES = {
    "course-sessions": {
        "name": "course-sessions",
        "url": "http://127.0.0.1:10101",
        "prefix": "/services/course-sessions/",
        "display": True,
        "info": {"display_name": "GPU map"},
    },
    "jupyter-to-job": {
        "name": "jupyter-to-job",
        "url": "http://127.0.0.1:10102",
        "prefix": "/services/jupyter-to-job/",
        "display": True,
        "info": {"display_name": "Jobs"},
    },
    "grafana": {
        "name": "grafana",
        "url": "http://127.0.0.1:3000",
        "prefix": "/services/grafana/",
        "display": True,
        "info": {},
    },
    "announcer": {"name": "announcer", "url": "", "prefix": "", "display": True, "info": {}},
    "hidden": {
        "name": "hidden",
        "url": "http://127.0.0.1:10103",
        "prefix": "/services/hidden/",
        "display": False,
        "info": {},
    },
}


def test_the_services_menu_lists_what_the_viewer_may_open_as_the_hubs_pages_do(tmp_path):
    # Given bob's token may open the GPU map and the jobs page, not the admins' Grafana
    bobs_scopes = [
        "access:services!service=course-sessions",
        "access:services!service=jupyter-to-job",
        "read:users:name!user=bob",
    ]
    # When his course page is drawn with his menu
    menu = menu_services(HUB_SERVICES, bobs_scopes)
    html = templates.get_template("course_page.html").render(
        **page_vars("/hub/", {"name": "bob"}, "token", menu), views=[], error="nothing"
    )
    # Then the hub's Services menu lists them by their display names, where they lead
    assert "Services</a>" in html
    entries = re.findall(r'<a class="dropdown-item" href="([^"]+)">([^<]+)</a>', html)
    assert entries == [
        ("/services/course-sessions/", "GPU map"),
        ("/services/jupyter-to-job/", "Jobs"),
    ]
    # And an admin (access:services on all) also sees Grafana; never a service without an
    # address or one the hub does not show
    assert [s.name for s in menu_services(HUB_SERVICES, ["access:services"])] == [
        "course-sessions",
        "grafana",
        "jupyter-to-job",
    ]
    # And a token that says nothing of services shows no menu at all
    assert menu_services(HUB_SERVICES, []) == []
    bare = templates.get_template("course_page.html").render(
        **page_vars("/hub/", {"name": "bob"}, "token"), views=[], error="nothing"
    )
    assert "Services</a>" not in bare
