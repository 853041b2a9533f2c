"""Course-time profiles on a real JupyterHub with LocalGPUSpawner and real single-user servers.

Scenarios from the point of view of students: what the spawn page offers, what
starts, what is refused and how, and what survives a hub restart.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import gpuspawner

from ..support.course_catalogs import catalog, course, minute, now, spawner_config, write_catalog
from ..support.hub_pages import cards, page_error, process_environment

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'
TWO_GPUS = '[{"model": "RTX 4090", "memory": "24GiB", "count": 2}]'


def open_class(tmp_path: Path, students: list[str], **options) -> tuple[Path, datetime]:
    """A catalog folder whose course ML101 (``ml101``) started 5 minutes ago and runs 90
    minutes more, for ``students``; ``options`` as :func:`course` takes them. Returns the
    folder and the class end."""
    t = minute(now())
    catalog_dir = tmp_path / "catalog"
    end = t + timedelta(minutes=90)
    write_catalog(
        catalog_dir,
        catalog(
            course("ml101", start=t - timedelta(minutes=5), end=end, students=students, **options)
        ),
    )
    return catalog_dir, end


def spawn_progress(user) -> list[str]:
    """The messages of the hub's spawn progress event stream, until the server is ready.

    Asks again until the spawn is pending (the stream is refused before it starts).
    """
    for _ in range(600):
        response = user.api("GET", f"/users/{user.name}/server/progress", stream=True, timeout=120)
        if response.status_code == 200:
            break
        response.close()
        time.sleep(0.05)
    messages = []
    for line in response.iter_lines(decode_unicode=True):
        if line and line.startswith("data:"):
            event = json.loads(line[5:])
            messages.append(event.get("message", ""))
            if event.get("ready") or event.get("failed"):
                break
    response.close()
    return messages


def allocation_of(hub, user: str, server: str = "") -> dict:
    model = hub.api("GET", f"/users/{user}").json()
    return model["servers"][server]["state"]["gpuspawner"]["allocation"]


def test_a_course_profile_is_offered_inside_its_window_and_gone_after(
    start_hub, browserless_user, tmp_path
):
    # Given a course in its lead time (class starts in 5 minutes, lead time 10 minutes)
    # and a course whose class ended an hour ago
    t = minute(now())
    catalog_dir = tmp_path / "catalog"
    soon = course(
        "ml101",
        start=t + timedelta(minutes=5),
        end=t + timedelta(minutes=65),
        students=["ana"],
        lead="10m",
    )
    over = course(
        "cv201", start=t - timedelta(minutes=120), end=t - timedelta(minutes=60), students=["ana"]
    )
    write_catalog(catalog_dir, catalog(soon, over))
    hub = start_hub(spawner_config(catalog_dir, ONE_GPU))
    ana = browserless_user(hub, "ana")
    ana.login()

    # When Ana opens the spawn page
    page = ana.get_spawn_page()

    # Then the course in its lead time is startable, with seats, and the ended one is not
    shown = cards(page.text)
    assert shown["ml101"]["available"] is True
    assert "Open now for the" in shown["ml101"]["status"]
    assert "GPU seats left" in shown["ml101"]["text"]
    assert "1/2 of an RTX 4090, 8 GiB" in shown["ml101"]["text"]
    assert shown["cv201"]["available"] is False
    assert shown["cv201"]["status"].startswith("Opens ")
    assert shown["cpu"]["available"] is True

    # When the window of ml101 is over (the catalog now says it ended an hour ago)
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=t - timedelta(minutes=120),
                end=t - timedelta(minutes=60),
                students=["ana"],
            ),
            over,
        ),
    )

    # Then the card says when it opens next, and submitting it anyway is refused clearly
    assert cards(ana.get_spawn_page().text)["ml101"]["available"] is False
    refused = ana.post_spawn_form({"profile": "ml101"})
    assert refused.status_code == 403
    assert "ML101 cannot be started now. Opens " in page_error(refused.text)
    assert ana.model()["servers"] == {}


def test_two_students_get_distinct_slices_and_a_third_is_refused_when_the_gpu_is_full(
    start_hub, browserless_user, tmp_path
):
    # Given one 24 GiB GPU and an open course giving each student half of it
    catalog_dir, class_end = open_class(tmp_path, ["ana", "ben", "cai"], seats=10)
    hub = start_hub(spawner_config(catalog_dir, ONE_GPU))
    ana, ben, cai = (browserless_user(hub, n) for n in ("ana", "ben", "cai"))
    for student in (ana, ben, cai):
        student.login()

    # When Ana and Ben start the course from the spawn page
    for student in (ana, ben):
        response = student.post_spawn_form({"profile": "ml101"})
        assert response.status_code == 200, page_error(response.text)
        student.wait_ready()

    # Then each server runs with its own half of the GPU, in its real environment
    slices = [allocation_of(hub, s.name) for s in (ana, ben)]
    assert [a["device_ids"] for a in slices] == [["sim-0"], ["sim-0"]]
    assert [a["fraction"] for a in slices] == ["1/2", "1/2"]
    assert slices[0]["key"] != slices[1]["key"]
    env = process_environment(hub, "ana")
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["GPUSPAWNER_GPU_SHARE"] == "1/2 of an RTX 4090, 8 GiB"
    assert env["GPUSPAWNER_GPU_MEMORY_MIB"] == "8192"
    assert env["GPUSPAWNER_TORCH_MEMORY_FRACTION"] == "0.333"
    assert env["GPUSPAWNER_SESSION_END"].startswith(
        (class_end + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M")
    )
    assert ana.get_from_server("api/status").status_code == 200

    # And Cai sees no seats left, and is told why when he tries anyway
    assert "No GPU seats left right now" in cards(cai.get_spawn_page().text)["ml101"]["text"]
    refused = cai.post_spawn_form({"profile": "ml101"})
    assert refused.status_code == 409
    message = page_error(refused.text)
    assert "All GPUs are taken right now: 1 of 1 GPU is shared by 2 running servers" in message
    assert "start a profile without a GPU" in message

    # And once Ben stops, Cai gets the freed half
    ben.stop_server()
    assert cai.post_spawn_form({"profile": "ml101"}).status_code == 200
    cai.wait_ready()
    assert allocation_of(hub, "cai")["device_ids"] == ["sim-0"]


def test_the_course_seat_limit_refuses_the_next_student_with_the_reason(
    start_hub, browserless_user, tmp_path
):
    # Given plenty of GPU capacity but a course limited to 2 concurrent GPU servers
    catalog_dir, _ = open_class(tmp_path, ["ana", "ben", "cai"], seats=2, gpu="{fraction: 1/4}")
    hub = start_hub(spawner_config(catalog_dir, TWO_GPUS))
    users = [browserless_user(hub, n) for n in ("ana", "ben", "cai")]

    # When three students start it through the REST API
    # (the first one follows the spawn progress while it starts)
    assert users[0].token  # her account and token exist before both threads use them
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(spawn_progress, users[0])
        first = users[0].spawn_via_api({"profile": "ml101"})
        progress = following.result(timeout=120)
    second = users[1].spawn_via_api({"profile": "ml101"})
    third = users[2].spawn_via_api({"profile": "ml101"})

    # Then two start and the third is refused with a 409 that names the limit
    assert first.status_code in (201, 202) and second.status_code in (201, 202)
    assert third.status_code == 409
    assert "All 2 GPU seats of ML101 are taken" in third.json()["message"]
    for user in users[:2]:
        user.wait_ready()
    # And the progress told the first student what was decided and where, before "ready"
    assert progress[:2] == [
        "Server requested",
        "Checking your profile, its class window and GPU capacity",
    ], progress
    assert re.match(r"ML101: 1/4 of a GPU on GPU \d \(RTX 4090, 24 GiB, simulated\)", progress[2])
    assert progress[3] == "Starting JupyterLab"
    assert progress[-1].startswith("Server ready")


def test_a_hub_restart_keeps_every_allocation_and_double_books_none(
    start_hub, browserless_user, tmp_path
):
    # Given one GPU fully shared by two running course servers
    t = minute(now())
    catalog_dir = tmp_path / "catalog"
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=t - timedelta(minutes=5),
                end=t + timedelta(minutes=90),
                students=["ana", "ben", "cai"],
            )
        ),
    )
    # (allocations also go through the ledger file shared with the job service)
    ledger = tmp_path / "allocations.json"
    hub = start_hub(
        spawner_config(catalog_dir, ONE_GPU, f"c.GPUAdmission.allocation_ledger = {str(ledger)!r}")
    )
    ana, ben, cai = (browserless_user(hub, n) for n in ("ana", "ben", "cai"))
    for student in (ana, ben):
        assert student.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
        student.wait_ready()
    before = {s.name: allocation_of(hub, s.name) for s in (ana, ben)}

    # When the hub restarts (servers keep running)
    hub.restart()

    # Then both servers are still running with the same slices
    for student in (ana, ben):
        assert student.wait_ready()["ready"] is True
        assert student.get_from_server("api/status").status_code == 200
    assert {s.name: allocation_of(hub, s.name) for s in (ana, ben)} == before
    recorded = json.loads(ledger.read_text())["allocations"]
    assert sorted(a["key"] for a in recorded) == ["server:ana/", "server:ben/"]

    # And the rebuilt pool still knows the GPU is full: a third student is refused
    refused = cai.spawn_via_api({"profile": "ml101"})
    assert refused.status_code == 409
    assert "All GPUs are taken right now" in refused.json()["message"]

    # And a slice freed after the restart is given out exactly once
    ana.stop_server()
    assert cai.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    cai.wait_ready()
    assert ana.spawn_via_api({"profile": "ml101"}).status_code == 409


def test_a_refused_start_is_one_info_line_in_the_hub_log_not_an_error_with_a_traceback(
    start_hub, browserless_user, tmp_path
):
    # Given a course whose class is over, and a GPU that is free
    t = minute(now())
    catalog_dir = tmp_path / "catalog"
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=t - timedelta(hours=3),
                end=t - timedelta(hours=2),
                students=["ana"],
                gpu="{fraction: 1/4}",
            )
        ),
    )
    hub = start_hub(spawner_config(catalog_dir, ONE_GPU))
    ana = browserless_user(hub, "ana")
    ana.login()

    # When she starts it from the spawn form, and then through the REST API
    page = ana.post_spawn_form({"profile": "ml101"})
    refused = ana.spawn_via_api({"profile": "ml101"})

    # Then she is told why both times
    assert page_error(page.text), page.text[-2000:]
    assert refused.status_code == 403, refused.text

    # And the hub logged each refusal as one info line with its reason, and no error,
    # warning or traceback about it
    lines = hub.log_text().splitlines()
    about_it = [line for line in lines if "ML101 cannot be started now" in line]
    assert len(about_it) == 2, about_it
    assert all(line.startswith("[I") and line.endswith("(refused: closed)") for line in about_it)
    assert "Not starting ana's server" in about_it[0], about_it
    assert not [line for line in lines if "Traceback" in line or line.startswith("[E")], lines


def test_the_home_page_tells_the_running_course_and_offers_to_change_it(
    start_hub, browserless_user, tmp_path
):
    # Given the hub uses GPUSpawner's home page, and ana's ML101 class is open
    catalog_dir, class_end = open_class(tmp_path, ["ana"], gpu="{fraction: 1/4}")
    templates = Path(gpuspawner.__file__).parent / "templates"
    hub = start_hub(
        spawner_config(catalog_dir, ONE_GPU, f"c.JupyterHub.template_paths = [{str(templates)!r}]")
    )
    ana = browserless_user(hub, "ana")
    ana.login()

    # When she has started her course server and opens the hub's home page
    assert ana.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    ana.wait_ready()
    home = ana.session.get(f"{hub.url}/hub/home", timeout=60)

    # Then it names the course, the share and when the hub stops it, in the course's zone
    assert home.status_code == 200
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", home.text))
    stop = class_end + timedelta(minutes=10)  # the catalog's grace
    assert "Your server: ML101" in text
    assert "1/4 of an RTX 4090" in text
    assert f"The hub stops it at {stop:%H:%M} UTC" in text
    assert f'data-stops-at="{stop.isoformat()}"' in home.text
    # And it offers to change course
    assert 'id="change-course"' in home.text

    # When her server stops, the home page no longer describes one
    assert ana.api("DELETE", ana.server_api_path()).status_code in (202, 204)
    for _ in range(120):
        if not ana.model()["servers"]:
            break
        time.sleep(0.5)
    home = ana.session.get(f"{hub.url}/hub/home", timeout=60)
    assert "Your server:" not in home.text and 'id="change-course"' not in home.text


def test_the_start_duration_metric_counts_the_start_as_its_owner_waits(
    start_hub, browserless_user, tmp_path
):
    # Given ana's ML101 class is open, on a hub whose metrics page is open to read
    catalog_dir, _ = open_class(tmp_path, ["ana"], gpu="{fraction: 1/4}")
    hub = start_hub(
        spawner_config(catalog_dir, ONE_GPU, "c.JupyterHub.authenticate_prometheus = False")
    )
    ana = browserless_user(hub, "ana")
    ana.login()

    # When she starts her course server and it answers
    assert ana.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    ana.wait_ready()

    # Then the GPU start's duration covers the wait until the server answered, as the
    # hub's own histogram of the whole spawn does (it begins a moment earlier), not only
    # the launch of the process
    def histogram_sum(name: str, labels: str = "") -> float:
        page = ana.session.get(f"{hub.url}/hub/metrics", timeout=30).text
        found = re.search(rf"^{name}_sum{{[^}}]*{labels}[^}}]*}} (\S+)$", page, re.M)
        assert found, f"no {name}_sum{{{labels}}} on the metrics page"
        return float(found.group(1))

    spawn = histogram_sum("jupyterhub_server_spawn_duration_seconds", 'status="success"')
    # (counted as the hub sees the server answer, which its spawner notices a moment later)
    for _ in range(50):
        if (
            "gpuspawner_server_start_duration_seconds_sum{"
            in ana.session.get(f"{hub.url}/hub/metrics", timeout=30).text
        ):
            break
        time.sleep(0.1)
    started = histogram_sum("gpuspawner_server_start_duration_seconds", 'course="ml101"')
    assert spawn > 1  # a real server's start: seconds, not the launch's tenth of one
    # (the spawner notices the answer within its 0.1 s look, hence the second's slack)
    assert 0.8 * spawn <= started <= spawn + 1
