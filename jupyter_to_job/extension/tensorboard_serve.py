"""TensorBoard on a Unix socket: ``python -m jupyter_to_job.extension.tensorboard_serve``.

The user's server starts one per folder (:mod:`.tensorboard`). TensorBoard itself listens
only on TCP ports, which every account on a shared machine could reach; a socket in a folder
only its owner may enter is reachable through the server's authenticated proxy alone.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1


def stop_with_parent(parent_pid: int) -> None:
    """Ask Linux to end this process when the server that started it ends, even if the
    server is killed before it can stop its TensorBoards."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the server's own stop still applies
        return
    if os.getppid() != parent_pid:  # the server ended before prctl took effect
        sys.exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", required=True, help="the folder of event files to read")
    parser.add_argument("--socket", required=True, help="the Unix socket to serve on")
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    args = parser.parse_args(argv)
    stop_with_parent(args.parent_pid)

    from tensorboard import default, program
    from werkzeug.serving import ThreadedWSGIServer

    class UnixSocketServer(ThreadedWSGIServer, program.TensorBoardServer):
        """TensorBoard's WSGI app served on ``--socket`` (werkzeug's ``unix://`` host)."""

        def __init__(self, wsgi_app: Any, flags: Any) -> None:
            super().__init__(f"unix://{args.socket}", 0, wsgi_app)

        def get_url(self) -> str:
            return f"unix://{args.socket}"

    class SocketTensorBoard(program.TensorBoard):
        def _register_info(self, server: Any) -> None:
            # The info file lists TCP ports for `tensorboard.notebook`; a socket has none.
            pass

    board = SocketTensorBoard(plugins=default.get_plugins(), server_class=UnixSocketServer)
    # --load_fast=false: the Rust data server would listen on a TCP port of its own.
    board.configure(argv=["tensorboard", "--logdir", args.logdir, "--load_fast", "false"])
    return int(board.main())


if __name__ == "__main__":
    sys.exit(main())
