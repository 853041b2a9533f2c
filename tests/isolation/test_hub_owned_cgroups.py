"""Two hubs on one machine make real control groups for the same user's server: each removes
and kills only in its own hub's folder (on whichever cgroup version this machine runs).

Needs root and cgroups this process can make; skipped otherwise, with the reason.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpuspawner.core.cgroups import (
    Cgroup,
    CgroupLimits,
    CgroupsUnavailable,
    ResourceLimits,
    child_setup,
    detect_hierarchy,
)

LIMITS = ResourceLimits(cpu=1, memory_bytes=256 * 1024**2)


@pytest.fixture
def two_hubs() -> tuple[CgroupLimits, CgroupLimits]:
    try:
        detect_hierarchy()
    except CgroupsUnavailable as error:
        pytest.skip(f"needs cgroups this process can make (root, or a delegated subtree): {error}")
    run = secrets.token_hex(3)
    return (
        CgroupLimits(enforce="required", hub_id=f"hub-test-{run}-a"),
        CgroupLimits(enforce="required", hub_id=f"hub-test-{run}-b"),
    )


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts in groups, as a hub starts servers; ended afterwards."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


def server_in(group: Cgroup, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A process standing for a server, joined to ``group`` before it runs, as a hub does."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=child_setup(group)
    )
    started.append(process)
    return process


def test_a_second_hub_starting_and_stopping_the_same_users_server_leaves_the_first_alone(
    two_hubs, started
):
    hub_a, hub_b = two_hubs
    # Given hub A running ada's server in its group
    group_a = hub_a.create("server-ada", LIMITS)
    assert group_a is not None
    server_a = server_in(group_a, started)
    # When hub B starts ada's server in its own group, then stops it
    group_b = hub_b.create("server-ada", LIMITS)
    assert group_b is not None
    server_b = server_in(group_b, started)
    group_b.remove()
    # Then B's server is gone and A's runs on in its group, found there after a restart
    assert server_b.wait(timeout=60) == -9
    assert server_a.poll() is None
    assert group_a.processes() == [server_a.pid]
    found = hub_a.of_process(server_a.pid, "server-ada")
    assert found is not None and found.folders == group_a.folders
    assert hub_b.of_process(server_a.pid, "server-ada") is None
    # ... and B's folder went with its last group, while A's stays
    assert not any(folder.parent.exists() for folder in group_b.folders.values())
    group_a.remove()
    assert server_a.wait(timeout=60) == -9
    assert not any(folder.parent.exists() for folder in group_a.folders.values())


def test_a_hub_empties_its_own_group_left_behind_before_using_it_again(two_hubs, started):
    hub_a, _ = two_hubs
    # Given a kernel left in ada's group by her last server, which died with it
    leftover = server_in(hub_a.create("server-ada", LIMITS), started)
    # When hub A makes her group again for her next server
    group = hub_a.create("server-ada", LIMITS)
    assert group is not None
    # Then what was left is gone, and the group is hers to use
    assert leftover.wait(timeout=60) == -9
    server = server_in(group, started)
    assert group.processes() == [server.pid]
    group.remove()
