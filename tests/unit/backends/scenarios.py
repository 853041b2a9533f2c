"""The shares and GPUs the back-end scenarios are written against."""

from __future__ import annotations

from fractions import Fraction

from gpuspawner.policy.share import GPUShare

# GPU names as NVML reports them, and their memory in MiB as nvidia-smi shows it.
A100_80GB = "NVIDIA A100-SXM4-80GB"
A100_80GB_MIB = 81920
A100_40GB = "NVIDIA A100-PCIE-40GB"
A100_40GB_MIB = 40960
H100_80GB = "NVIDIA H100 80GB HBM3"
H100_80GB_MIB = 81559
RTX_4090 = "NVIDIA GeForce RTX 4090"
RTX_4090_MIB = 24564

QUARTER = GPUShare(
    fraction=Fraction(1, 4), memory_mib=10 * 1024, compute_min_pct=25, compute_max_pct=100
)
"""The instructor's example: "1/4 GPU, 10 GiB, compute 25 to 100 percent"."""
WHOLE = GPUShare(count=1)
"""One whole GPU."""
