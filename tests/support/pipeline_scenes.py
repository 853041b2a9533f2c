"""The three-stage pipeline of the pipeline scenarios (local, Kubernetes, job service).

- stage ``prepare``: ``prepare.ipynb`` writes ``data.txt`` in the shared folder;
- stage ``evaluate``: ``evaluate.ipynb`` raises ValueError in its third code cell when
  ``mode`` is ``"fail"`` (else writes ``evaluated`` in the shared folder), and
  ``watch.ipynb`` loops until ``evaluated`` is there (so it runs on while the other fails);
- stage ``report``: ``report.ipynb`` reads ``data.txt`` from the shared folder and writes
  ``report.txt`` beside itself, in the owner's home.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat

from .job_hub import JOB_TIMEOUT, JobService
from .notebooks import notebook

SHARED = "import os, pathlib\nshared = pathlib.Path(os.environ['JUPYTER_TO_JOB_PIPELINE_DIR'])"

NOTEBOOKS = {
    "prepare.ipynb": notebook(
        SHARED,
        "(shared / 'data.txt').write_text('made by stage 1')",
    ),
    "evaluate.ipynb": notebook(
        ("mode = 'pass'", ["parameters"]),
        SHARED,
        "if mode == 'fail':\n    raise ValueError(f'cannot evaluate in mode {mode}')",
        "(shared / 'evaluated').write_text('yes')",
    ),
    "watch.ipynb": notebook(
        SHARED,
        "import time\nwhile not (shared / 'evaluated').exists():\n    time.sleep(0.1)",
    ),
    "report.ipynb": notebook(
        SHARED,
        "text = (shared / 'data.txt').read_text()\n"
        "pathlib.Path('report.txt').write_text(text + ', read by stage 3')",
    ),
}

TEMPLATE_YAML = """\
name: Evaluate the model
parameters:
  mode: fail
stages:
  - name: prepare
    jobs:
      - input_path: prepare.ipynb
  - name: evaluate
    jobs:
      - input_path: evaluate.ipynb
      - input_path: watch.ipynb
  - name: report
    jobs:
      - input_path: report.ipynb
"""
"""The pipeline as its template file: ``mode: fail`` makes stage 2 fail."""

SHARED_FOLDER = "pipelines/evaluate-the-model"
"""The default shared folder of that pipeline, relative to the home."""


def pipeline_request(mode: str, **fields: Any) -> dict[str, Any]:
    """The CreatePipeline fields of the scene, with pipeline-wide ``mode``."""
    return {
        "name": "Evaluate the model",
        "parameters": {"mode": mode},
        "stages": [
            {"name": "prepare", "jobs": [{"input_path": "prepare.ipynb"}]},
            {
                "name": "evaluate",
                "jobs": [{"input_path": "evaluate.ipynb"}, {"input_path": "watch.ipynb"}],
            },
            {"name": "report", "jobs": [{"input_path": "report.ipynb"}]},
        ],
        **fields,
    }


def notebooks_json() -> dict[str, dict[str, Any]]:
    """The scene's notebooks as a POST api/pipelines carries them."""
    return {path: json.loads(nbformat.writes(nb)) for path, nb in NOTEBOOKS.items()}


def write_home(home: Path) -> Path:
    """Save the scene's notebooks and template in ``home``; returns it."""
    home.mkdir(parents=True, exist_ok=True)
    for path, nb in NOTEBOOKS.items():
        nbformat.write(nb, home / path)
    (home / "evaluate.pipeline.yaml").write_text(TEMPLATE_YAML)
    return home


def settled_pipeline(service: JobService, pipeline_id: str) -> dict[str, Any]:
    """The pipeline (through the job service's API) once it has ended and none of its jobs
    runs any more."""
    deadline = time.monotonic() + JOB_TIMEOUT
    pipeline: dict[str, Any] = {}
    while time.monotonic() < deadline:
        answer = service.request("GET", f"pipelines/{pipeline_id}")
        assert answer.status_code == 200, answer.text
        pipeline = answer.json()
        jobs = [job for stage in pipeline["stages"] for job in stage["jobs"]]
        if pipeline["status"] in ("COMPLETED", "FAILED", "STOPPED") and not any(
            job["status"] in ("CREATED", "QUEUED", "RUNNING", "STOPPING") for job in jobs
        ):
            return pipeline
        time.sleep(0.2)
    raise AssertionError(f"pipeline {pipeline_id} never settled: {pipeline}")
