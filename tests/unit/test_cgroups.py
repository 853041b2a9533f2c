"""How CPU and memory limits are written for each cgroup hierarchy, on a stand-in tree.

The kernel's own behaviour (a process killed past its memory, a quota holding it to one
core) is shown with real cgroups in tests/isolation; here the files the hub writes, how it
finds its own place in each hierarchy, and that it touches only its own hub's groups, are
checked for both v1 and v2. A stand-in ``cgroup.procs`` is a plain file: what it lists is
what the hub would kill, so a real sleeping process listed there shows whether it would.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuspawner.core.cgroups import (
    CgroupsUnavailable,
    CgroupV1,
    CgroupV2,
    ResourceLimits,
    detect_hierarchy,
    format_bytes,
)
from gpuspawner.core.hub_instance import HubIdError, hub_instance_id, process_scope

GIB = 1024**3
LIMITS = ResourceLimits(cpu=1, memory_bytes=GIB)


def fake_proc(tmp_path: Path, cgroup: str, mounts: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "mounts").write_text(mounts)
    return proc


def v1_tree(tmp_path: Path) -> Path:
    proc = fake_proc(
        tmp_path,
        "9:memory:/hub.scope\n8:cpu,cpuacct:/\n1:name=systemd:/hub.scope\n0::/\n",
        f"cgroup {tmp_path}/memory cgroup rw,memory 0 0\n"
        f"cgroup {tmp_path}/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
        f"cgroup {tmp_path}/cpuset cgroup rw,cpuset 0 0\n",
    )
    (tmp_path / "memory" / "hub.scope").mkdir(parents=True)
    (tmp_path / "cpu,cpuacct").mkdir()
    return proc


def test_given_cgroup_v1_then_memory_and_cpu_come_from_their_own_hierarchies(tmp_path):
    proc = v1_tree(tmp_path)

    hierarchy = detect_hierarchy("campus-gpu-hub", hub_id="hub-a", proc=proc)

    assert isinstance(hierarchy, CgroupV1)
    assert hierarchy.bases == {
        "memory": tmp_path / "memory" / "hub.scope",
        "cpu": tmp_path / "cpu,cpuacct",  # "cpuset" is not "cpu"
    }


def test_given_cgroup_v1_then_a_group_gets_the_memory_and_quota_files(tmp_path):
    hierarchy = detect_hierarchy("campus-gpu-hub", hub_id="hub-a", proc=v1_tree(tmp_path))
    memory_dir = tmp_path / "memory" / "hub.scope" / "campus-gpu-hub" / "hub-a" / "job-1"
    memory_dir.mkdir(parents=True)
    (memory_dir / "memory.memsw.limit_in_bytes").write_text("max")  # swap accounting is on

    group = hierarchy.create("job-1", ResourceLimits(cpu=1.5, memory_bytes=512 * 1024**2))

    assert (memory_dir / "memory.limit_in_bytes").read_text() == str(512 * 1024**2)
    assert (memory_dir / "memory.memsw.limit_in_bytes").read_text() == str(512 * 1024**2)
    cpu_dir = tmp_path / "cpu,cpuacct" / "campus-gpu-hub" / "hub-a" / "job-1"
    assert (cpu_dir / "cpu.cfs_period_us").read_text() == "100000"
    assert (cpu_dir / "cpu.cfs_quota_us").read_text() == "150000"
    assert group.folders == {"memory": memory_dir, "cpu": cpu_dir}


def v2_tree(tmp_path: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    proc = fake_proc(
        tmp_path,
        "0::/system.slice/jupyterhub.service\n",
        f"cgroup2 {tmp_path}/unified cgroup2 rw,nsdelegate 0 0\n",
    )
    base = tmp_path / "unified" / "system.slice" / "jupyterhub.service"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text(controllers + "\n")
    return proc


def test_given_cgroup_v2_then_a_group_gets_memory_max_and_cpu_max(tmp_path):
    hierarchy = detect_hierarchy("campus-gpu-hub", hub_id="hub-a", proc=v2_tree(tmp_path))
    assert isinstance(hierarchy, CgroupV2)
    base = tmp_path / "unified" / "system.slice" / "jupyterhub.service"
    folder = base / "campus-gpu-hub" / "hub-a" / "server-ada"
    folder.mkdir(parents=True)
    (folder / "memory.swap.max").write_text("max")
    (folder / "memory.oom.group").write_text("0")

    hierarchy.create("server-ada", ResourceLimits(cpu=2, memory_bytes=4 * GIB), kill_together=True)

    assert (folder / "memory.max").read_text() == str(4 * GIB)
    assert (folder / "memory.swap.max").read_text() == "0"
    assert (folder / "cpu.max").read_text() == "200000 100000"
    assert (folder / "memory.oom.group").read_text() == "1"  # the server goes as a whole
    # The controllers are handed down, level by level, to the groups below the hub's own cgroup
    assert (base / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert (base / "campus-gpu-hub" / "cgroup.subtree_control").read_text() == "+memory +cpu"
    hub_folder = base / "campus-gpu-hub" / "hub-a"
    assert (hub_folder / "cgroup.subtree_control").read_text() == "+memory +cpu"


def test_given_a_v2_hierarchy_without_the_memory_controller_then_it_says_why(tmp_path):
    proc = v2_tree(tmp_path, controllers="cpu io pids")

    with pytest.raises(CgroupsUnavailable, match="memory and cpu"):
        detect_hierarchy("campus-gpu-hub", proc=proc)


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (512 * 1024**2, "512 MiB"),
        (2 * GIB, "2 GiB"),
        (int(1.5 * GIB), "1.5 GiB"),
        (100, "100 bytes"),
    ],
)
def test_sizes_read_as_people_write_them(size, words):
    assert format_bytes(size) == words


def test_limits_describe_themselves():
    assert ResourceLimits(cpu=1, memory_bytes=2 * GIB).describe() == "1 CPU and 2 GiB of memory"
    assert ResourceLimits(cpu=0.5).describe() == "0.5 CPUs"
    assert ResourceLimits().empty


# -- one hub instance owns its groups -----------------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing for a server that runs in a group."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    process.kill()
    process.wait()


def running_in(hierarchy, name: str, process: subprocess.Popen[bytes]) -> dict[str, Path]:
    """``process`` listed in the stand-in group ``name`` of ``hierarchy``, as if it ran there."""
    group = hierarchy.create(name, LIMITS)
    for folder in group.folders.values():
        (folder / "cgroup.procs").write_text(f"{process.pid}\n")
    return group.folders


@pytest.mark.parametrize("tree", [v1_tree, v2_tree], ids=["cgroup v1", "cgroup v2"])
def test_a_second_hub_starting_the_same_users_server_leaves_the_first_hubs_alone(
    tmp_path, sleeper, tree
):
    # Given hub A running ada's server in its group
    proc = tree(tmp_path)
    hub_a = detect_hierarchy("campus-gpu-hub", hub_id="hub-a", proc=proc)
    hub_b = detect_hierarchy("campus-gpu-hub", hub_id="hub-b", proc=proc)
    folders_a = running_in(hub_a, "server-ada", sleeper)

    # When hub B starts, then stops, its own server for ada
    group_b = hub_b.create("server-ada", LIMITS)
    group_b.remove()

    # Then A's server still runs, in its group, which B never touched
    assert sleeper.poll() is None
    assert all(folder.is_dir() for folder in folders_a.values())
    assert set(group_b.folders.values()).isdisjoint(folders_a.values())
    assert all("hub-b" in folder.parts for folder in group_b.folders.values())


@pytest.mark.parametrize("tree", [v1_tree, v2_tree], ids=["cgroup v1", "cgroup v2"])
def test_a_group_this_hub_left_behind_is_emptied_before_it_is_used_again(tmp_path, sleeper, tree):
    # Given a kernel of ada's last server, still in this hub's group (the server died)
    hub = detect_hierarchy("campus-gpu-hub", hub_id="hub-a", proc=tree(tmp_path))
    running_in(hub, "server-ada", sleeper)

    # When the hub makes ada's group again for her next server
    hub.create("server-ada", LIMITS)

    # Then what was left in its own group is gone
    assert sleeper.wait(timeout=30) == -9


def test_after_a_restart_the_hub_finds_its_servers_group_and_not_another_hubs(tmp_path):
    # Given a process in hub A's group for ada's server (on cgroup v1)
    proc = v1_tree(tmp_path)
    (proc / "4242").mkdir()
    (proc / "4242" / "cgroup").write_text(
        "9:memory:/hub.scope/campus-gpu-hub/hub-a/server-ada\n"
        "8:cpu,cpuacct:/campus-gpu-hub/hub-a/server-ada\n"
    )
    hub_a = detect_hierarchy("campus-gpu-hub", hub_id="hub-a", proc=proc)
    hub_b = detect_hierarchy("campus-gpu-hub", hub_id="hub-b", proc=proc)

    # Then hub A recognises it as its server's, hub B does not
    found = hub_a.group_of(4242, "server-ada", proc=proc)
    assert found is not None and found.folders == {
        "memory": tmp_path / "memory" / "hub.scope" / "campus-gpu-hub" / "hub-a" / "server-ada",
        "cpu": tmp_path / "cpu,cpuacct" / "campus-gpu-hub" / "hub-a" / "server-ada",
    }
    assert hub_b.group_of(4242, "server-ada", proc=proc) is None


def test_a_hubs_id_is_made_once_and_kept_in_its_runtime_folder(tmp_path):
    first = hub_instance_id(tmp_path / "demo-a")

    assert first.startswith("hub-")
    assert hub_instance_id(tmp_path / "demo-a") == first  # a restart finds it again
    assert (tmp_path / "demo-a" / "hub-instance-id").read_text().strip() == first
    assert hub_instance_id(tmp_path / "demo-b") != first  # another hub, another id


def test_an_id_file_that_holds_no_id_says_how_to_fix_it(tmp_path):
    (tmp_path / "hub-instance-id").write_text("../../etc\n")

    with pytest.raises(HubIdError, match="Delete it to give the hub a new id"):
        hub_instance_id(tmp_path)


def test_a_process_of_no_hub_has_a_scope_nobody_else_has(sleeper):
    assert process_scope() != process_scope(sleeper.pid)
    assert process_scope() == process_scope()
