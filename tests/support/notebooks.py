"""Small notebooks for job tests, written with nbformat."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from jupyter_to_job.runfiles import JobFiles, RunnerSpec, write_model

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def notebook(*cells: str | tuple[str, list[str]]) -> nbformat.NotebookNode:
    """A python3 notebook; a cell is source code, ``("# md", ["markdown"])`` or ``(code, tags)``."""
    built = []
    for cell in cells:
        if isinstance(cell, tuple):
            source, tags = cell
            if tags == ["markdown"]:
                built.append(new_markdown_cell(source))
            else:
                built.append(new_code_cell(source, metadata={"tags": tags}))
        else:
            built.append(new_code_cell(cell))
    return new_notebook(cells=built, metadata={"kernelspec": KERNELSPEC})


def notebook_json(*cells: str | tuple[str, list[str]]) -> dict:
    """The notebook of :func:`notebook` as the JSON document a browser sends or saves."""
    return json.loads(nbformat.writes(notebook(*cells)))


def wait_for_file(path: Path) -> str:
    """Cell source that blocks until ``path`` exists (a gate the test opens)."""
    return (
        "import os, time\n"
        f"while not os.path.exists({str(path)!r}):\n"
        "    time.sleep(0.05)\n"
        f"print('gate {path.name} opened')"
    )


def append_line(path: Path, text: str) -> str:
    """Cell source that appends ``text`` to ``path`` (counts how often a job ran)."""
    return f"with open({str(path)!r}, 'a') as stream:\n    stream.write({text!r} + '\\n')"


def make_job_dir(folder: Path, nb: nbformat.NotebookNode, **spec: object) -> JobFiles:
    """A job directory as the manager writes it: input.ipynb and job.json."""
    folder.mkdir(parents=True, exist_ok=True)
    files = JobFiles(folder)
    nbformat.write(nb, files.input_notebook)
    write_model(files.spec, RunnerSpec(job_id=folder.name, **spec))  # type: ignore[arg-type]
    return files


def read_output(files: JobFiles) -> nbformat.NotebookNode:
    return nbformat.read(files.output("ipynb"), as_version=4)


def stream_text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def read_status_json(files: JobFiles) -> dict:
    return json.loads(files.status.read_text())
