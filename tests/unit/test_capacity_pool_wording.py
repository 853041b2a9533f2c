"""The sentence for a GPU share on a hub that has no GPU at all."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.policy import CapacityPool, GPUShare, Refusal


def test_a_gpu_share_on_a_hub_without_gpus_says_so_plainly():
    with pytest.raises(Refusal) as refused:
        CapacityPool([]).allocate(
            "server:ana/",
            owner="ana",
            profile_id="ml101",
            course_id=None,
            share=GPUShare(fraction=Fraction(1, 4)),
        )
    assert refused.value.code == "no-such-gpu"
    assert refused.value.message.startswith("This profile needs a GPU, but this hub has no GPUs.")
