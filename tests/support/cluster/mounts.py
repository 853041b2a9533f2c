"""Run a command with folders and files mounted at absolute paths, as a container sees them.

``python -m tests.support.cluster.mounts SPEC -- COMMAND...`` enters a private mount
namespace (root only) and a root of the container's own: this machine's top-level folders,
with a writable overlay over each one the mounts need (``/etc``, ``/srv``, ``/usr``...: the
machine's files stay as they are, what the container writes there lands under the pod's
own folder) and new top-level folders where a mount asks (``/job``); it bind-mounts each
source at its target, changes root and executes the command. Nothing outside the process
changes. SPEC is a JSON file::

    {"scratch": "/pods/ns/pod/mounts",
     "binds": [{"source": "/pods/ns/pod/volumes/config", "target": "/etc/app", "read_only": true}],
     "cwd": "/srv/app"}
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def resolved(target: str) -> str:
    """``target`` with the machine's symbolic links in the part of it that exists resolved
    (``/var/run/x`` -> ``/run/x``), so a mount lands where the container will look."""
    path = Path(target)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return str(Path(os.path.realpath(existing)) / path.relative_to(existing))


def top_folder(target: str) -> str:
    """``/etc/kueue/certs`` -> ``/etc``: the folder overlaid so the target can be made."""
    parts = Path(target).parts
    return "/" + parts[1] if len(parts) > 1 else "/"


def enter(spec: dict) -> None:
    """Join the pod's network namespace (``netns``, pod_network.py) if it has one, make the
    container's root (a folder under ``scratch`` holding this machine's top-level folders,
    overlaid where the mounts need to write), mount ``binds`` and change root into it."""
    if spec.get("netns"):
        with open(f"/run/netns/{spec['netns']}") as netns:
            _check(_libc.setns(netns.fileno(), CLONE_NEWNET), "join the pod's network")
    _check(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    scratch = Path(spec["scratch"])
    binds = [{**bind, "target": resolved(bind["target"])} for bind in spec.get("binds") or []]
    cwd = resolved(spec["cwd"]) if spec.get("cwd") else None
    targets = [bind["target"] for bind in binds] + ([cwd] if cwd else [])
    overlaid = {top_folder(target) for target in targets} - {"/"}
    root = scratch / "root"
    root.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(root), "tmpfs", 0, "mode=0755")
    for entry in sorted(os.listdir("/")):
        source = Path("/") / entry
        inside = root / entry
        if source.is_symlink():
            inside.symlink_to(os.readlink(source))
        elif not source.is_dir():
            continue
        elif f"/{entry}" in overlaid and entry not in ("proc", "sys", "dev"):
            upper = scratch / "upper" / entry
            work = scratch / "work" / entry
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            inside.mkdir()
            _mount(
                "overlay",
                str(inside),
                "overlay",
                0,
                f"lowerdir={source},upperdir={upper},workdir={work}",
            )
        else:
            inside.mkdir()
            _mount(str(source), str(inside), None, MS_BIND | MS_REC, None)
    for bind in binds:
        source, target = Path(bind["source"]), root / bind["target"].lstrip("/")
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(exist_ok=True)
        _mount(str(source), str(target), None, MS_BIND | MS_REC, None)
        if bind.get("read_only"):
            _mount("none", str(target), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
    if cwd:
        # A container's working directory is made when missing, as container runtimes do.
        (root / cwd.lstrip("/")).mkdir(parents=True, exist_ok=True)
    os.chroot(root)
    os.chdir(cwd or "/")


def main(argv: list[str]) -> None:
    if "--" not in argv or argv.index("--") != 1 or len(argv) < 3:
        sys.exit("usage: python -m tests.support.cluster.mounts SPEC -- COMMAND...")
    spec = json.loads(Path(argv[0]).read_text())
    enter(spec)
    command = argv[2:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
