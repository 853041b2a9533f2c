"""The experimental zone's wipe on a shared workstation: a root-owned helper that works in
each person's zone folder *as that person*, for the course-sessions service.

Design notes: docs/design/hub.md, "gpuspawner.zone_wipe_helper".
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import socket
import socketserver
import stat
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .core.accounts import NoSuchAccount, UserAccount
from .core.service_process import die_with_parent
from .policy import Catalog, load_catalog
from .sessions.zone_wipe import (
    empty_folder,
    folder_holds_data,
    open_folder,
    unsafe_zone_root,
    write_folder_notice,
)

log = logging.getLogger("gpuspawner.zone_wipe_helper")

ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
"""A system account's name as useradd accepts it (never "." or "..", no slash)."""
MAX_REQUEST = 4096
MAX_NOTICE = 1000


class Refused(Exception):
    """A request the helper does not carry out; the message is a sentence for the log."""


# -- the helper (root) ------------------------------------------------------------------------


class ZoneWipeHelper:
    """Carries out one request from the service: the checks as root, the work as the owner."""

    def __init__(self, root: str | Path, catalog: str | Path):
        self.root = Path(root)
        self.catalog = Path(catalog)

    def answer(self, request: Any) -> dict[str, Any]:
        try:
            return {"ok": self._carry_out(request)}
        except Refused as refused:
            return {"error": str(refused)}
        except OSError as error:
            return {"error": f"{error.strerror or error}"}

    def _carry_out(self, request: Any) -> Any:
        if not isinstance(request, dict):
            raise Refused("A request is a JSON object with an action.")
        action = request.get("action")
        if action == "users":
            return self.users()
        if action == "check":
            return self.unsafe()
        if action not in ("holds", "notice", "empty"):
            raise Refused(f"Unknown action {action!r}.")
        account = self._owner(request.get("user"))
        if action == "holds":
            # "notice": whether the folder holds anything at all, the warning file included
            top = not request.get("notice")
            return self._as_owner(account, lambda fd: folder_holds_data(fd, top=top))
        if action == "notice":
            text = request.get("message")
            if not isinstance(text, str) or not text or len(text) > MAX_NOTICE:
                raise Refused(f"A notice is a text of 1 to {MAX_NOTICE} characters.")
            text = "".join(ch for ch in text if ch.isprintable())
            return self._as_owner(account, lambda fd: write_folder_notice(fd, text))
        unsafe = self.unsafe()
        if unsafe is not None:
            raise Refused(f"The experimental zone is not wiped: {unsafe}.")
        removed, failed = self._as_owner(account, empty_folder)
        return [removed, failed[:10]]

    def _load_catalog(self) -> Catalog:
        try:
            return load_catalog(self.catalog)
        except Exception as error:  # a catalog error: wipe nothing rather than guess
            raise Refused(f"the catalog {self.catalog} cannot be read ({error})") from None

    def unsafe(self) -> str | None:
        """Why the root may not be wiped (the service's own check, here as root)."""
        return unsafe_zone_root(self.root, self._load_catalog())

    def users(self) -> list[str]:
        """The people with a folder of their own in the zone."""
        names = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                try:
                    account = self._owner(entry.name)
                except Refused:
                    continue
                if account.uid == entry.stat(follow_symlinks=False).st_uid:
                    names.append(entry.name)
        return sorted(names)

    def _owner(self, name: Any) -> UserAccount:
        """The account whose folder ``<root>/<name>`` is, after checking all of it."""
        if not isinstance(name, str) or not ACCOUNT_NAME.fullmatch(name):
            raise Refused(f"{name!r} is not a user name.")
        try:
            account = UserAccount.for_hub_user(name)
        except NoSuchAccount:
            raise Refused(f"There is no system account {name!r}.") from None
        if account.uid == 0:
            raise Refused("root has no folder in the experimental zone.")
        info = os.lstat(self.root / name)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != account.uid:
            raise Refused(f"{self.root / name} is not a folder of {name}'s own.")
        return account

    def _as_owner(self, account: UserAccount, work: Callable[[int], Any]) -> Any:
        """``work`` on a descriptor of the account's folder, in a child process that has
        become that account for good."""
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.close(reader)
                account.become()
                fd = open_folder(str(self.root / account.name))
                if os.fstat(fd).st_uid != account.uid:
                    raise Refused("the folder changed owner")
                result: dict[str, Any] = {"ok": work(fd)}
                code = 0
            except (Refused, OSError) as error:
                message = getattr(error, "strerror", None) or str(error)
                result = {"error": message}
            except BaseException as error:  # anything else: say so rather than hang
                result = {"error": repr(error)}
            try:
                os.write(writer, json.dumps(result).encode())
            finally:
                os._exit(code)
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            data = pipe.read()
        os.waitpid(pid, 0)
        answer = json.loads(data or b'{"error": "the child ended without an answer"}')
        if "error" in answer:
            raise Refused(f"In {account.name}'s folder, as {account.name}: {answer['error']}")
        return answer["ok"]


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel says."""
    creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class _Handler(socketserver.StreamRequestHandler):
    server: HelperServer

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)  # read first: the client is not cut off
        uid = peer_uid(self.request)
        if uid != self.server.client_uid:
            log.warning(
                "Refused a request from uid %d: only uid %d is served.",
                uid,
                self.server.client_uid,
            )
            answer: dict[str, Any] = {"error": "Only the course-sessions service may ask."}
        else:
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            answer = self.server.helper.answer(request)
            if "error" in answer:
                log.warning("Refused %s: %s", str(request)[:200], answer["error"])
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class HelperServer(socketserver.UnixStreamServer):
    """One request at a time (a wipe is once a day), on a socket only the client may open."""

    def __init__(self, path: str | Path, helper: ZoneWipeHelper, client: UserAccount):
        self.helper, self.client_uid = helper, client.uid
        path = Path(path)
        path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        os.chown(path.parent, 0, client.gid)
        path.parent.chmod(0o750)
        if path.exists() and stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
        super().__init__(str(path), _Handler)
        os.chown(path, 0, client.gid)
        path.chmod(0o660)


# -- the client (the course-sessions service) --------------------------------------------------


class HelperZoneFolders:
    """People's zone folders reached through the helper: the methods of
    :class:`gpuspawner.sessions.zone_wipe.ZoneFolders`, each a request on the socket."""

    def __init__(self, socket_path: str | Path):
        self.socket_path = str(socket_path)
        self._unreachable_logged = False

    def _ask(self, action: str, **fields: Any) -> Any:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(self.socket_path)
            connection.sendall(json.dumps({"action": action, **fields}).encode() + b"\n")
            with connection.makefile("rb") as answers:
                answer = json.loads(answers.readline() or b'{"error": "no answer"}')
        if "error" in answer:
            raise OSError(f"the experimental zone's wipe helper refused: {answer['error']}")
        return answer["ok"]

    def where(self, user: str) -> str:
        return f"{user}'s folder"

    def unsafe(self, catalog: Catalog) -> str | None:
        try:
            return self._ask("check")
        except OSError as error:
            return str(error)

    def users(self) -> list[str]:
        try:
            names = self._ask("users")
        except OSError as error:
            if not self._unreachable_logged:
                self._unreachable_logged = True
                log.error(
                    "Cannot reach the experimental zone's wipe helper at %s (%s): nobody is "
                    "warned and nothing is wiped until it answers.",
                    self.socket_path,
                    error,
                )
            return []
        self._unreachable_logged = False
        return list(names)

    def holds_data(self, user: str) -> bool:
        return bool(self._ask("holds", user=user))

    def has_notice(self, user: str) -> bool:
        # The helper tells no file names: whether anything at all is left there will do.
        return bool(self._ask("holds", user=user, notice=True))

    def write_notice(self, user: str, message: str) -> None:
        self._ask("notice", user=user, message=message)

    def empty(self, user: str) -> tuple[int, list[str]]:
        removed, failed = self._ask("empty", user=user)
        return int(removed), list(failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpuspawner.zone_wipe_helper", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--root", required=True, help="the experimental zone's folder")
    parser.add_argument("--socket", required=True, help="where to listen")
    parser.add_argument(
        "--client-account", required=True, help="the course-sessions service's account"
    )
    parser.add_argument("--catalog", required=True, help="the course catalog (file or folder)")
    args = parser.parse_args(argv)
    die_with_parent()  # stop with the hub that started it
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s %(name)s] %(message)s")
    if os.geteuid() != 0:
        sys.exit("The experimental zone's wipe helper acts as each person: run it as root.")
    client = UserAccount.for_hub_user(args.client_account)
    if client.uid == 0:
        sys.exit("The course-sessions service must not run as root to use the wipe helper.")
    server = HelperServer(args.socket, ZoneWipeHelper(args.root, args.catalog), client)
    log.info("Serving %s at %s for %s", args.root, args.socket, client.name)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
