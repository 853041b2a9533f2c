"""Scenario: PyTorch in a GPU server stays inside the memory share once it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gpuspawner.spawners.local import SHARE_HOOKS

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


# jaxlib reads its GPU client options in Python, in jaxlib/xla_client.py. These stubs read
# them as each generation does: older releases know only the legacy name; current ones
# prefer the new name and refuse the two together (JAX then falls back to the CPU).
LEGACY_JAXLIB = """
import os
def gpu_memory_fraction():
    return os.getenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
"""
CURRENT_JAXLIB = """
import os
def gpu_memory_fraction():
    fraction = os.getenv("XLA_CLIENT_MEM_FRACTION", "")
    deprecated = os.getenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
    if deprecated:
        if fraction:
            raise ValueError(
                "XLA_CLIENT_MEM_FRACTION is specified together with "
                "XLA_PYTHON_CLIENT_MEM_FRACTION. Remove the latter one, it is deprecated."
            )
        fraction = deprecated
    return fraction
"""
STUB_JAX = """
from jaxlib import xla_client
def devices():
    try:
        return "gpu with memory fraction " + (xla_client.gpu_memory_fraction() or "default")
    except ValueError as error:
        return "cpu: " + str(error)
"""
SHOW_JAX = """
import os
{before}
import jax
print(jax.devices())
print(sorted(n for n in os.environ if n.endswith("MEM_FRACTION")))
"""


def run_jax(tmp_path: Path, jaxlib: str, env: dict[str, str], before: str = "") -> list[str]:
    site = tmp_path / "jax-site"
    for package, source in (("jaxlib", ""), ("jax", STUB_JAX)):
        (site / package).mkdir(parents=True, exist_ok=True)
        (site / package / "__init__.py").write_text(textwrap.dedent(source))
    (site / "jaxlib" / "xla_client.py").write_text(textwrap.dedent(jaxlib))
    base = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.endswith("MEM_FRACTION")
    }
    base["PYTHONPATH"] = os.pathsep.join([SHARE_HOOKS, str(site)])
    result = subprocess.run(
        [sys.executable, "-c", SHOW_JAX.format(before=before)],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def quarter_share_environment() -> dict[str, str]:
    """What LocalGPUSpawner renders for 1/4 of a simulated 80 GiB GPU."""
    from fractions import Fraction

    from gpuspawner.policy.capacity import Allocation
    from gpuspawner.policy.local_share import local_share_environment
    from gpuspawner.policy.share import GPUDevice, GPUShare

    device = GPUDevice("GPU-aaaa", 0, "NVIDIA H100 80GB HBM3", 80 * 1024)
    share = GPUShare(fraction=Fraction(1, 4), memory_mib=20 * 1024)
    allocation = Allocation(
        key="job:1",
        owner="alice",
        profile_id="quarter",
        course_id=None,
        device_ids=(device.id,),
        fraction=share.fraction,
        memory_mib=share.memory_mib,
        compute_min_pct=0,
    )
    env = local_share_environment(share, allocation, [device], profile_id="quarter")
    return {name: value for name, value in env.items() if name.endswith("MEM_FRACTION")}


def test_an_older_jax_reads_the_share_under_the_only_name_it_knows(tmp_path):
    lines = run_jax(tmp_path, LEGACY_JAXLIB, quarter_share_environment())

    assert lines == ["gpu with memory fraction 0.250", "['XLA_PYTHON_CLIENT_MEM_FRACTION']"]


def test_a_current_jax_gets_the_share_under_its_new_name_alone_and_keeps_the_gpu(tmp_path):
    lines = run_jax(tmp_path, CURRENT_JAXLIB, quarter_share_environment())

    assert lines == ["gpu with memory fraction 0.250", "['XLA_CLIENT_MEM_FRACTION']"]


def test_given_both_names_already_set_a_current_jax_still_keeps_the_gpu(tmp_path):
    # An image or site that sets the new name beside the share's: JAX would fall back to CPU.
    both = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.250", "XLA_CLIENT_MEM_FRACTION": "0.300"}

    lines = run_jax(tmp_path, CURRENT_JAXLIB, both)

    assert lines == ["gpu with memory fraction 0.300", "['XLA_CLIENT_MEM_FRACTION']"]


def test_a_fraction_the_notebook_sets_before_importing_jax_is_kept_under_one_name(tmp_path):
    before = "os.environ['XLA_CLIENT_MEM_FRACTION'] = '0.100'"

    current = run_jax(tmp_path, CURRENT_JAXLIB, quarter_share_environment(), before=before)
    legacy = run_jax(tmp_path / "old", LEGACY_JAXLIB, quarter_share_environment(), before=before)

    assert current == ["gpu with memory fraction 0.100", "['XLA_CLIENT_MEM_FRACTION']"]
    assert legacy == ["gpu with memory fraction 0.100", "['XLA_PYTHON_CLIENT_MEM_FRACTION']"]


def test_without_a_share_jax_is_left_alone(tmp_path):
    lines = run_jax(tmp_path, CURRENT_JAXLIB, {})

    assert lines == ["gpu with memory fraction default", "[]"]
