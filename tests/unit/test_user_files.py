"""How the server extension resolves a path the user names, before any file is opened.

Each endpoint that takes a path goes through one of two checks: a file to read (the
notebook of a job, of its parameters, of a schedule or a pipeline's jobs; a pipeline
template to read or run) or a place to save (a job's output, a pipeline template). Both
refuse, with a 4xx and a sentence, what the file system would otherwise answer with an
``OSError`` in the middle of the contents manager (a 500).
"""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupyter_server.services.contents.manager import ContentsManager

from jupyter_to_job.extension.user_files import (
    check_file_to_read,
    check_file_to_write,
    file_error,
    files_root,
)
from jupyter_to_job.rest import ApiError


@pytest.fixture
def root() -> Iterator[Path]:
    """A user's files, with a notebook, and a folder outside them; in a folder of /tmp that
    other accounts may cross (pytest's own is 0700, and each pytest run makes it so)."""
    work = Path(tempfile.mkdtemp(prefix="cgh-user-files-", dir="/tmp"))
    work.chmod(0o755)
    home = work / "home"
    (home / "project").mkdir(parents=True)
    (home / "project" / "train.ipynb").write_text("{}")
    (work / "elsewhere").mkdir()
    (work / "elsewhere" / "theirs.ipynb").write_text("{}")
    try:
        yield home
    finally:
        for folder, _, _ in os.walk(work):
            os.chmod(folder, 0o755)
        shutil.rmtree(work)


def refusal(check: Callable[[str, str, str], None], root: Path, path: str) -> tuple[int, str, str]:
    with pytest.raises(ApiError) as raised:
        check(str(root), path, "notebook")
    return raised.value.status, raised.value.reason, raised.value.message


# -- a file to read -------------------------------------------------------------------------


def test_a_plain_notebook_or_a_link_to_one_in_the_users_files_passes(root: Path):
    (root / "latest.ipynb").symlink_to("project/train.ipynb")
    (root / "current").symlink_to("project")
    for path in ("project/train.ipynb", "latest.ipynb", "current/train.ipynb"):
        check_file_to_read(str(root), path, "notebook")


def test_a_path_where_nothing_is_passes_so_the_caller_says_there_is_no_such_file(root: Path):
    check_file_to_read(str(root), "missing.ipynb", "notebook")
    check_file_to_read(str(root), "no-folder/missing.ipynb", "notebook")


def test_a_link_out_of_the_users_files_is_refused_even_to_a_readable_file(root: Path):
    (root / "theirs.ipynb").symlink_to(root.parent / "elsewhere" / "theirs.ipynb")
    (root / "out").symlink_to(root.parent / "elsewhere")
    (root / "up.ipynb").symlink_to("../elsewhere/theirs.ipynb")
    for path in ("theirs.ipynb", "out/theirs.ipynb", "up.ipynb"):
        status, reason, message = refusal(check_file_to_read, root, path)
        assert (status, reason) == (403, "outside-root")
        assert message.startswith(f"{path!r} leads outside your files")
        assert "Copy it into your files" in message
        assert str(root.parent) not in message


def test_a_link_to_nothing_to_itself_a_folder_or_a_pipe_is_named_for_what_it_is(root: Path):
    (root / "gone.ipynb").symlink_to("project/deleted.ipynb")
    (root / "loop.ipynb").symlink_to("loop.ipynb")
    (root / "folder.ipynb").mkdir()
    os.mkfifo(root / "pipe.ipynb")
    assert refusal(check_file_to_read, root, "gone.ipynb")[:2] == (404, "dangling-link")
    assert refusal(check_file_to_read, root, "loop.ipynb")[:2] == (400, "link-loop")
    assert refusal(check_file_to_read, root, "folder.ipynb") == (
        400,
        "is-a-folder",
        "'folder.ipynb' is a folder, not a notebook. Give the path of a notebook inside it.",
    )
    assert refusal(check_file_to_read, root, "pipe.ipynb") == (
        400,
        "not-a-file",
        "'pipe.ipynb' is a named pipe, not a file, so it cannot be read as a notebook.",
    )


def as_an_account_that_may_not_read(root: Path, check: Callable[[], None]) -> ApiError | None:
    """Run ``check`` where ``root / 'locked'`` cannot be entered: mode 000 for an ordinary
    account; for root (which enters anything), in a child process as ``nobody``."""
    locked = root / "locked"
    if os.geteuid() != 0:
        locked.chmod(0)
        try:
            check()
        except ApiError as error:
            return error
        finally:
            locked.chmod(0o755)
        return None
    nobody = pwd.getpwnam("nobody")
    locked.chmod(0o700)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: drop to nobody, check, report, leave
        os.close(read)
        code = b"-"
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            check()
        except ApiError as error:
            code = f"{error.status} {error.reason}".encode()
        except BaseException as error:  # noqa: BLE001 - reported to the parent
            code = f"crash {error!r}".encode()
        os.write(write, code)
        os._exit(0)
    os.close(write)
    answer = os.read(read, 4096).decode()
    os.close(read)
    os.waitpid(child, 0)
    assert not answer.startswith("crash"), answer
    if answer == "-":
        return None
    status, reason = answer.split(" ", 1)
    return ApiError(int(status), "", reason)


