"""Secrets a hub configuration keeps in a file, so they stay the same across restarts.

Design notes: docs/design/hub.md, "gpuspawner.persistent_secret".
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from .core.kept_value import kept_value


class SecretFileError(RuntimeError):
    """The secret file exists but cannot be used; the message says what to do."""


def persistent_secret(path: str | os.PathLike[str], *, nbytes: int = 32) -> str:
    """The secret kept in ``path``: read back if the file exists, else made and saved.

    A new secret is ``nbytes`` random bytes as hexadecimal, written to a file created
    with mode 0600 (its folder is created, mode 0700, if missing). Two processes starting
    at once get the same secret. An existing file must be private to its owner and hold
    one non-empty line; otherwise :class:`SecretFileError` says how to fix it.
    """
    return kept_value(Path(path), lambda: secrets.token_hex(nbytes), _read, folder_mode=0o700)


def _read(path: Path) -> str:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretFileError(
            f"The secret file {path} can be read by other users (mode {stat.filemode(mode)}); "
            f"make it private with `chmod 600 {path}`, or delete it to make a new secret, "
            "then start the hub again."
        )
    value = path.read_text().strip()
    if not value or "\n" in value:
        raise SecretFileError(
            f"The secret file {path} does not hold one secret on one line; delete it to "
            "make a new secret, then start the hub again."
        )
    return value
