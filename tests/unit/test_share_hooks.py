"""Scenario: PyTorch in a GPU server stays inside the memory share once it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gpuspawner.local import SHARE_HOOKS

FAKE_TORCH = """
import json, os
class cuda:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def device_count():
        return 2
    @staticmethod
    def set_per_process_memory_fraction(fraction, device):
        with open(os.environ["CALLS"], "a") as calls:
            calls.write(json.dumps([fraction, device]) + "\\n")
"""


def run_python(tmp_path: Path, code: str, fraction: str | None, extra_site: str = "") -> str:
    fake = tmp_path / "site"
    (fake / "torch").mkdir(parents=True, exist_ok=True)
    (fake / "torch" / "__init__.py").write_text(textwrap.dedent(FAKE_TORCH))
    if extra_site:
        (fake / "sitecustomize.py").write_text(extra_site)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([SHARE_HOOKS, str(fake)])
    env["CALLS"] = str(tmp_path / "calls.jsonl")
    if fraction is not None:
        env["GPUSPAWNER_TORCH_MEMORY_FRACTION"] = fraction
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    calls = tmp_path / "calls.jsonl"
    return (calls.read_text() if calls.exists() else "") + result.stdout


def test_importing_torch_applies_the_share_to_every_visible_gpu(tmp_path):
    out = run_python(tmp_path, "import torch", "0.250")
    assert out.splitlines() == ["[0.25, 0]", "[0.25, 1]"]


def test_without_a_share_torch_is_left_alone(tmp_path):
    assert run_python(tmp_path, "import torch", None) == ""


def test_a_site_customization_shadowed_by_the_hook_still_runs(tmp_path):
    out = run_python(tmp_path, "print('done')", "0.5", extra_site="print('site ran')\n")
    assert out.splitlines() == ["site ran", "done"]
