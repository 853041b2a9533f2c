"""Apply the server's GPU memory share to PyTorch when a notebook imports it.

LocalGPUSpawner puts this folder first on ``PYTHONPATH`` of GPU servers and sets
``GPUSPAWNER_TORCH_MEMORY_FRACTION``. When ``torch`` is imported, every visible
GPU gets ``torch.cuda.set_per_process_memory_fraction(fraction)``, so a student's
PyTorch caching allocator stops at their share instead of taking the whole card.

This is cooperative, not a security boundary (a notebook can raise the fraction
again); it keeps well-meaning code inside its share. JAX and TensorFlow are
limited through their own environment variables. Any ``sitecustomize`` that this
module shadows is run afterwards, so site configuration keeps working.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_FRACTION_VARIABLE = "GPUSPAWNER_TORCH_MEMORY_FRACTION"


def _apply_torch_share(torch_module) -> None:
    try:
        fraction = float(os.environ[_FRACTION_VARIABLE])
    except (KeyError, ValueError):
        return
    if not 0 < fraction <= 1:
        return
    try:
        cuda = torch_module.cuda
        if not cuda.is_available():
            return
        for device in range(cuda.device_count()):
            cuda.set_per_process_memory_fraction(fraction, device)
    except Exception as error:  # never break "import torch" over a soft limit
        print(
            f"gpuspawner: could not apply the GPU memory share to PyTorch: {error}", file=sys.stderr
        )


class _TorchShareFinder(importlib.abc.MetaPathFinder):
    """Wraps the real loader of ``torch`` to apply the share right after import."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec("torch")
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        original_exec = spec.loader.exec_module

        def exec_module(module, _original=original_exec):
            _original(module)
            _apply_torch_share(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder == here:
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            namespace = {"__name__": "_gpuspawner_next_sitecustomize", "__file__": candidate}
            with open(candidate, encoding="utf-8") as source:
                exec(compile(source.read(), candidate, "exec"), namespace)
            return


if os.environ.get(_FRACTION_VARIABLE):
    if "torch" in sys.modules:
        _apply_torch_share(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchShareFinder())
_run_shadowed_sitecustomize()
