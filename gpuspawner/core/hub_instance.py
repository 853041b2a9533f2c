"""Which hub instance a process belongs to: an id kept in the hub's runtime folder.

Design notes: docs/design/core.md, "gpuspawner.core.hub_instance".
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import psutil

from .kept_value import kept_value

HUB_ID_VARIABLE = "GPUSPAWNER_HUB_ID"
"""How a hub hands its id to the services it starts."""
HUB_ID_FILE = "hub-instance-id"
"""The file in the hub's runtime folder that keeps its id."""
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""What an id may be: a name usable as a folder (a cgroup) and in a log line."""


class HubIdError(ValueError):
    """The id file exists but holds no usable id; the message says what to do."""


def hub_instance_id(folder: str | os.PathLike[str]) -> str:
    """The id of the hub whose runtime folder is ``folder``: read back from its
    ``hub-instance-id`` file, or made (``hub-`` and 12 random hex digits) and saved there at
    the first start. Two processes starting at once get the same id.

    Deleting the file gives the hub a new id at its next start: groups it made before are
    then another hub's to it, and are left alone (remove them by hand once they are empty).
    """
    return kept_value(Path(folder) / HUB_ID_FILE, lambda: f"hub-{secrets.token_hex(6)}", _read)


def _read(path: Path) -> str:
    value = path.read_text().strip()
    if not HUB_ID.match(value):
        raise HubIdError(
            f"{path} does not hold a hub id (letters, digits, '_', '.' and '-', at most 64, "
            "on one line). Delete it to give the hub a new id, then start the hub again."
        )
    return value


def process_scope(pid: int | None = None) -> str:
    """A scope for one process that belongs to no hub: ``process-<pid>-<start time>``, so
    neither another process nor a later one with the same pid ever shares it."""
    pid = os.getpid() if pid is None else pid
    return f"process-{pid}-{int(psutil.Process(pid).create_time())}"


def valid_hub_id(value: str) -> str:
    """``value`` if it can be a hub id; otherwise :class:`HubIdError` says what can."""
    if not HUB_ID.match(value):
        raise HubIdError(
            f"{value!r} cannot be a hub id: use letters, digits, '_', '.' and '-' (at most "
            "64, starting with a letter or digit), as gpuspawner.core.hub_instance.hub_instance_id "
            "makes them."
        )
    return value
