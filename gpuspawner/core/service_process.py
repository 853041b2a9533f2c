"""What a hub-managed service process does so that a crashed hub can simply be started again.

Design notes: docs/design/core.md, "gpuspawner.core.service_process".
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

log = logging.getLogger(__name__)

T = TypeVar("T")


class PortInUse(RuntimeError):
    """The port stayed taken by another process for longer than the service waits."""


def die_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Have this process receive ``signum`` when its parent process (the hub) dies.

    Call it first thing in a service's ``main``: Linux sends the signal when the thread
    that started this process ends, which for JupyterHub's managed services is the hub's
    main thread, so the signal comes when the hub process ends, however it ends. If the
    parent died before the request was in place, the signal is sent at once.

    Returns False, and changes nothing, where there is no parent to follow: on systems
    other than Linux, or when this process's parent is already init (started by init or
    a container's entry point, whose death ends everything anyway).
    """
    parent = os.getppid()
    if not sys.platform.startswith("linux") or parent <= 1:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        code = ctypes.get_errno()
        log.warning(
            "Could not ask to be stopped with the hub (prctl: %s); if the hub is killed, "
            "stop this process by hand before starting the hub again.",
            os.strerror(code),
        )
        return False
    if os.getppid() != parent:  # the parent died between the two calls
        os.kill(os.getpid(), signum)
    return True


async def listen_when_free(
    listen: Callable[[], T],
    *,
    address: str,
    patience: float = 60.0,
    interval: float = 0.5,
) -> T:
    """Return ``listen()`` (a call that binds ``address``), retrying while the port is in use.

    A previous instance of the service, told to stop because its hub died, may still hold
    the port for a moment; this waits up to ``patience`` seconds for it, logging once,
    and then raises :class:`PortInUse` with a sentence that says what to do.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + patience
    waited = False
    while True:
        try:
            return listen()
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            if loop.time() >= give_up:
                raise PortInUse(
                    f"{address} is still in use after waiting {patience:g} s: another "
                    "process holds it (an earlier instance of this service that did not "
                    "stop?). Stop that process (`ss -ltnp` shows it), then restart the hub."
                ) from None
            if not waited:
                log.warning(
                    "%s is in use, probably by the previous instance of this service "
                    "still shutting down; trying again for up to %g s.",
                    address,
                    patience,
                )
                waited = True
        await asyncio.sleep(interval)


def main(argv: list[str] | None = None) -> int:
    """``python -m gpuspawner.core.service_process -- COMMAND [ARG...]``: run a managed service
    that is not Python (the demo identity provider, a node process) so that it, too, ends
    with the hub: the death signal is set here and survives the exec."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print(
            "usage: python -m gpuspawner.core.service_process -- COMMAND [ARG...]", file=sys.stderr
        )
        return 2
    die_with_parent()
    try:
        os.execvp(args[0], args)
    except OSError as error:
        print(f"cannot run {args[0]}: {error.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
