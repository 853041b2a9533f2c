"""TensorBoard in a user's server: a real ``jupyter server`` starts it over a folder of the
user's files, proxies it behind the server's login, reuses it, and stops it with the server.

The scalars are written with tensorboardX, as a notebook would.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jupyter_to_job.extension.tensorboard import API_PATH, BOARD_PATH
from jupyter_to_job.models import DescribeJob, JobStatus
from jupyter_to_job.service.jobs_page import tensorboard_link

from ..support.standalone_server import StandaloneServer, standalone_server

tensorboardX = pytest.importorskip("tensorboardX")
pytest.importorskip("tensorboard")
pytest.importorskip("jupyter_server_proxy")


def make_job(owner: str, input_path: str) -> DescribeJob:
    return DescribeJob(
        job_id="j1",
        owner=owner,
        name="train",
        status=JobStatus.RUNNING,
        create_time="2026-11-28T10:00:00Z",
        update_time="2026-11-28T10:00:00Z",
        input_path=input_path,
        own=True,
    )


def write_scalars(folder: Path, tag: str, steps: int = 3) -> None:
    writer = tensorboardX.SummaryWriter(str(folder))
    for step in range(steps):
        writer.add_scalar(tag, 1.0 / (step + 1), step)
    writer.close()


def tensorboard_processes(logdir: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "jupyter_to_job.extension.tensorboard_serve" in cmdline and str(logdir) in cmdline:
            found.append(process)
    return found


@pytest.fixture
def server(tmp_path: Path) -> Iterator[StandaloneServer]:
    with standalone_server(tmp_path) as running:
        yield running


def open_board(server: StandaloneServer, folder: str | None) -> dict:
    body = {} if folder is None else {"folder": folder}
    answer = server.request("POST", API_PATH, json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_scalar_a_notebook_wrote_is_seen_through_the_servers_tensorboard(server):
    # Given a training run that wrote a scalar under runs/ in the person's files
    write_scalars(server.root / "runs" / "lr-0.1", "loss/train")

    # When they open TensorBoard without naming a folder (the default is runs/)
    board = open_board(server, None)

    # Then it reads runs/, has event files, and its scalar tag is there over the proxy
    assert board["folder"] == "runs"
    assert board["has_event_files"] is True
    assert board["notice"] is None
    tags = server.request("GET", board["url"] + "data/plugin/scalars/tags")
    assert tags.status_code == 200, tags.text
    assert "loss/train" in tags.json()["lr-0.1"]
    page = server.request("GET", board["url"])
    assert page.status_code == 200
    assert "tb-relative-root" in page.text


def test_opening_the_same_folder_again_reuses_its_tensorboard(server):
    write_scalars(server.root / "runs" / "a", "accuracy")
    first = open_board(server, "runs")
    [process] = tensorboard_processes(server.root / "runs")

    second = open_board(server, "/runs/")

    assert second["board_id"] == first["board_id"]
    assert [p.pid for p in tensorboard_processes(server.root / "runs")] == [process.pid]
    listed = server.request("GET", API_PATH).json()["tensorboards"]
    assert [board["folder"] for board in listed] == ["runs"]


def test_each_folder_gets_its_own_tensorboard(server):
    write_scalars(server.root / "runs", "loss")
    write_scalars(server.root / "project" / "logs", "reward")

    runs = open_board(server, "runs")
    logs = open_board(server, "project/logs")

    assert runs["board_id"] != logs["board_id"]
    reward = server.request("GET", logs["url"] + "data/plugin/scalars/tags").json()
    assert "reward" in reward["."]
    loss = server.request("GET", runs["url"] + "data/plugin/scalars/tags").json()
    assert "reward" not in str(loss)


def test_a_folder_without_event_files_opens_with_a_notice(server):
    (server.root / "runs").mkdir()

    board = open_board(server, "runs")

    assert board["has_event_files"] is False
    assert "no TensorBoard event files in 'runs' yet" in board["notice"]


def test_folders_that_are_not_there_or_not_the_users_are_refused_with_a_sentence(server):
    (server.root / "notes.txt").write_text("not a folder")
    outside = server.root.parent / "elsewhere"
    outside.mkdir()
    (server.root / "link-out").symlink_to(outside)

    cases = {
        "runs": (404, "There is no folder 'runs' in your files yet"),
        "../data": (400, "goes up out of your files"),
        "link-out": (403, "leads outside your files"),
        "notes.txt": (400, "is a file, not a folder"),
    }
    for folder, (status, sentence) in cases.items():
        answer = server.request("POST", API_PATH, json={"folder": folder})
        assert answer.status_code == status, (folder, answer.text)
        assert sentence in answer.json()["message"], (folder, answer.text)
    assert tensorboard_processes(server.root) == []


def test_the_open_link_starts_tensorboard_and_goes_there(server):
    # The hub's jobs page links a job's folder this way.
    write_scalars(server.root / "experiments" / "runs", "loss")

    answer = server.request(
        "GET", f"{BOARD_PATH}/open", params={"folder": "experiments"}, allow_redirects=False
    )

    assert answer.status_code == 302
    assert answer.headers["Location"].startswith(f"/{BOARD_PATH}/")
    assert answer.headers["Location"].endswith("/")
    followed = server.request("GET", answer.headers["Location"].lstrip("/"))
    assert "tb-relative-root" in followed.text

    missing = server.request("GET", f"{BOARD_PATH}/open", params={"folder": "nowhere"})
    assert missing.status_code == 404
    assert "There is no folder 'nowhere' in your files yet" in html.unescape(missing.text)


def test_the_open_link_is_not_followed_from_another_site(server):
    # Given a link to a folder of the user's on another site's page, which the browser
    # follows with the user's cookies and says so (Sec-Fetch-Site: cross-site)
    (server.root / "elsewhere").mkdir()
    before = len(tensorboard_processes(server.root / "elsewhere"))
    for site in ("cross-site", "same-site"):
        answer = server.request(
            "GET",
            f"{BOARD_PATH}/open",
            params={"folder": "elsewhere"},
            headers={"Sec-Fetch-Site": site},
            allow_redirects=False,
        )
        # Then it is refused with a sentence, and no TensorBoard starts
        assert answer.status_code == 403
        assert "came from another site" in html.unescape(answer.text)
    assert len(tensorboard_processes(server.root / "elsewhere")) == before
    # while the hub's jobs page (the same origin behind the hub's proxy) opens it
    same = server.request(
        "GET",
        f"{BOARD_PATH}/open",
        params={"folder": "elsewhere"},
        headers={"Sec-Fetch-Site": "same-origin"},
        allow_redirects=False,
    )
    assert same.status_code == 302


def test_nothing_of_tensorboard_answers_without_the_servers_login(server):
    write_scalars(server.root / "runs", "loss")
    board = open_board(server, "runs")

    for method, path in [
        ("GET", API_PATH),
        ("POST", API_PATH),
        ("GET", f"{BOARD_PATH}/open?folder=runs"),
        ("GET", board["url"]),
        ("GET", board["url"] + "data/plugin/scalars/tags"),
    ]:
        answer = server.request(method, path, auth=False, allow_redirects=False)
        assert answer.status_code in (302, 401, 403), (method, path, answer.status_code)
        assert "loss" not in answer.text


def test_an_unknown_board_says_to_open_tensorboard_again(server):
    answer = server.request("GET", f"{BOARD_PATH}/0123456789ab/")

    assert answer.status_code == 404
    assert "Open TensorBoard again" in html.unescape(answer.text)


def test_tensorboard_serves_only_on_a_socket_only_its_user_may_enter(server):
    write_scalars(server.root / "runs", "loss")
    open_board(server, "runs")

    [process] = tensorboard_processes(server.root / "runs")
    assert [c for c in process.net_connections(kind="inet") if c.status == "LISTEN"] == []
    socket_path = process.cmdline()[process.cmdline().index("--socket") + 1]
    assert os.stat(os.path.dirname(socket_path)).st_mode & 0o077 == 0


def the_server_of(process: psutil.Process) -> psutil.Process:
    return psutil.Process(process.ppid())


def test_tensorboard_stops_when_the_server_stops(tmp_path: Path):
    with standalone_server(tmp_path) as running:
        write_scalars(running.root / "runs", "loss")
        open_board(running, "runs")
        [process] = tensorboard_processes(running.root / "runs")

        # When the server alone is asked to stop (not its process group)
        the_server_of(process).terminate()

        # Then it stops its TensorBoard on the way out
        _, alive = psutil.wait_procs([process], timeout=30)
        assert alive == [], "TensorBoard outlived its server"


def test_tensorboard_stops_when_the_server_is_killed(tmp_path: Path):
    with standalone_server(tmp_path) as running:
        write_scalars(running.root / "runs", "loss")
        open_board(running, "runs")
        [process] = tensorboard_processes(running.root / "runs")

        # When the server is killed, with no chance to stop anything itself
        the_server_of(process).kill()

        # Then Linux stops its TensorBoard (the parent-death signal it asked for)
        _, alive = psutil.wait_procs([process], timeout=30)
        assert alive == [], "TensorBoard outlived its killed server"


def test_the_hub_jobs_page_links_a_jobs_tensorboard_through_the_owners_server():
    # The hub's user/<name>/ route goes to the server when it runs, and otherwise says it
    # is not running and offers to start it; the job service never runs TensorBoard.
    job = make_job(owner="ana b", input_path="projects/mnist/train.ipynb")

    link = tensorboard_link("/hub/", job)

    assert link == ("/hub/user/ana%20b/jupyter-to-job/tensorboard/open?folder=projects%2Fmnist")
    top = tensorboard_link("/hub/", make_job(owner="ana", input_path="train.ipynb"))
    assert top.endswith("/tensorboard/open?folder=.")
