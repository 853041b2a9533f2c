"""Every file path the server extension takes is checked before it is used.

A real ``jupyter server`` in standalone mode. A link out of the user's files (even to a file
the server could read there), a link to nothing or to itself, a folder, a named pipe, and a
file or folder the server's account may not read are each refused with a 4xx and a sentence
that says why, by every endpoint that takes a path: run a job, read its parameters,
schedule it (alone or in a pipeline), run a pipeline or a pipeline template, read or save a
template, save a job's output. Never a 500.

Root reads every file, so the unreadable cases run a second server as a throwaway system
account, with a link into a folder only root may enter, as on the workstation hub.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..support.hubprocess import REPO_ROOT
from ..support.notebooks import notebook_json
from ..support.os_accounts import (
    crossable_by_everyone,
    needs_root_for_accounts,
    throwaway_account,
)
from ..support.standalone_server import StandaloneServer, standalone_server

NOTEBOOK = json.dumps(notebook_json(("rate = 0.1", ["parameters"]), "print(rate)"))
TEMPLATE = "name: Train\nstages:\n  - name: train\n    jobs:\n      - input_path: train.ipynb\n"
CONTENT = {".ipynb": NOTEBOOK, ".pipeline.yaml": TEMPLATE, ".html": "<p>report</p>"}
SERVER_ACCOUNT = "cgh-files-test"


def pipeline(input_path: str) -> dict[str, Any]:
    return {"name": "Train", "stages": [{"name": "train", "jobs": [{"input_path": input_path}]}]}


Request = Callable[[str], tuple[str, str, dict[str, Any]]]

# Each endpoint that reads a file the user names: (suffix of the file it reads, request).
READERS: dict[str, tuple[str, Request]] = {
    "run a job": (".ipynb", lambda p: ("POST", "jobs", {"json": {"input_path": p}})),
    "read its parameters": (".ipynb", lambda p: ("GET", "parameters", {"params": {"path": p}})),
    "schedule it": (
        ".ipynb",
        lambda p: (
            "POST",
            "schedules",
            {"json": {"job": {"input_path": p}, "interval_seconds": 3600}},
        ),
    ),
    "schedule it in a pipeline": (
        ".ipynb",
        lambda p: ("POST", "schedules", {"json": {"pipeline": pipeline(p), "cron": "0 3 * * *"}}),
    ),
    "run it in a pipeline": (".ipynb", lambda p: ("POST", "pipelines", {"json": pipeline(p)})),
    "read a template": (
        ".pipeline.yaml",
        lambda p: ("GET", "pipeline-templates", {"params": {"path": p}}),
    ),
    "run a template": (
        ".pipeline.yaml",
        lambda p: ("POST", "pipelines", {"json": {"template_path": p}}),
    ),
}

# Each endpoint that writes where the user says: (suffix of the file it writes, request).
WRITERS: dict[str, tuple[str, Request]] = {
    "save a job's notebook": (
        ".ipynb",
        lambda p: ("POST", "jobs/some-job/outputs/ipynb/save", {"json": {"path": p}}),
    ),
    "save a job's page": (
        ".html",
        lambda p: ("POST", "jobs/some-job/outputs/html/save", {"json": {"path": p}}),
    ),
    "save a template": (
        ".pipeline.yaml",
        lambda p: (
            "POST",
            "pipeline-templates",
            {"json": {"path": p, "pipeline": pipeline("train.ipynb"), "overwrite": True}},
        ),
    ),
}


def ask(server: StandaloneServer, request: Request, path: str) -> tuple[int, dict[str, Any]]:
    method, api_path, kwargs = request(path)
    answer = server.jobs_api(method, api_path, **kwargs)
    try:
        return answer.status_code, answer.json()
    except ValueError:
        return answer.status_code, {"message": answer.text}


def files(folder: Path, stem: str) -> None:
    """``stem`` + each suffix in ``folder``, with content of its kind."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, text in CONTENT.items():
        (folder / f"{stem}{suffix}").write_text(text)


