"""A value kept in a one-line file: made at the first start, read back ever after."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def kept_value(
    path: Path, make: Callable[[], str], read: Callable[[Path], str], *, folder_mode: int = 0o777
) -> str:
    """``read(path)``; if the file does not exist yet, ``make()`` is first written to it as
    one line (mode 0600, its folder made with ``folder_mode`` if missing). Two processes
    starting at once read the same value: the file appears whole, and only once."""
    try:
        return read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=folder_mode, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(handle, "w") as out:  # mkstemp makes it 0600
            out.write(make() + "\n")
            out.flush()
            os.fsync(out.fileno())
        # A hard link appears with its whole content at once, and only if nobody was first.
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return read(path)
