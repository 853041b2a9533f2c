"""Run a command with a file as its ``/etc/hosts``: what the kubelet gives each container.

``python tests/support/cluster/pod_hosts.py HOSTS -- COMMAND...`` enters a private mount
namespace (root only), bind-mounts HOSTS (the node's hosts file for the pod's namespace,
services.py: the cluster's Service names and, as CoreDNS gives, a headless Service's pod
names) on ``/etc/hosts`` and executes COMMAND in its place (the same process). Nothing
outside the process changes. Self-contained: it runs by path, from any folder.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def main(argv: list[str]) -> None:
    hosts, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: pod_hosts.py HOSTS -- COMMAND...")
    _check(_libc.unshare(CLONE_NEWNS), "unshare")
    _check(_libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "private /")
    target = os.path.realpath("/etc/hosts").encode()
    _check(_libc.mount(hosts.encode(), target, None, ctypes.c_ulong(MS_BIND), None), "bind hosts")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