# -- as root: what any account meets ------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneServer]:
    """A server whose files hold every kind of path that is not a plain file of theirs."""
    work = tmp_path_factory.mktemp("user-file-paths")
    files(work / "elsewhere", "nb")  # readable, but outside the server's root
    with standalone_server(work) as running:
        root = running.root
        files(root / "real", "ok")
        (root / "notes.txt").write_text("a file, not a folder")
        (root / "out").symlink_to(work / "elsewhere")
        for suffix in CONTENT:
            (root / f"linked-out{suffix}").symlink_to(work / "elsewhere" / f"nb{suffix}")
            (root / f"linked-in{suffix}").symlink_to(f"real/ok{suffix}")
            (root / f"gone{suffix}").symlink_to(f"nowhere/gone{suffix}")
            (root / f"loop{suffix}").symlink_to(f"loop{suffix}")
            (root / f"folder{suffix}").mkdir()
            os.mkfifo(root / f"pipe{suffix}")
        yield running


READ_REFUSALS = [
    # (the path's stem, status, reason, words of the sentence)
    ("linked-out", 403, "outside-root", "leads outside your files"),
    ("out/nb", 403, "outside-root", "leads outside your files"),
    ("gone", 404, "dangling-link", "is a link to a file that does not exist any more"),
    ("loop", 400, "link-loop", "is a link that leads back to itself"),
    ("folder", 400, "is-a-folder", "is a folder, not a"),
    ("pipe", 400, "not-a-file", "is a named pipe, not a file"),
]


@pytest.mark.parametrize("endpoint", READERS)
@pytest.mark.parametrize(("stem", "status", "reason", "words"), READ_REFUSALS)
def test_a_path_that_is_not_a_plain_file_of_the_user_is_refused_with_a_sentence(
    server, endpoint, stem, status, reason, words
):
    # Given a path that leads out of the user's files, to nothing, to a folder or a pipe
    suffix, request = READERS[endpoint]
    path = stem + suffix
    # When the user names it to the endpoint
    code, answer = ask(server, request, path)
    # Then it is refused with a 4xx that names the path and says why
    assert (code, answer.get("reason")) == (status, reason), answer
    assert f"{path!r} {words}" in answer["message"] or words in answer["message"], answer
    assert str(server.root) not in answer["message"]  # the server's own folders stay its own


def test_a_link_inside_the_users_files_is_followed(server):
    # Given links to a notebook and a template in another folder of the user's files
    # When the user names the links, then they read the files they point to
    code, notebook = ask(server, READERS["read its parameters"][1], "linked-in.ipynb")
    assert code == 200, notebook
    assert [(p["name"], p["default"]) for p in notebook["parameters"]] == [("rate", "0.1")]
    code, template = ask(server, READERS["read a template"][1], "linked-in.pipeline.yaml")
    assert code == 200, template
    assert template["stages"][0]["jobs"][0]["input_path"] == "train.ipynb"


WRITE_REFUSALS = [
    ("linked-out", 403, "outside-root", "leads outside your files"),
    ("out/new", 403, "outside-root", "leads outside your files"),
    ("gone", 409, "dangling-link", "is a link to something that does not exist"),
    ("loop", 400, "link-loop", "is a link that leads back to itself"),
    ("folder", 409, "is-a-folder", "is a folder, so the"),
    ("pipe", 409, "not-a-file", "is a named pipe, not a file"),
    ("notes.txt/new", 400, "not-a-folder", "'notes.txt' is a file, not a folder"),
]


