"""The user's files as the server extension reads and writes them.

Design notes: docs/design/server-extension.md, "jupyter_to_job.extension.user_files".
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import PurePosixPath
from typing import Any

from jupyter_server.services.contents.fileio import FileManagerMixin

from ..rest import ApiError

PERMISSION_ERRNOS = {errno.EACCES, errno.EPERM}


def files_root(contents_manager: Any) -> str | None:
    """The folder the contents manager keeps the user's files in, where they are local
    files; None for a contents manager of another kind (a database, object storage)."""
    if isinstance(contents_manager, FileManagerMixin):
        return os.path.abspath(contents_manager.root_dir)  # type: ignore[attr-defined]
    return None


def _os_path(root: str, path: str) -> str:
    return os.path.join(root, *PurePosixPath(path).parts)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def outside_files(path: str, what: str, *, writing: bool = False) -> ApiError:
    where = f"{path!r} leads outside your files (it is, or goes through, a link to elsewhere)"
    if writing:
        advice = f"so the {what} cannot be saved there. Save it in a folder inside your files."
    else:
        advice = f"so it cannot be used as a {what}. Copy it into your files and use the copy."
    return ApiError(403, f"{where}, {advice}", "outside-root")


def unreadable(path: str, what: str) -> ApiError:
    return ApiError(
        403,
        f"Your server cannot read {path!r}: the {what}, or a folder on the way to it, is "
        "not readable by your account. Copy it to a folder you can read, or ask its owner "
        "for access.",
        "unreadable",
    )


def not_writable(path: str, what: str) -> ApiError:
    return ApiError(
        403,
        f"Your server may not write {path!r}: the folder it goes in is not writable by your "
        f"account. Save the {what} in a folder of your own.",
        "not-writable",
    )


def file_error(error: OSError, path: str, what: str, *, writing: bool = False) -> ApiError:
    """The 4xx for ``error``, met on the user's ``path`` (a ``what``, in their words) while
    reading it, or ``writing`` it."""
    if isinstance(error, PermissionError) or error.errno in PERMISSION_ERRNOS:
        return not_writable(path, what) if writing else unreadable(path, what)
    if error.errno == errno.ELOOP:
        return ApiError(
            400,
            f"{path!r} is a link that leads back to itself. Remove the link, or point it at "
            f"the {what}.",
            "link-loop",
        )
    if isinstance(error, FileNotFoundError | NotADirectoryError):
        return ApiError(404, f"There is no {what} {path!r} in your files.", "no-such-file")
    if isinstance(error, IsADirectoryError):
        return is_a_folder(path, what)
    action = "saved as" if writing else "read as"
    return ApiError(
        400,
        f"{path!r} cannot be {action} a {what} ({error.strerror or error}).",
        "unusable-path",
    )


def is_a_folder(path: str, what: str) -> ApiError:
    return ApiError(
        400,
        f"{path!r} is a folder, not a {what}. Give the path of a {what} inside it.",
        "is-a-folder",
    )


def _check_inside(root: str, os_path: str, path: str, what: str, writing: bool) -> None:
    real_root = os.path.realpath(root)
    # Not strict: a component the server cannot look into stays as it is (then os.stat
    # says why), and a link's own target is read without entering the folder it names.
    real = os.path.realpath(os_path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise outside_files(path, what, writing=writing)


def check_file_to_read(root: str, path: str, what: str) -> None:
    """Refuse ``path`` (relative to ``root``) as a ``what`` to read, with a 4xx that says
    why, unless it is a regular file inside ``root`` that this account can read. A path
    where nothing is at all passes: the caller answers its own "no such file"."""
    os_path = _os_path(root, path)
    _check_inside(root, os_path, path, what, writing=False)
    try:
        info = os.stat(os_path)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.lexists(os_path):
            raise ApiError(
                404,
                f"{path!r} is a link to a file that does not exist any more. Remove the link, "
                f"or point it at the {what}.",
                "dangling-link",
            ) from None
        return
    except OSError as error:
        raise file_error(error, path, what) from None
    if stat.S_ISDIR(info.st_mode):
        raise is_a_folder(path, what)
    if not stat.S_ISREG(info.st_mode):
        raise ApiError(
            400,
            f"{path!r} is {_kind(info.st_mode)}, not a file, so it cannot be read as a {what}.",
            "not-a-file",
        )
    if not os.access(os_path, os.R_OK):
        raise unreadable(path, what)


def check_file_to_write(root: str, path: str, what: str) -> None:
    """Refuse ``path`` (relative to ``root``) as where to save a ``what``, with a 4xx that
    says why, unless it stays inside ``root`` and is either free or a regular file. The
    folders on the way may be missing (the caller makes them) but must be folders."""
    os_path = _os_path(root, path)
    _check_inside(root, os_path, path, what, writing=True)
    folder = root
    parts = PurePosixPath(path).parts
    for depth, part in enumerate(parts[:-1], start=1):
        folder = os.path.join(folder, part)
        try:
            info = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.lexists(folder):
                raise _dangling_target(PurePosixPath(*parts[:depth]).as_posix()) from None
            return  # made by the caller, below a folder that is there
        except OSError as error:
            raise file_error(error, path, what, writing=True) from None
        if not stat.S_ISDIR(info.st_mode):
            name = PurePosixPath(*parts[:depth]).as_posix()
            raise ApiError(
                400,
                f"{name!r} is a file, not a folder, so nothing can be saved in it. Choose "
                "another folder.",
                "not-a-folder",
            )
    try:
        info = os.stat(os_path)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.lexists(os_path):
            raise _dangling_target(path) from None
        return
    except OSError as error:
        raise file_error(error, path, what, writing=True) from None
    if stat.S_ISDIR(info.st_mode):
        raise ApiError(
            409,
            f"{path!r} is a folder, so the {what} cannot be saved there. Choose a file name.",
            "is-a-folder",
        )
    if not stat.S_ISREG(info.st_mode):
        raise ApiError(
            409,
            f"{path!r} is {_kind(info.st_mode)}, not a file, so the {what} cannot be saved "
            "there. Choose another name.",
            "not-a-file",
        )


def _dangling_target(path: str) -> ApiError:
    return ApiError(
        409,
        f"{path!r} is a link to something that does not exist; saving through it would "
        "create a file elsewhere. Remove the link, or choose another name.",
        "dangling-link",
    )
