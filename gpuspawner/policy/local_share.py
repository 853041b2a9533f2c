"""Render a GPU share as a local process environment (one multi-GPU workstation).

Design notes: docs/design/policy.md, "gpuspawner.policy.local_share".
"""

from __future__ import annotations

from datetime import datetime

from .capacity import Allocation
from .share import GPUDevice, GPUShare


def local_share_environment(
    share: GPUShare | None,
    allocation: Allocation | None,
    devices: list[GPUDevice],
    *,
    profile_id: str,
    session_end: datetime | None = None,
    class_end: datetime | None = None,
    hami_core_library: str | None = None,
) -> dict[str, str]:
    """Environment variables that give a local server its share (and describe it)."""
    env: dict[str, str] = {"GPUSPAWNER_PROFILE": profile_id}
    if session_end is not None:
        env["GPUSPAWNER_SESSION_END"] = session_end.isoformat()
    if class_end is not None:
        env["GPUSPAWNER_CLASS_END"] = class_end.isoformat()
    if share is None or allocation is None:
        env.update(
            {
                "CUDA_VISIBLE_DEVICES": "",
                "NVIDIA_VISIBLE_DEVICES": "void",
                "GPUSPAWNER_GPU_SHARE": "No GPU",
            }
        )
        return env
    by_id = {d.id: d for d in devices}
    held = [by_id[i] for i in allocation.device_ids if i in by_id]
    first = held[0] if held else None
    visible = ",".join(str(d.index) if d.simulated else d.id for d in held)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": visible,
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "GPUSPAWNER_GPU_DEVICES": ",".join(d.id for d in held),
            "GPUSPAWNER_GPU_SHARE": share.describe(
                first.model if first else None, first.memory_mib if first else None
            ),
            "GPUSPAWNER_GPU_FRACTION": f"{allocation.fraction.numerator}/{allocation.fraction.denominator}",
            "GPUSPAWNER_GPU_MEMORY_MIB": str(allocation.memory_mib),
        }
    )
    if any(d.simulated for d in held):
        env["GPUSPAWNER_GPU_SIMULATED"] = "1"
    if share.compute_max_pct is not None:
        env["GPUSPAWNER_GPU_COMPUTE_MAX_PCT"] = str(share.compute_max_pct)
    if share.is_whole or first is None:
        return env
    if hami_core_library:
        # HAMi-core enforces the cap and reports it as the device's total memory, so
        # fractions of the "device" would shrink the share a second time.
        env.update(
            {
                "LD_PRELOAD": hami_core_library,
                "CUDA_DEVICE_MEMORY_LIMIT": f"{allocation.memory_mib}m",
                "TF_FORCE_GPU_ALLOW_GROWTH": "true",
                "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            }
        )
        if share.compute_max_pct is not None and share.compute_max_pct < 100:
            env["CUDA_DEVICE_SM_LIMIT"] = str(share.compute_max_pct)
        return env
    memory_fraction = min(allocation.memory_mib / first.memory_mib, 1.0)
    text = f"{memory_fraction:.3f}"
    env.update(
        {
            # PyTorch: applied on import by gpuspawner/share_hooks/sitecustomize.py.
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": text,
            # JAX: preallocate only the share. One name only: current JAX falls back to
            # the CPU when both are set; the share hook renames it for the installed JAX.
            "XLA_PYTHON_CLIENT_MEM_FRACTION": text,
            # TensorFlow: grow on demand instead of taking the whole card.
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        }
    )
    return env
