"""How CPU and memory limits are written for each cgroup hierarchy, on a stand-in tree.

The kernel's own behaviour (a process killed past its memory, a quota holding it to one
core) is shown with real cgroups in tests/isolation; here the files the hub writes, and how
it finds its own place in each hierarchy, are checked for both v1 and v2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuspawner.cgroups import (
    CgroupsUnavailable,
    CgroupV1,
    CgroupV2,
    ResourceLimits,
    detect_hierarchy,
    format_bytes,
)

GIB = 1024**3


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

    hierarchy = detect_hierarchy("campus-gpu-hub", proc=proc)

    assert isinstance(hierarchy, CgroupV1)
    assert hierarchy.bases == {
        "memory": tmp_path / "memory" / "hub.scope",
        "cpu": tmp_path / "cpu,cpuacct",  # "cpuset" is not "cpu"
    }


def test_given_cgroup_v1_then_a_group_gets_the_memory_and_quota_files(tmp_path):
    hierarchy = detect_hierarchy("campus-gpu-hub", proc=v1_tree(tmp_path))
    memory_dir = tmp_path / "memory" / "hub.scope" / "campus-gpu-hub" / "job-1"
    memory_dir.mkdir(parents=True)
    (memory_dir / "memory.memsw.limit_in_bytes").write_text("max")  # swap accounting is on

    group = hierarchy.create("job-1", ResourceLimits(cpu=1.5, memory_bytes=512 * 1024**2))

    assert (memory_dir / "memory.limit_in_bytes").read_text() == str(512 * 1024**2)
    assert (memory_dir / "memory.memsw.limit_in_bytes").read_text() == str(512 * 1024**2)
    cpu_dir = tmp_path / "cpu,cpuacct" / "campus-gpu-hub" / "job-1"
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
    hierarchy = detect_hierarchy("campus-gpu-hub", proc=v2_tree(tmp_path))
    assert isinstance(hierarchy, CgroupV2)
    base = tmp_path / "unified" / "system.slice" / "jupyterhub.service"
    folder = base / "campus-gpu-hub" / "server-ada"
    folder.mkdir(parents=True)
    (folder / "memory.swap.max").write_text("max")
    (folder / "memory.oom.group").write_text("0")

    hierarchy.create("server-ada", ResourceLimits(cpu=2, memory_bytes=4 * GIB), kill_together=True)

    assert (folder / "memory.max").read_text() == str(4 * GIB)
    assert (folder / "memory.swap.max").read_text() == "0"
    assert (folder / "cpu.max").read_text() == "200000 100000"
    assert (folder / "memory.oom.group").read_text() == "1"  # the server goes as a whole
    # The controllers are handed down to the groups below the hub's own cgroup
    assert (base / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert (base / "campus-gpu-hub" / "cgroup.subtree_control").read_text() == "+memory +cpu"


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