@pytest.mark.parametrize("endpoint", WRITERS)
@pytest.mark.parametrize(("stem", "status", "reason", "words"), WRITE_REFUSALS)
def test_a_place_to_save_that_is_not_a_plain_file_of_the_user_is_refused(
    server, endpoint, stem, status, reason, words
):
    # Given a place to save that leads out of the user's files, through a dangling link,
    # onto a folder or a pipe, or into a file as if it were a folder
    suffix, request = WRITERS[endpoint]
    path = stem + suffix
    # When the user saves there (with overwrite, where the endpoint has it)
    code, answer = ask(server, request, path)
    # Then it is refused with a sentence, and nothing is written outside their files
    assert (code, answer.get("reason")) == (status, reason), answer
    assert words in answer["message"], answer
    assert sorted(p.name for p in (server.root.parent / "elsewhere").iterdir()) == [
        f"nb{s}" for s in sorted(CONTENT)
    ]
    assert (server.root.parent / "elsewhere" / "nb.pipeline.yaml").read_text() == TEMPLATE


# -- as a second account: what the server's account may not read --------------------------


@pytest.fixture(scope="module")
def account_server() -> Iterator[StandaloneServer]:
    """A server run as a system account, not root, whose files link into folders only root
    may enter: one outside its files (as a link to /root would be), one inside them."""
    needs_root_for_accounts("root reads every file, so nothing would be unreadable")
    # Not under pytest's own folder: each pytest run that starts makes it 0700 again.
    work = Path(tempfile.mkdtemp(prefix="cgh-user-files-", dir="/tmp"))
    work.chmod(0o711)
    files(work / "locked", "nb")
    (work / "locked").chmod(0o700)
    needed = [Path(sys.executable).resolve().parent, Path(sys.prefix), REPO_ROOT]
    with (
        contextlib.ExitStack() as cleanup,
        throwaway_account(SERVER_ACCOUNT) as account,
        crossable_by_everyone(needed),
        standalone_server(work, account=account) as running,
    ):
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        root = running.root
        files(root / "vault", "nb")  # root's folder inside the server's files
        (root / "vault").chmod(0o700)
        for suffix, text in CONTENT.items():
            (root / f"secret{suffix}").symlink_to(work / "locked" / f"nb{suffix}")
            (root / f"vault-link{suffix}").symlink_to(f"vault/nb{suffix}")
            (root / f"private{suffix}").write_text(text)
            (root / f"private{suffix}").chmod(0o600)
        yield running


UNREADABLE = [
    ("secret", 403, "outside-root", "leads outside your files"),
    ("vault-link", 403, "unreadable", "Your server cannot read"),
    ("vault/nb", 403, "unreadable", "Your server cannot read"),
    ("private", 403, "unreadable", "Your server cannot read"),
]


@pytest.mark.parametrize("endpoint", READERS)
@pytest.mark.parametrize(("stem", "status", "reason", "words"), UNREADABLE)
def test_a_link_into_a_folder_the_server_may_not_read_is_a_4xx_not_a_500(
    account_server, endpoint, stem, status, reason, words
):
    # Given a server running as an account that may not read a folder only root may enter,
    # and a link to a notebook or template in it (or that file, or one only root may read)
    suffix, request = READERS[endpoint]
    path = stem + suffix
    # When its user names the path to the endpoint
    code, answer = ask(account_server, request, path)
    # Then it is refused with a 4xx and a sentence that says what to do, not a 500
    assert (code, answer.get("reason")) == (status, reason), answer
    assert words in answer["message"] and f"{path!r}" in answer["message"], answer


UNWRITABLE = [
    ("secret", 403, "outside-root", "leads outside your files"),
    ("vault/new", 403, "not-writable", "Your server may not write"),
]


@pytest.mark.parametrize("endpoint", WRITERS)
@pytest.mark.parametrize(("stem", "status", "reason", "words"), UNWRITABLE)
def test_saving_into_a_folder_the_server_may_not_enter_is_a_4xx_not_a_500(
    account_server, endpoint, stem, status, reason, words
):
    # Given a server running as an account that may not enter root's folder in its files
    suffix, request = WRITERS[endpoint]
    path = stem + suffix
    # When its user saves there, then it is refused with a sentence
    code, answer = ask(account_server, request, path)
    assert (code, answer.get("reason")) == (status, reason), answer
    assert words in answer["message"], answer
