"""The notebook a job runs: taken from the request or the user's folder, checked, as bytes.

The bytes are copied into the job at create time (``input.ipynb``), so edits made
after submitting do not change the job.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import InvalidJobRequest


def notebook_snapshot(
    input_path: str,
    notebook: dict[str, Any] | str | bytes | None,
    source_root: str | os.PathLike[str] | None,
    *,
    max_bytes: int,
) -> bytes:
    """The notebook's content: ``notebook`` when given, else ``source_root/input_path``.

    Raises :class:`InvalidJobRequest` for a missing, oversized or malformed
    notebook, and for a path that leads outside ``source_root`` (a symlink, say).
    """
    if isinstance(notebook, dict):
        content = json.dumps(notebook).encode()
    elif isinstance(notebook, str):
        content = notebook.encode()
    elif isinstance(notebook, bytes):
        content = notebook
    elif source_root is not None:
        content = _read_from_folder(Path(source_root), input_path, max_bytes)
    else:
        raise InvalidJobRequest("The request carries no notebook to run.")
    if len(content) > max_bytes:
        raise InvalidJobRequest(_too_large(input_path, max_bytes))
    try:
        data = json.loads(content)
    except (UnicodeDecodeError, ValueError):
        data = None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("cells"), list)
        or not isinstance(data.get("nbformat"), int)
        or data["nbformat"] < 4
    ):
        raise InvalidJobRequest(
            f"{input_path!r} is not a notebook that can run (nbformat 4 JSON expected). "
            "Open it in JupyterLab and save it again."
        )
    return content


def _read_from_folder(source_root: Path, input_path: str, max_bytes: int) -> bytes:
    root = source_root.resolve()
    path = (root / input_path).resolve()
    if not path.is_relative_to(root):
        raise InvalidJobRequest(
            f"The notebook {input_path!r} is outside your folder; "
            "move it into your home folder to run it as a job."
        )
    if not path.is_file():
        raise InvalidJobRequest(
            f"There is no notebook {input_path!r} in your folder. Save it, then run it as a job."
        )
    if path.stat().st_size > max_bytes:
        raise InvalidJobRequest(_too_large(input_path, max_bytes))
    return path.read_bytes()


def _too_large(input_path: str, max_bytes: int) -> str:
    return (
        f"The notebook {input_path!r} is larger than {max_bytes // (1024 * 1024)} MiB. "
        "Clear its outputs (Edit → Clear Outputs of All Cells), save it, and try again."
    )
