"""A second OS account for scenarios that need one: a server that runs as someone other
than root, so that what the file system refuses that account is really refused.

Creating an account needs root and ``useradd``; :func:`needs_root_for_accounts` skips a
test with that reason elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def needs_root_for_accounts(why: str) -> None:
    """Skip unless this process is root and can create accounts; ``why`` says what for."""
    if os.geteuid() != 0:
        pytest.skip(f"needs root, to run a server as a second OS account ({why})")
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd (Debian's passwd package) to create a second OS account")


@contextlib.contextmanager
def throwaway_account(name: str) -> Iterator[pwd.struct_passwd]:
    """A system account ``name`` without a home or a login shell; removed afterwards unless
    it was there before."""
    try:
        existing: pwd.struct_passwd | None = pwd.getpwnam(name)
    except KeyError:
        existing = None
    if existing is not None:
        yield existing
        return
    subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


@contextlib.contextmanager
def crossable_by_everyone(paths: list[Path]) -> Iterator[list[Path]]:
    """Let other accounts cross (not list) every folder above ``paths``; restore after.

    (tests/isolation/conftest.py holds the same for the workstation hub.)"""
    changed: dict[Path, int] = {}
    for path in paths:
        for folder in [path, *path.parents]:
            mode = folder.stat().st_mode & 0o7777
            if folder.is_dir() and not mode & 0o001 and folder not in changed:
                changed[folder] = mode
                folder.chmod(mode | 0o001)
    try:
        yield list(changed)
    finally:
        for folder, mode in changed.items():
            folder.chmod(mode)
