"""Secrets a hub configuration keeps in a file, so they stay the same across restarts.

Design notes: docs/design/hub.md, "gpuspawner.persistent_secret".
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path


class SecretFileError(RuntimeError):
    """The secret file exists but cannot be used; the message says what to do."""


def persistent_secret(path: str | os.PathLike[str], *, nbytes: int = 32) -> str:
    """The secret kept in ``path``: read back if the file exists, else made and saved.

    A new secret is ``nbytes`` random bytes as hexadecimal, written to a file created
    with mode 0600 (its folder is created, mode 0700, if missing). Two processes starting
    at once get the same secret. An existing file must be private to its owner and hold
    one non-empty line; otherwise :class:`SecretFileError` says how to fix it.
    """
    path = Path(path)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(handle, "w") as out:  # mkstemp makes it 0600
            out.write(secrets.token_hex(nbytes) + "\n")
            out.flush()
            os.fsync(out.fileno())
        # A hard link appears with its whole content at once, and only if nobody was first.
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return _read(path)


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
