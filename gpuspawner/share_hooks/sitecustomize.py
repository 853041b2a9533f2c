"""Apply the server's GPU memory share to PyTorch and JAX when a notebook imports them.

Design notes: docs/design/hub.md, "gpuspawner.share_hooks.sitecustomize".
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_FRACTION_VARIABLE = "GPUSPAWNER_TORCH_MEMORY_FRACTION"
_JAX_LEGACY_NAME = "XLA_PYTHON_CLIENT_MEM_FRACTION"
_JAX_CURRENT_NAME = "XLA_CLIENT_MEM_FRACTION"


def _warn(message: str) -> None:
    print(f"gpuspawner: {message}", file=sys.stderr)


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
        _warn(f"could not apply the GPU memory share to PyTorch: {error}")


def _installed_jax_reads_current_name() -> bool:
    """Whether the installed jaxlib reads ``XLA_CLIENT_MEM_FRACTION`` (without importing it).

    jaxlib reads its GPU client options in Python; a release that knows the current name
    says so in the source of its top-level modules. Older releases read only the legacy name.
    """
    spec = importlib.util.find_spec("jaxlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    if _JAX_CURRENT_NAME in f.read():
                        return True
            except OSError:
                continue
    return False


def choose_jax_memory_fraction_name(environ=os.environ, reads_current=None) -> None:
    """Leave JAX's memory fraction under exactly one name: the one the installed JAX reads.

    A value the notebook set itself (under either name) wins over the share's, as it would
    without the hook; the share's value is the legacy name's when both hold one.
    """
    legacy = environ.get(_JAX_LEGACY_NAME)
    current = environ.get(_JAX_CURRENT_NAME)
    if not legacy and not current:
        return
    if reads_current is None:
        try:
            reads_current = _installed_jax_reads_current_name()
        except Exception as error:  # never break "import jax" over a soft limit
            _warn(f"could not tell which memory fraction variable JAX reads: {error}")
            reads_current = False
    # Both set: the current name was not ours (the share sets only the legacy one).
    value = current or legacy
    keep, drop = (
        (_JAX_CURRENT_NAME, _JAX_LEGACY_NAME)
        if reads_current
        else (_JAX_LEGACY_NAME, _JAX_CURRENT_NAME)
    )
    environ[keep] = value
    environ.pop(drop, None)


class _ShareFinder(importlib.abc.MetaPathFinder):
    """Applies the share around the first import of ``torch``, ``jax`` or ``jaxlib``."""

    def __init__(self) -> None:
        self.jax_done = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname in ("jax", "jaxlib"):
            if not self.jax_done:
                self.jax_done = True
                choose_jax_memory_fraction_name()
            return None
        if fullname != "torch" or not os.environ.get(_FRACTION_VARIABLE):
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


def _install() -> None:
    if "jax" in sys.modules or "jaxlib" in sys.modules:
        choose_jax_memory_fraction_name()
    if os.environ.get(_FRACTION_VARIABLE) and "torch" in sys.modules:
        _apply_torch_share(sys.modules["torch"])
    wants_torch = os.environ.get(_FRACTION_VARIABLE) and "torch" not in sys.modules
    wants_jax = os.environ.get(_JAX_LEGACY_NAME) or os.environ.get(_JAX_CURRENT_NAME)
    if wants_torch or wants_jax:
        sys.meta_path.insert(0, _ShareFinder())


_install()
_run_shadowed_sitecustomize()