def test_a_notebook_behind_a_folder_the_server_may_not_enter_is_a_403(root: Path):
    # Given a folder of root's in the user's files, and a link to a notebook in it
    (root / "locked").mkdir()
    (root / "locked" / "secret.ipynb").write_text("{}")
    (root / "secret.ipynb").symlink_to("locked/secret.ipynb")
    # (the account reaches the user's files: their own notebook passes)
    assert (
        as_an_account_that_may_not_read(
            root, lambda: check_file_to_read(str(root), "project/train.ipynb", "notebook")
        )
        is None
    )
    # When the server's account resolves the link, or the path through the folder
    for path in ("secret.ipynb", "locked/secret.ipynb"):
        error = as_an_account_that_may_not_read(
            root, lambda path=path: check_file_to_read(str(root), path, "notebook")
        )
        # Then it is refused as unreadable: a 403, not an OSError
        assert error is not None and (error.status, error.reason) == (403, "unreadable"), path


def test_a_notebook_only_its_owner_may_read_is_a_403(root: Path):
    (root / "locked").mkdir()
    (root / "locked" / "mine.ipynb").write_text("{}")
    (root / "locked" / "mine.ipynb").chmod(0o600)

    def check() -> None:
        (root / "locked").chmod(0o755)  # the folder may be entered; the file not read
        check_file_to_read(str(root), "locked/mine.ipynb", "notebook")

    if os.geteuid() != 0:
        (root / "locked" / "mine.ipynb").chmod(0)
        with pytest.raises(ApiError) as raised:
            check_file_to_read(str(root), "locked/mine.ipynb", "notebook")
        assert (raised.value.status, raised.value.reason) == (403, "unreadable")
        return
    (root / "locked").chmod(0o755)
    error = as_an_account_that_may_not_read(
        root, lambda: check_file_to_read(str(root), "locked/mine.ipynb", "notebook")
    )
    assert error is not None and (error.status, error.reason) == (403, "unreadable")


# -- a place to save -------------------------------------------------------------------------


def test_a_new_file_a_new_folder_or_an_existing_file_is_a_place_to_save(root: Path):
    for path in ("out.ipynb", "results/new/out.ipynb", "project/train.ipynb"):
        check_file_to_write(str(root), path, "job output")


def test_a_place_to_save_outside_on_a_folder_a_pipe_or_a_dangling_link_is_refused(root: Path):
    (root / "out").symlink_to(root.parent / "elsewhere")
    (root / "gone.ipynb").symlink_to("project/deleted.ipynb")
    (root / "gone-folder").symlink_to("nowhere")
    (root / "loop.ipynb").symlink_to("loop.ipynb")
    (root / "folder.ipynb").mkdir()
    os.mkfifo(root / "pipe.ipynb")
    expected = {
        "out/new.ipynb": (403, "outside-root"),
        "gone.ipynb": (409, "dangling-link"),
        "gone-folder/new.ipynb": (409, "dangling-link"),
        "loop.ipynb": (400, "link-loop"),
        "folder.ipynb": (409, "is-a-folder"),
        "pipe.ipynb": (409, "not-a-file"),
        "project/train.ipynb/new.ipynb": (400, "not-a-folder"),
    }
    answers = {path: refusal(check_file_to_write, root, path)[:2] for path in expected}
    assert answers == expected
    assert (
        "saving through it would create a file elsewhere"
        in (refusal(check_file_to_write, root, "gone.ipynb")[2])
    )
    assert refusal(check_file_to_write, root, "out/new.ipynb")[2] == (
        "'out/new.ipynb' leads outside your files (it is, or goes through, a link to "
        "elsewhere), so the notebook cannot be saved there. Save it in a folder inside "
        "your files."
    )


def test_a_place_to_save_in_a_folder_the_server_may_not_enter_is_a_403(root: Path):
    (root / "locked").mkdir()
    error = as_an_account_that_may_not_read(
        root, lambda: check_file_to_write(str(root), "locked/out.ipynb", "job output")
    )
    assert error is not None and (error.status, error.reason) == (403, "not-writable")


# -- what the contents manager raises, and which contents managers have a root ------------


def test_an_os_error_met_while_reading_or_saving_becomes_a_4xx_with_a_sentence():
    denied = PermissionError(errno.EACCES, "Permission denied")
    assert file_error(denied, "a.ipynb", "notebook").reason == "unreadable"
    written = file_error(denied, "a.ipynb", "job output", writing=True)
    assert (written.status, written.reason) == (403, "not-writable")
    assert written.message.startswith("Your server may not write 'a.ipynb'")
    loop = file_error(OSError(errno.ELOOP, "Too many levels of symbolic links"), "l", "notebook")
    assert (loop.status, loop.reason) == (400, "link-loop")
    missing = file_error(FileNotFoundError(errno.ENOENT, "No such file"), "m.ipynb", "notebook")
    assert (missing.status, missing.reason) == (404, "no-such-file")
    other = file_error(OSError(errno.ENAMETOOLONG, "File name too long"), "x", "notebook")
    assert (other.status, other.message) == (
        400,
        "'x' cannot be read as a notebook (File name too long).",
    )


def test_only_a_contents_manager_on_local_files_has_a_root_to_check(tmp_path: Path):
    assert files_root(AsyncLargeFileManager(root_dir=str(tmp_path))) == str(tmp_path)
    assert files_root(ContentsManager()) is None
