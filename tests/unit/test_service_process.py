"""Scenarios: a hub-managed service stops with its hub, and waits for its port instead of crashing.

The "hub" here is a plain Python process that starts two "services" in sessions of their
own, as JupyterHub does; one asks to die with its parent, the other does not.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from gpuspawner.core.service_process import PortInUse, listen_when_free
from tests.support import until

WAIT = 30.0  # a bound for a broken test, never a timing assertion

SERVICE = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    from gpuspawner.core.service_process import die_with_parent

    folder, follow = Path(sys.argv[1]), sys.argv[2] == "follow"

    def stopped(signum, frame):
        (folder / "stopped").write_text(str(signum))
        sys.exit(0)

    signal.signal(signal.SIGTERM, stopped)
    asked = die_with_parent() if follow else False
    (folder / "ready").write_text(str(asked))
    time.sleep(300)
    """
)

HUB = textwrap.dedent(
    """
    import subprocess, sys, time
    service = sys.argv[1]
    for folder, mode in zip(sys.argv[2::2], sys.argv[3::2]):
        subprocess.Popen([sys.executable, "-c", service, folder, mode], start_new_session=True)
    time.sleep(300)
    """
)


def test_a_service_that_asked_stops_when_its_hub_is_killed(tmp_path):
    # Given a hub with two services, only the first of which asked to die with it
    following, other = tmp_path / "following", tmp_path / "other"
    following.mkdir()
    other.mkdir()
    hub = subprocess.Popen(
        [sys.executable, "-c", HUB, SERVICE, str(following), "follow", str(other), "stay"]
    )
    services: set[int] = set()
    try:
        until(lambda: (following / "ready").exists(), "the first service to start")
        until(lambda: (other / "ready").exists(), "the second service to start")
        assert (following / "ready").read_text() == "True"
        services = {child.pid for child in psutil.Process(hub.pid).children()}
        assert len(services) == 2

        # When the hub is killed outright
        hub.kill()
        hub.wait()

        # Then the service that asked receives SIGTERM and stops as it would on request
        until(lambda: (following / "stopped").exists(), "the following service to stop")
        assert (following / "stopped").read_text() == str(int(signal.SIGTERM))
        # And the other one runs on, as every service did before (and keeps its port)
        time.sleep(0.5)
        assert not (other / "stopped").exists()
        assert any(psutil.pid_exists(pid) for pid in services)
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait()
        for pid in services:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_nothing_is_asked_where_the_parent_is_init():
    # pytest's own parent is a shell or a runner, not init: the request is made here
    if os.getppid() <= 1:
        pytest.skip("this test process is a child of init")
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gpuspawner.core.service_process import die_with_parent; print(die_with_parent())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == ("True" if sys.platform.startswith("linux") else "False")


def _taken_port() -> tuple[socket.socket, int]:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    return blocker, blocker.getsockname()[1]


def _bind(port: int) -> socket.socket:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.listen()
    return sock


async def test_a_new_instance_waits_for_the_old_one_to_let_go_of_its_port(caplog):
    # Given the previous instance still holding the port while it shuts down
    blocker, port = _taken_port()
    asyncio.get_running_loop().call_later(0.3, blocker.close)
    # When the new instance binds it
    bound = await listen_when_free(
        lambda: _bind(port), address=f"127.0.0.1:{port}", patience=WAIT, interval=0.05
    )
    # Then it gets the port once free, having said why it waited
    try:
        assert bound.getsockname()[1] == port
        assert "is in use, probably by the previous instance" in caplog.text
    finally:
        bound.close()


async def test_a_port_that_stays_taken_ends_with_a_sentence_that_says_what_to_do():
    blocker, port = _taken_port()
    try:
        with pytest.raises(PortInUse, match=r"still in use after waiting 0.2 s.*ss -ltnp"):
            await listen_when_free(
                lambda: _bind(port), address=f"127.0.0.1:{port}", patience=0.2, interval=0.05
            )
    finally:
        blocker.close()


async def test_other_binding_errors_are_not_retried():
    calls = []

    def refuse():
        calls.append(1)
        raise PermissionError(13, "Permission denied")

    with pytest.raises(PermissionError):
        await listen_when_free(refuse, address="0.0.0.0:80", patience=WAIT)
    assert calls == [1]


def test_die_with_parent_is_importable_without_jupyterhub():
    # The services import it first thing; it must not pull the hub in
    code = (
        "import sys; import gpuspawner.core.service_process; "
        "print(any(m == 'jupyterhub' or m.startswith('jupyterhub.') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_service_that_is_not_python_ends_with_its_hub_too(tmp_path):
    # Given a "hub" that starts a plain command through the service_process wrapper
    hub = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "service = subprocess.Popen([sys.executable, '-m', 'gpuspawner.core.service_process',"
            " '--', 'sleep', '300'], start_new_session=True)\n"
            "print(service.pid, flush=True)\n"
            "time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert hub.stdout is not None
    service = psutil.Process(int(hub.stdout.readline()))
    deadline = time.monotonic() + WAIT
    while service.name() != "sleep" and time.monotonic() < deadline:  # exec'd into the command
        time.sleep(0.05)
    assert service.name() == "sleep"

    # When the hub is killed outright
    hub.kill()
    hub.wait()

    # Then the command goes with it
    try:
        service.wait(WAIT)
    except psutil.TimeoutExpired:
        service.kill()
        raise AssertionError("the wrapped command outlived its hub") from None


def test_the_wrapper_without_a_command_says_how_to_use_it(capsys):
    from gpuspawner.core.service_process import main

    assert main(["--"]) == 2
    assert "usage" in capsys.readouterr().err
