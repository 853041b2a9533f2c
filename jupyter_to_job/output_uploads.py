"""Outputs a job sends back to the job service, and the per-job token that lets it.

Design notes: docs/design/jobs.md, "jupyter_to_job.output_uploads".
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from .runfiles import JobFiles

TOKEN_HASH_FILE = "upload-token.sha256"
MAX_OUTPUT_BYTES = 512 * 1024 * 1024
"""The largest output a job may send (an executed notebook with many figures)."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_upload_token(files: JobFiles) -> str:
    """A new token for the job's uploads; its hash replaces any earlier one."""
    token = secrets.token_urlsafe(32)
    path = files.directory / TOKEN_HASH_FILE
    temporary = path.with_name(f".{TOKEN_HASH_FILE}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as stream:
        stream.write(_digest(token) + "\n")
    os.replace(temporary, path)
    return token


def revoke_upload_token(files: JobFiles) -> None:
    """The job's token opens nothing any more."""
    with contextlib.suppress(FileNotFoundError):
        (files.directory / TOKEN_HASH_FILE).unlink()


def upload_token_valid(files: JobFiles, token: str) -> bool:
    """True when ``token`` is the job's current upload token."""
    try:
        stored = (files.directory / TOKEN_HASH_FILE).read_text().strip()
    except OSError:
        return False
    return bool(stored) and hmac.compare_digest(stored, _digest(token))


class OutputTooLarge(Exception):
    """More than the limit was sent."""


class OutputUpload:
    """One output arriving: written to a temporary file in the job's folder as it comes,
    and put in place whole by :meth:`commit` (readers see the old output or the new one)."""

    def __init__(self, target: Path, limit: int = MAX_OUTPUT_BYTES) -> None:
        self.target = target
        self.limit = limit
        self.size = 0
        self.too_large = False
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        os.fchmod(fd, 0o640)
        self._temporary = Path(name)
        self._stream = os.fdopen(fd, "wb")

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            self.too_large = True
        if not self.too_large:
            self._stream.write(chunk)

    def commit(self) -> None:
        """Put the output in place; raises :class:`OutputTooLarge` beyond the limit."""
        self._stream.close()
        if self.too_large:
            self.discard()
            raise OutputTooLarge(self.target.name)
        os.replace(self._temporary, self.target)

    def discard(self) -> None:
        """Drop what arrived (a broken or refused upload); nothing when committed."""
        self._stream.close()
        self._temporary.unlink(missing_ok=True)
