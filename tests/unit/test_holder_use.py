"""Scenarios: each server's and job's use of its GPU, from readings attributed to holders,
and the device's numbers, marked device-wide with the reason, where it cannot be told."""

from __future__ import annotations

from fractions import Fraction

from gpuspawner.core.telemetry import DeviceReading, ProcessReading
from gpuspawner.holder_use import HolderUse, use_by_holder, use_of_servers
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare

QUARTER = GPUShare(fraction=Fraction(1, 4))
H200 = 143771


def card_of_four() -> CapacityPool:
    """ana, ben, cy and dee at 1/4 of GPU 0; GPU 1 free."""
    pool = CapacityPool([GPUDevice("GPU-0", 0, "H200", H200), GPUDevice("GPU-1", 1, "H200", H200)])
    for name in ("ana", "ben", "cy", "dee"):
        pool.allocate(
            f"server:{name}/", owner=name, profile_id="ml101", course_id="ml101", share=QUARTER
        )
    return pool


def card(processes: tuple[ProcessReading, ...] | None, *, util: float = 90.0, because=None):
    return DeviceReading("GPU-0", 0, util, 9000, H200, 50.0, processes, because)


def test_on_a_card_of_four_each_holder_has_its_own_numbers():
    # Given ben's kernel busy and ana's and cy's idle with memory held; dee never started one
    processes = (
        ProcessReading(11, 0.0, 2048, holder="server:ana/"),
        ProcessReading(12, 90.0, 4096, holder="server:ben/"),
        ProcessReading(13, 0.0, 1024, holder="server:cy/"),
    )

    uses = use_by_holder([card(processes)], card_of_four())

    assert uses == {
        "server:ana/": HolderUse("server:ana/", 0.0, 2048),
        "server:ben/": HolderUse("server:ben/", 90.0, 4096),
        "server:cy/": HolderUse("server:cy/", 0.0, 1024),
        "server:dee/": HolderUse("server:dee/", 0.0, 0),
    }
    assert {use.measured for use in uses.values()} == {"holder"}
    assert use_of_servers(uses) == {
        "server:ana/": 0.0,
        "server:ben/": 90.0,
        "server:cy/": 0.0,
        "server:dee/": 0.0,
    }


def test_a_holders_processes_add_up():
    processes = (
        ProcessReading(11, 30.0, 1000, holder="server:ana/"),
        ProcessReading(12, 25.0, 500, holder="server:ana/"),
    )
    assert use_by_holder([card(processes)], card_of_four())["server:ana/"] == HolderUse(
        "server:ana/", 55.0, 1500
    )


def test_a_process_nobody_can_be_matched_to_makes_the_whole_card_device_wide():
    # Given a process on the card that could not be attributed (another PID namespace)
    why = "process 4242, which NVML reports on this GPU, is not visible here"
    processes = (
        ProcessReading(11, 0.0, 2048, holder="server:ana/"),
        ProcessReading(4242, 90.0, 4096, unattributed=why),
    )

    uses = use_by_holder([card(processes)], card_of_four())

    # Then every holder of the card gets the card's numbers, saying why
    assert set(uses) == {"server:ana/", "server:ben/", "server:cy/", "server:dee/"}
    assert all(use == HolderUse(use.key, 90.0, 9000, why) for use in uses.values())
    assert {use.measured for use in uses.values()} == {"device"}


def test_without_per_process_readings_the_device_stands_in_with_nvmls_reason():
    because = "NVML gives no per-process utilisation on this GPU (Not Supported)"
    uses = use_by_holder([card(None, because=because)], card_of_four())
    assert uses["server:ana/"] == HolderUse("server:ana/", 90.0, 9000, because)

    uses = use_by_holder([card(None)], card_of_four())
    assert uses["server:ana/"].device_wide == "there are no per-process readings for this GPU"


def test_a_process_of_a_holder_of_another_gpu_is_not_counted_here():
    processes = (ProcessReading(11, 80.0, 2048, holder="job:7"),)
    uses = use_by_holder([card(processes)], card_of_four())
    assert uses["server:ana/"].device_wide == (
        "process 11 belongs to job:7, which holds no slice of this GPU"
    )


def test_a_holder_of_two_gpus_is_as_busy_as_the_busier_and_holds_both_memories():
    pool = CapacityPool([GPUDevice("GPU-0", 0, "H200", H200), GPUDevice("GPU-1", 1, "H200", H200)])
    pool.allocate("job:9", owner="eve", profile_id="two", course_id=None, share=GPUShare(count=2))
    readings = [
        DeviceReading(
            "GPU-0", 0, 70.0, 5000, H200, 50.0, (ProcessReading(5, 70.0, 5000, holder="job:9"),)
        ),
        DeviceReading(
            "GPU-1", 1, 10.0, 3000, H200, 50.0, (ProcessReading(5, 10.0, 3000, holder="job:9"),)
        ),
    ]
    assert use_by_holder(readings, pool) == {"job:9": HolderUse("job:9", 70.0, 8000)}


def test_a_gpu_without_a_reading_says_nothing_of_its_holders():
    assert use_by_holder([], card_of_four()) == {}


def test_a_pods_series_counts_for_its_holder_and_a_shared_series_says_it_is_the_gpus():
    # Given exporter readings (Kubernetes): devices the pool names otherwise, whose
    # series name their holders; one GPU time-shared by two pods gives each the GPU's number
    pool = CapacityPool([GPUDevice("node-a/0", 0, "A100", 40960)])
    shared = "the DCGM exporter gives every pod of this time-shared GPU the GPU's numbers"
    readings = [
        DeviceReading(
            "GPU-aaa",
            7,
            40.0,
            6000,
            40960,
            0.0,
            (
                ProcessReading(None, 40.0, 6000, holder="server:ana/", device_wide=shared),
                ProcessReading(None, 40.0, 6000, holder="job:3", device_wide=shared),
            ),
        ),
        DeviceReading(
            "GPU-bbb",
            8,
            12.0,
            900,
            40960,
            0.0,
            (ProcessReading(None, 12.0, 900, holder="server:ben/"),),
        ),
    ]

    uses = use_by_holder(readings, pool)

    assert uses == {
        "job:3": HolderUse("job:3", 40.0, 6000, shared),
        "server:ana/": HolderUse("server:ana/", 40.0, 6000, shared),
        "server:ben/": HolderUse("server:ben/", 12.0, 900),
    }
