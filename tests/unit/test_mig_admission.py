"""Scenarios: on a GPU split into MIG slices, admission books the slice the pod will get.

The MIG back end gives each share the smallest MIG slice that holds it (a 1/4 share on an
A100 80 GB is a ``2g.20gb``: 2 of the card's 7 compute slices), so the pool must count those
slices, not the share's fraction: otherwise it admits servers whose pods never schedule.
Elsewhere a slice goes to the GPU where it costs least.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import make_backend
from gpuspawner.backends.base import UnsupportedShare
from gpuspawner.core.allocation_record import devices_from_nodes
from gpuspawner.policy import Allocation, CapacityPool, GPUDevice, GPUShare, Refusal
from gpuspawner.policy.catalog_fields import GPUSpec
from gpuspawner.policy.mig_profiles import MIGProfile, find_mig_model

GIB = 1024
QUARTER = GPUShare(fraction=Fraction(1, 4))
EIGHTH = GPUShare(fraction=Fraction(1, 8))


def mig_a100(index: int = 0) -> GPUDevice:
    return GPUDevice(f"GPU-a100-{index}", index, "A100-SXM4-80GB", 80 * GIB, mig=True)


def start(pool: CapacityPool, name: str, share: GPUShare) -> Allocation:
    return pool.allocate(
        f"server:{name}/", owner=name, profile_id="lab", course_id=None, share=share
    )


def refused(pool: CapacityPool, name: str, share: GPUShare) -> Refusal:
    with pytest.raises(Refusal) as error:
        start(pool, name, share)
    return error.value


def test_four_quarter_shares_on_a_mig_a100_three_start_and_the_fourth_is_refused_clearly():
    # Given one A100 80 GB split into MIG slices
    pool = CapacityPool([mig_a100()])
    assert pool.how_many_fit(QUARTER) == 3

    # When four students start a 1/4 share
    first_three = [start(pool, name, QUARTER) for name in ("ana", "ben", "cai")]
    fourth = refused(pool, "dee", QUARTER)

    # Then three hold a 2g.20gb each (2 of 7 compute slices, 20 GB) and the fourth is told why
    assert [a.fraction for a in first_three] == [Fraction(2, 7)] * 3
    assert [a.memory_mib for a in first_three] == [20 * GIB] * 3
    assert fourth.code == "full"
    assert fourth.message == (
        "All GPUs are taken right now: 1 of 1 GPU is shared by 3 running servers and jobs, "
        "with no room for 1/4 of a GPU. Try again in a few minutes, or start a profile "
        "without a GPU."
    )
    # and the page shows no seat left, while the seventh slice still takes a 1g.10gb
    assert pool.how_many_fit(QUARTER) == 0
    assert start(pool, "eve", EIGHTH).fraction == Fraction(1, 7)


def test_four_quarter_shares_with_a_second_gpu_the_fourth_starts_on_that_gpu():
    # Given a MIG A100 and an unsplit RTX A5000
    a5000 = GPUDevice("GPU-a5000", 1, "RTX A5000", 24 * GIB)
    pool = CapacityPool([mig_a100(), a5000])

    # When four students start a 1/4 share
    placed = [start(pool, name, QUARTER).device_ids for name in ("ana", "ben", "cai", "dee")]

    # Then three fill the A100's slices (the A5000 stays whole while they fit) and the
    # fourth starts on the A5000 instead of being booked where its slice does not exist
    assert placed == [("GPU-a100-0",)] * 3 + [("GPU-a5000",)]


def test_a_whole_gpu_is_never_booked_on_a_mig_gpu_and_the_refusal_says_why():
    # Given a hub whose only A100 is split into MIG slices
    pool = CapacityPool([mig_a100()])

    # When a researcher asks for a whole A100
    refusal = refused(pool, "rita", GPUShare(count=1, models=("A100",)))

    # Then the refusal names the reason instead of booking a GPU the pod cannot get
    assert refusal.code == "too-large"
    assert refusal.message == (
        "This profile asks for 1 whole GPU, but this hub has only 0 that match (1 more is "
        "split into MIG slices, which cannot be given as a whole GPU). Please tell the hub "
        "admins."
    )
    assert pool.how_many_fit(GPUShare(count=1)) == 0


# -- the pool and the MIG back end agree --------------------------------------------------

MIG_GPUS = [
    GPUDevice("GPU-a", 0, "A100-SXM4-80GB", 80 * GIB, mig=True),
    GPUDevice("GPU-b", 1, "A100-PCIE-40GB", 40 * GIB, mig=True),
    GPUDevice("GPU-c", 2, "H100 80GB HBM3", 80 * GIB, mig=True),
    GPUDevice("GPU-d", 3, "H200", 141 * GIB, mig=True),
    GPUDevice("GPU-e", 4, "A30", 24 * GIB, mig=True),
]

# The ``gpu:`` shapes courses and job flavors write in the catalog.
CATALOG_SHAPES = [
    {"fraction": "1/8"},
    {"fraction": "1/4"},
    {"fraction": "1/2"},
    {"memory": "6GiB"},
    {"memory": "8GiB"},
    {"memory": "10GiB"},
    {"fraction": "1/4", "memory": "6GiB"},
    {"fraction": "1/3", "memory": "24GiB"},
    {"memory": "20GiB", "compute": {"min": 40, "max": 100}},
    {"fraction": "3/4"},
    {"memory": "90GiB"},
]


def catalog_shares() -> list[GPUShare]:
    """The shapes as the catalog reads them."""
    return [GPUSpec.model_validate(shape).to_share() for shape in CATALOG_SHAPES]


@pytest.mark.parametrize("device", MIG_GPUS, ids=lambda d: d.model)
def test_the_pool_books_the_slice_the_mig_back_end_renders_for_every_catalog_share(
    device: GPUDevice,
):
    backend = make_backend("mig", strategy="mixed")
    model = find_mig_model(device.model, device.memory_mib)
    shares = catalog_shares()
    given = refused_both = 0

    for number, share in enumerate(shares):
        # Given the slice the back end puts in the pod (or its refusal)
        try:
            plan = backend.render(
                share,
                gpu_model=f"NVIDIA {device.model}",
                gpu_memory_mib=device.memory_mib,
                name="x",
            )
        except UnsupportedShare:
            plan = None

        # When the pool admits the same share on that GPU, alone
        pool = CapacityPool([device])
        if plan is None:
            # Then a share the back end cannot give is refused by admission as well
            with pytest.raises(Refusal) as error:
                start(pool, f"u{number}", share)
            assert error.value.code == "too-large", share
            refused_both += 1
            continue
        allocation = start(pool, f"u{number}", share)

        # Then it books exactly that slice's compute slices and memory
        profile = MIGProfile.parse(plan.environment["GPUSPAWNER_GPU_MIG_PROFILE"])
        assert allocation.fraction == Fraction(profile.slices, model.compute_slices), share
        assert allocation.memory_mib == device.memory_mib * profile.memory_gb // model.memory_gb
        # and as many of them fit as the card has compute slices and memory for
        assert pool.how_many_fit(share) + 1 == min(
            model.compute_slices // profile.slices, model.memory_gb // profile.memory_gb
        )
        given += 1
    assert given + refused_both == len(shares) and given >= 8


def test_a_quarter_share_is_the_2g_20gb_on_an_a100_80gb_in_the_pool_and_in_the_pod():
    device = mig_a100()
    plan = make_backend("mig").render(
        QUARTER, gpu_model="NVIDIA A100-SXM4-80GB", gpu_memory_mib=device.memory_mib, name="x"
    )
    allocation = start(CapacityPool([device]), "ana", QUARTER)

    assert plan.resource_limits == {"nvidia.com/mig-2g.20gb": "1"}
    assert (allocation.fraction, allocation.memory_mib) == (Fraction(2, 7), 20 * GIB)


# -- placement by cost --------------------------------------------------------------------


def in_use(pool: CapacityPool, devices: list[GPUDevice]) -> None:
    """Give each device a small tenant, so none of them is empty."""
    for device in devices:
        pool.allocate(
            f"server:{device.id}-tenant/",
            owner=f"{device.id}-tenant",
            profile_id="lab",
            course_id=None,
            share=GPUShare(fraction=Fraction(1, 8), models=(device.model,)),
        )


def test_a_memory_only_share_goes_to_the_gpu_where_it_takes_the_least_of_the_card():
    # Given a 24 GiB card and an 80 GiB card, both already shared
    a5000 = GPUDevice("GPU-a5000", 0, "RTX A5000", 24 * GIB)
    h100 = GPUDevice("GPU-h100", 1, "H100 80GB HBM3", 80 * GIB)
    pool = CapacityPool([a5000, h100])
    in_use(pool, [a5000, h100])

    # When a 6 GiB share starts: 1/4 of the A5000's time, under 1/13 of the H100's
    allocation = start(pool, "ana", GPUShare(memory_mib=6 * GIB))

    # Then it goes to the H100, although the A5000 is fuller (plain best fit would pick it)
    assert allocation.device_ids == ("GPU-h100",)
    assert allocation.fraction == Fraction(8, 100)


def test_a_fraction_share_goes_to_the_gpu_where_it_takes_the_least_memory():
    # Given a 24 GiB card and an 80 GiB card, both already shared, the H100 fuller
    a5000 = GPUDevice("GPU-a5000", 0, "RTX A5000", 24 * GIB)
    h100 = GPUDevice("GPU-h100", 1, "H100 80GB HBM3", 80 * GIB)
    pool = CapacityPool([a5000, h100])
    in_use(pool, [a5000, h100])
    start(pool, "big", GPUShare(fraction=Fraction(1, 2), models=("H100",)))

    # When a 1/4 share starts: 6 GiB on the A5000, 20 GiB on the H100
    allocation = start(pool, "ana", QUARTER)

    # Then it goes to the A5000
    assert allocation.device_ids == ("GPU-a5000",)
    assert allocation.memory_mib == 6 * GIB


def test_a_slice_fills_a_mig_gpu_before_it_breaks_into_an_empty_gpu_a_whole_request_needs():
    # Given an empty H100 and an empty MIG A100
    h100 = GPUDevice("GPU-h100", 0, "H100 80GB HBM3", 80 * GIB)
    pool = CapacityPool([h100, mig_a100(1)])

    # When a 6 GiB share starts (cheaper on the H100, but the A100 can only give slices)
    allocation = start(pool, "ana", GPUShare(memory_mib=6 * GIB))

    # Then it takes a 1g.10gb on the A100, and a researcher still gets the whole H100
    assert allocation.device_ids == ("GPU-a100-1",)
    assert allocation.fraction == Fraction(1, 7)
    assert start(pool, "rita", GPUShare(count=1)).device_ids == ("GPU-h100",)


def test_placement_is_the_same_every_time():
    devices = [
        GPUDevice("GPU-a5000", 0, "RTX A5000", 24 * GIB),
        mig_a100(1),
        GPUDevice("GPU-h100", 2, "H100 80GB HBM3", 80 * GIB),
    ]
    shares = [QUARTER, GPUShare(memory_mib=6 * GIB), EIGHTH, GPUShare(memory_mib=10 * GIB)] * 3

    def place() -> list[tuple[str, ...]]:
        pool = CapacityPool(devices)
        return [start(pool, f"u{n}", share).device_ids for n, share in enumerate(shares)]

    assert place() == place()


# -- how a MIG GPU enters the pool on Kubernetes ------------------------------------------


def gpu_node(name: str, product: str, memory_mib: int, count: int, **extra: str) -> dict:
    labels = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/mig.capable": "true",
        **extra,
    }
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


def test_gpus_on_a_node_with_mig_slices_enter_the_pool_as_mig_gpus():
    # Given GPU Feature Discovery's labels: a node split into MIG slices (mixed strategy),
    # a node whose MIG Manager layout is all-disabled, and a single-strategy node, where each
    # slice is listed as a GPU of its own
    nodes = [
        gpu_node(
            "mixed", "NVIDIA-A100-SXM4-80GB", 81920, 1, **{"nvidia.com/mig-2g.20gb.count": "3"}
        ),
        gpu_node(
            "whole", "NVIDIA-A100-SXM4-80GB", 81920, 1, **{"nvidia.com/mig.config": "all-disabled"}
        ),
        gpu_node("single", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", 40960, 2),
    ]

    # When the pool is built from them
    pool = CapacityPool(devices_from_nodes(nodes))

    # Then only the mixed node's GPU books MIG slices: a 1/4 share there is a 2g.20gb
    assert [(d.id, d.mig) for d in pool.devices] == [
        ("mixed/0", True),
        ("single/0", False),
        ("single/1", False),
        ("whole/0", False),
    ]
    quarter = GPUShare(fraction=Fraction(1, 4), models=("A100",))
    assert pool.how_many_fit(quarter) == 3 + 4 + 4 + 4
    booked = start(pool, "ana", GPUShare(fraction=Fraction(1, 4), models=("A100",)))
    assert booked.device_ids == ("mixed/0",) and booked.fraction == Fraction(2, 7)
