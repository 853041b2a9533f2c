"""A throwaway PostgreSQL server for tests, from the Debian ``postgresql`` binaries.

``postgres_server(base)`` runs ``initdb`` and ``pg_ctl`` in a fresh folder under
``base`` on a free port and yields a SQLAlchemy URL (psycopg 3); the server is
stopped and its files removed afterwards. PostgreSQL refuses to run as root, so
as root the server runs as the ``postgres`` user (or ``nobody``) through
``runuser``. Without PostgreSQL binaries, :func:`postgres_unavailable` says why
and the fixture skips.

Use it from a folder's conftest::

    from tests.support.postgres import postgres_url_fixture
    postgres_url = postgres_url_fixture()
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .hubprocess import free_loopback_ports

DATABASE_USER = "jobs"


def postgres_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (newest version first), or None."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent))
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _server_user() -> str | None:
    """The OS user to run the server as: None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    return None


def postgres_unavailable() -> str | None:
    """Why no throwaway server can run here, or None when it can."""
    if postgres_bin_dir() is None:
        return (
            "PostgreSQL binaries (initdb, pg_ctl) not found; install the Debian 'postgresql' "
            "package to run the PostgreSQL store tests"
        )
    if os.geteuid() == 0 and (_server_user() is None or shutil.which("runuser") is None):
        return "running as root without a 'postgres'/'nobody' user and runuser to start PostgreSQL"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg (3) is not installed"
    return None


def _run_as(user: str | None, command: list[str], **kwargs: object) -> None:
    if user is not None:
        command = ["runuser", "-u", user, "--", *command]
    subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]


@contextlib.contextmanager
def postgres_server(base: str | None = None) -> Iterator[str]:
    """Run a PostgreSQL server for the duration of the block; yields its SQLAlchemy URL."""
    reason = postgres_unavailable()
    if reason:
        pytest.skip(reason)
    bin_dir = postgres_bin_dir()
    assert bin_dir is not None
    user = _server_user()
    # Our own folder (pytest's tmp folders are private to root, the server user
    # could not enter them).
    folder = Path(tempfile.mkdtemp(prefix="jobs-pg-", dir=base))
    folder.chmod(0o755)
    data, sockets = folder / "data", folder / "sockets"
    data.mkdir()
    sockets.mkdir()
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (data, sockets):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    port = free_loopback_ports(1)[0]
    log = folder / "server.log"
    log.touch()
    if user is not None:
        os.chown(log, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    try:
        _run_as(
            user,
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                DATABASE_USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ],
        )
        options = (
            f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        _run_as(
            user,
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(log),
                "-w",
                "start",
            ],
        )
    except subprocess.CalledProcessError as error:
        shutil.rmtree(folder, ignore_errors=True)
        details = (error.stderr or error.stdout or "").strip()[-2000:]
        pytest.fail(f"could not start a throwaway PostgreSQL server: {details}")
    try:
        yield f"postgresql+psycopg://{DATABASE_USER}@127.0.0.1:{port}/postgres"
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _run_as(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"])
        shutil.rmtree(folder, ignore_errors=True)


def postgres_url_fixture(scope: str = "session"):  # type: ignore[no-untyped-def]
    """A pytest fixture (default: one server per session) that yields the server's URL."""

    @pytest.fixture(scope=scope)  # type: ignore[call-overload]
    def postgres_url() -> Iterator[str]:
        with postgres_server() as url:
            yield url

    return postgres_url
