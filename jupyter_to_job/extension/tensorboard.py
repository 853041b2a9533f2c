"""TensorBoard in a user's server: one per folder, behind the server's own login.

Design notes: docs/design/server-extension.md, "jupyter_to_job.extension.tensorboard".
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import importlib.util
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join
from tornado import web
from traitlets import Float, Unicode

from ..rest import SMALL_BODY_LIMIT, ApiError, as_api_error, error_response, json_object, log_error

AUTH_RESOURCE = "jupyter_to_job"
API_PATH = "jupyter-to-job/api/tensorboards"
BOARD_PATH = "jupyter-to-job/tensorboard"
BOARD_ID = r"(?P<board_id>[0-9a-f]{12})"
EVENT_FILE_MARK = "tfevents"
# A folder is searched for event files at most this far, so a home folder with many files
# does not hold up the answer; past it, TensorBoard is opened without the "no event files"
# notice.
MAX_ENTRIES_SEARCHED = 20_000
REQUIRED_MODULES = ("tensorboard", "jupyter_server_proxy")
GONE = (
    "This TensorBoard is not running any more (the server restarted, or it stopped). "
    "Open TensorBoard again from the launcher or the job's card."
)


@dataclass
class Board:
    """One running TensorBoard: the folder it reads and where it serves."""

    board_id: str
    folder: str
    logdir: str
    socket_path: str
    log_path: str
    process: asyncio.subprocess.Process | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def url(self) -> str:
        """Where it is, relative to the server's base URL (with the slash TensorBoard's
        relative links need)."""
        return f"{BOARD_PATH}/{self.board_id}/"


def missing_modules() -> list[str]:
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def board_id_of(logdir: str) -> str:
    return hashlib.sha256(logdir.encode()).hexdigest()[:12]


def has_event_files(folder: str) -> bool | None:
    """True if ``folder`` holds a TensorBoard event file at any depth, False if not, None
    when it is too large to tell quickly."""
    seen = 0
    for _, _, files in os.walk(folder):
        seen += len(files) + 1
        if any(EVENT_FILE_MARK in name for name in files):
            return True
        if seen > MAX_ENTRIES_SEARCHED:
            return None
    return False


def resolve_folder(root: str, folder: str) -> tuple[str, str]:
    """The folder's name as the user sees it and its real path, or a 4xx with a sentence
    when it is not a folder inside ``root``."""
    name = PurePosixPath(folder.strip().lstrip("/") or ".").as_posix()
    if ".." in PurePosixPath(name).parts:
        raise ApiError(
            400,
            f"{folder!r} goes up out of your files. Name a folder inside them, such as 'runs'.",
            "invalid-folder",
        )
    real_root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(real_root, *PurePosixPath(name).parts))
    if os.path.commonpath([real_root, path]) != real_root:
        raise ApiError(
            403,
            f"{name!r} leads outside your files (it is, or goes through, a link to "
            "elsewhere). Open TensorBoard on a folder inside your files.",
            "outside-files",
        )
    if not os.path.exists(path):
        raise ApiError(
            404,
            f"There is no folder {name!r} in your files yet. Write your event files there "
            f"first (for example SummaryWriter('{name}/experiment-1')), or name the folder "
            "your training writes to.",
            "no-such-folder",
        )
    if not os.path.isdir(path):
        raise ApiError(
            400,
            f"{name!r} is a file, not a folder. Name the folder that holds your event files.",
            "not-a-folder",
        )
    return name, path


class TensorBoards:
    """The TensorBoards this server runs, one per folder, reused when opened again."""

    def __init__(self, root: str, start_timeout: float, log: Any) -> None:
        self.root = root
        self.start_timeout = start_timeout
        self.log = log
        self._boards: dict[str, Board] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._runtime_dir: str | None = None

    def get(self, board_id: str) -> Board | None:
        board = self._boards.get(board_id)
        return board if board is not None and board.running else None

    def running(self) -> list[Board]:
        return [board for board in self._boards.values() if board.running]

    def _socket_dir(self) -> str:
        # Short (a socket's path has at most 107 bytes) and only this user's (mkdtemp: 0700).
        if self._runtime_dir is None:
            self._runtime_dir = tempfile.mkdtemp(prefix="jupyter-to-job-tensorboard-")
        return self._runtime_dir

    async def open(self, folder: str) -> tuple[Board, bool | None]:
        """The TensorBoard over ``folder`` (relative to the server's root), started if it
        is not running, and whether the folder has event files yet."""
        missing = missing_modules()
        if missing:
            raise ApiError(
                503,
                "TensorBoard is not installed in this server's environment (missing: "
                f"{', '.join(missing)}). Ask the hub's admins for an image with "
                "campus-gpu-hub[singleuser], or run `pip install tensorboard "
                "jupyter-server-proxy` and restart your server.",
                "tensorboard-not-installed",
            )
        name, logdir = resolve_folder(self.root, folder)
        board_id = board_id_of(logdir)
        events = await asyncio.to_thread(has_event_files, logdir)
        async with self._starting.setdefault(board_id, asyncio.Lock()):
            board = self.get(board_id)
            if board is None:
                board = await self._start(board_id, name, logdir)
                self._boards[board_id] = board
        return board, events

    async def _start(self, board_id: str, name: str, logdir: str) -> Board:
        runtime = self._socket_dir()
        board = Board(
            board_id=board_id,
            folder=name,
            logdir=logdir,
            socket_path=os.path.join(runtime, f"{board_id}.sock"),
            log_path=os.path.join(runtime, f"{board_id}.log"),
        )
        if os.path.exists(board.socket_path):
            os.unlink(board.socket_path)
        with open(board.log_path, "ab") as log_file:
            board.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "jupyter_to_job.extension.tensorboard_serve",
                "--logdir",
                logdir,
                "--socket",
                board.socket_path,
                "--parent-pid",
                str(os.getpid()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
            )
        self.log.info("TensorBoard over %s started (pid %s)", logdir, board.process.pid)
        await self._wait_until_serving(board)
        return board

    async def _wait_until_serving(self, board: Board) -> None:
        assert board.process is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        while loop.time() < deadline:
            if board.process.returncode is not None:
                raise ApiError(
                    500,
                    f"TensorBoard over {board.folder!r} stopped as it started: "
                    f"{self._last_log_line(board)} Its whole log is {board.log_path}.",
                    "tensorboard-failed",
                )
            if os.path.exists(board.socket_path) and await _accepts(board.socket_path):
                return
            await asyncio.sleep(0.1)
        await self._stop(board)
        raise ApiError(
            504,
            f"TensorBoard over {board.folder!r} did not start within "
            f"{self.start_timeout:.0f} seconds; try again, and if it keeps happening, read "
            f"its log in {board.log_path}.",
            "tensorboard-slow",
        )

    @staticmethod
    def _last_log_line(board: Board) -> str:
        try:
            with open(board.log_path, encoding="utf-8", errors="replace") as log_file:
                lines = [line.strip() for line in log_file if line.strip()]
        except OSError:
            return "it left no log."
        return lines[-1] if lines else "it left no log."

    async def _stop(self, board: Board) -> None:
        process = board.process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), timeout=5)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def stop_all(self) -> None:
        """Stop every TensorBoard this server started (the server is stopping)."""
        await asyncio.gather(*(self._stop(board) for board in self._boards.values()))
        self._boards.clear()
        if self._runtime_dir is not None:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
            self._runtime_dir = None


async def _accepts(socket_path: str) -> bool:
    try:
        _, writer = await asyncio.open_unix_connection(socket_path)
    except (OSError, ConnectionError, FileNotFoundError):
        return False
    writer.close()
    await writer.wait_closed()
    return True


def describe(board: Board, events: bool | None = None) -> dict[str, Any]:
    notice = None
    if events is False:
        notice = (
            f"There are no TensorBoard event files in {board.folder!r} yet. TensorBoard shows "
            "them as your training writes them (it looks again every few seconds)."
        )
    return {
        "board_id": board.board_id,
        "folder": board.folder,
        "url": board.url,
        "has_event_files": events,
        "notice": notice,
    }


class TensorBoardsHandler(ExtensionHandlerMixin, APIHandler):
    """``GET``: the running TensorBoards; ``POST {"folder"}``: open one."""

    auth_resource = AUTH_RESOURCE

    @property
    def boards(self) -> TensorBoards:
        return self.extensionapp.boards  # type: ignore[no-any-return]

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = as_api_error(kwargs.get("exc_info", (None, None, None))[1], status_code)
        self.set_status(error.status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(error_response(error))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        log_error(self.log, value, as_api_error(value))

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.finish({"tensorboards": [describe(board) for board in self.boards.running()]})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        if len(self.request.body) > SMALL_BODY_LIMIT:
            raise ApiError(413, "The request is too large: send only the folder.", "too-large")
        body = json_object(self.request.body or b"{}")
        folder = body.get("folder", self.extensionapp.default_folder)
        if not isinstance(folder, str):
            raise ApiError(400, "The folder must be a path such as 'runs'.", "invalid-folder")
        board, events = await self.boards.open(folder)
        self.finish(describe(board, events))


def error_page(handler: JupyterHandler, status: int, message: str) -> None:
    """A short page that says what went wrong (Jupyter's own 404 page drops the sentence)."""
    handler.set_status(status)
    handler.set_header("Content-Type", "text/html; charset=utf-8")
    handler.finish(
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>TensorBoard</title></head><body style='font-family: sans-serif; "
        "max-width: 40em; margin: 2em auto'><h1>TensorBoard did not open</h1>"
        f"<p role='alert'>{html.escape(message)}</p></body></html>"
    )


class OpenTensorBoardHandler(ExtensionHandlerMixin, JupyterHandler):
    """``GET ?folder=...``: open TensorBoard over the folder and go there (a page link)."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        # A plain link starts a process: only from this server's own pages and the hub's
        # (the same origin behind the hub's proxy), never from a link on another site.
        if self.request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            error_page(
                self,
                403,
                "This link to TensorBoard came from another site, so it was not followed. "
                "Open TensorBoard from your JupyterLab's launcher or from the hub's jobs page.",
            )
            return
        folder = self.get_argument("folder", self.extensionapp.default_folder)
        try:
            board, _ = await self.extensionapp.boards.open(folder)
        except ApiError as error:
            error_page(self, error.status, error.message)
            return
        self.redirect(url_path_join(self.base_url, board.url))


def proxy_handler_class() -> type:
    """jupyter-server-proxy's handler, aimed at a board's socket (imported only when the
    package is there)."""
    from jupyter_server_proxy.handlers import ProxyHandler

    class TensorBoardProxyHandler(ProxyHandler):
        """TensorBoard's pages and data, proxied to its socket, for the server's user."""

        def initialize(self, boards: TensorBoards) -> None:
            self.boards = boards

        def _board(self, board_id: str) -> Board:
            board = self.boards.get(board_id)
            if board is None:
                raise web.HTTPError(404, "%s", GONE)
            self.unix_socket = board.socket_path
            self.proxy_base = url_path_join(BOARD_PATH, board_id)
            return board

        def write_error(self, status_code: int, **kwargs: Any) -> None:
            if status_code == 404:
                error_page(self, 404, GONE)
            else:
                super().write_error(status_code, **kwargs)

        async def http_get(self, board_id: str, proxied_path: str) -> Any:
            self._board(board_id)
            return await self.proxy("localhost", 0, proxied_path)

        async def open(self, board_id: str, proxied_path: str) -> Any:
            self._board(board_id)
            return await self.proxy_open("localhost", 0, proxied_path)

        def post(self, board_id: str, proxied_path: str) -> Any:
            self._board(board_id)
            return self.proxy("localhost", 0, proxied_path)

        def head(self, board_id: str, proxied_path: str) -> Any:
            self._board(board_id)
            return self.proxy("localhost", 0, proxied_path)

    return TensorBoardProxyHandler


class AddSlashHandler(JupyterHandler):
    """``.../tensorboard/<id>`` to ``.../tensorboard/<id>/``: TensorBoard's links are
    relative to its root."""

    @web.authenticated
    def get(self, board_id: str) -> None:
        self.redirect(url_path_join(self.base_url, BOARD_PATH, board_id) + "/")


class TensorBoardApp(ExtensionApp):
    """``jupyter_to_job.extension.tensorboard``: TensorBoard for the server's user."""

    name = "jupyter_to_job_tensorboard"
    load_other_extensions = True

    default_folder = Unicode(
        "runs",
        help="""The folder TensorBoard opens on when the person names none, relative to the
        server's root (their home on the hub).

        Example: ``c.TensorBoardApp.default_folder = "logs"``.
        """,
    ).tag(config=True)

    start_timeout = Float(
        60.0,
        help="""Seconds a TensorBoard may take to start serving before the lab is told it
        failed (a first start imports TensorFlow's protobufs and plugins).

        Example: ``c.TensorBoardApp.start_timeout = 120``.
        """,
    ).tag(config=True)

    boards: TensorBoards

    def initialize_settings(self) -> None:
        root = os.path.expanduser(self.serverapp.root_dir) if self.serverapp else "."
        self.boards = TensorBoards(root, self.start_timeout, self.log)
        missing = missing_modules()
        if missing:
            self.log.warning(
                "TensorBoard is off in this server: %s not installed "
                "(pip install 'campus-gpu-hub[singleuser]').",
                ", ".join(missing),
            )

    def initialize_handlers(self) -> None:
        self.handlers.extend(
            [
                (API_PATH, TensorBoardsHandler),
                (f"{BOARD_PATH}/open", OpenTensorBoardHandler),
                (f"{BOARD_PATH}/{BOARD_ID}", AddSlashHandler),
            ]
        )
        if not missing_modules():
            self.handlers.append(
                (
                    f"{BOARD_PATH}/{BOARD_ID}/(?P<proxied_path>.*)",
                    proxy_handler_class(),
                    {"boards": self.boards},
                )
            )

    async def stop_extension(self) -> None:
        await self.boards.stop_all()


def _jupyter_server_extension_points() -> list[dict[str, object]]:
    return [{"module": "jupyter_to_job.extension.tensorboard", "app": TensorBoardApp}]
