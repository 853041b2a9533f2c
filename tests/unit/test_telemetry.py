"""Scenarios: GPU readings come from NVML or a simulated file, and are joined to who holds
each slice (the servers and jobs of the capacity pool)."""

from __future__ import annotations

import json
import logging
from fractions import Fraction
from types import SimpleNamespace

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.telemetry import (
    DeviceReading,
    Holder,
    NVMLTelemetry,
    ProcessReading,
    SimulatedTelemetry,
    holders_of,
    process_readings,
    telemetry_from_config,
    write_readings,
)
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare

GIB = 1024
QUARTER = GPUShare(fraction=Fraction(1, 4))
WHOLE = GPUShare(count=1)


def reading(uuid: str, index: int, *, util: float = 0.0, temp: float = 40.0) -> DeviceReading:
    return DeviceReading(uuid, index, util, 1024, 24 * GIB, temp)


def two_gpu_pool() -> CapacityPool:
    return CapacityPool(
        [GPUDevice("sim-0", 0, "RTX 4090", 24 * GIB), GPUDevice("sim-1", 1, "RTX 4090", 24 * GIB)]
    )


def test_a_simulated_file_gives_the_readings_a_demo_wrote(tmp_path):
    # Given a readings file written by a demo
    path = tmp_path / "readings.json"
    write_readings(path, [reading("sim-0", 0, util=35.5, temp=71.0), reading("sim-1", 1)])

    # When the telemetry configured with that path is read
    readings = telemetry_from_config(str(path)).read()

    # Then each GPU's utilisation and temperature are what the file says
    assert [(r.uuid, r.utilization_pct, r.temperature_c) for r in readings] == [
        ("sim-0", 35.5, 71.0),
        ("sim-1", 0.0, 40.0),
    ]
    assert readings[0].memory_total_mib == 24 * GIB


def test_a_missing_file_gives_no_readings_and_no_error(tmp_path, caplog):
    telemetry = SimulatedTelemetry(tmp_path / "not-yet.json")
    with caplog.at_level(logging.ERROR):
        assert telemetry.read() == []
    assert not caplog.records


def test_a_malformed_file_is_reported_once_and_gives_no_readings(tmp_path, caplog):
    # Given a file with a device missing its temperature
    path = tmp_path / "readings.json"
    path.write_text(json.dumps({"devices": [{"uuid": "sim-0", "index": 0}]}))
    telemetry = SimulatedTelemetry(path)

    # When it is read twice
    with caplog.at_level(logging.ERROR, logger="gpuspawner.core.telemetry"):
        assert telemetry.read() == []
        assert telemetry.read() == []

    # Then the admin is told once what is wrong and how the file should look
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert str(path) in errors[0] and "utilization_pct" in errors[0]

    # And once fixed, readings come back
    write_readings(path, [reading("sim-0", 0, util=90)])
    assert [r.utilization_pct for r in telemetry.read()] == [90]


def test_text_that_is_not_json_is_reported_not_raised(tmp_path, caplog):
    path = tmp_path / "readings.json"
    path.write_text("{devices: oops")
    with caplog.at_level(logging.ERROR, logger="gpuspawner.core.telemetry"):
        assert SimulatedTelemetry(path).read() == []
    assert "is not valid" in caplog.text


def test_without_an_nvidia_driver_nvml_gives_no_readings():
    # This machine has no NVIDIA driver (and a GPU machine would give real readings)
    readings = NVMLTelemetry().read()
    assert all(r.memory_total_mib > 0 for r in readings)
    assert telemetry_from_config(None).__class__ is NVMLTelemetry


def test_each_device_is_joined_to_the_servers_and_jobs_that_hold_its_slices():
    # Given two quarter servers and a whole-GPU job
    pool = two_gpu_pool()
    pool.allocate("server:ana/", owner="ana", profile_id="ml101", course_id="ml101", share=QUARTER)
    pool.allocate(
        "server:ben/lab", owner="ben", profile_id="ml101", course_id="ml101", share=QUARTER
    )
    pool.allocate("job:42", owner="cy", profile_id="a100-batch", course_id=None, share=WHOLE)

    # When the readings are joined to the pool
    holders = holders_of([reading("sim-0", 0), reading("sim-1", 1)], pool)

    # Then the first GPU has both students' servers, the second the job
    assert holders["sim-0"] == [
        Holder("server:ana/", "ana", "ml101", "ml101", "server", "", Fraction(1, 4)),
        Holder("server:ben/lab", "ben", "ml101", "ml101", "server", "lab", Fraction(1, 4)),
    ]
    assert holders["sim-1"] == [
        Holder("job:42", "cy", None, "a100-batch", "job", "42", Fraction(1))
    ]


def test_a_gpu_nobody_holds_has_no_holders_and_unknown_ids_match_by_index():
    pool = two_gpu_pool()
    pool.allocate("server:ana/", owner="ana", profile_id="p", course_id=None, share=WHOLE)
    # Readings that number the GPUs but call them something else (NVML-style UUIDs)
    holders = holders_of([reading("GPU-aaaa", 0), reading("GPU-bbbb", 1)], pool)
    assert [h.user for h in holders["GPU-aaaa"]] == ["ana"]
    assert holders["GPU-bbbb"] == []


def test_allocations_alone_are_joined_by_device_id():
    pool = two_gpu_pool()
    allocation = pool.allocate("job:7", owner="dee", profile_id="f", course_id=None, share=QUARTER)
    holders = holders_of([reading("sim-0", 0), reading("other", 1)], [allocation])
    assert [h.name for h in holders["sim-0"]] == ["7"]
    assert holders["other"] == []


def test_the_admission_reads_the_file_its_telemetry_path_names(tmp_path):
    path = tmp_path / "r.json"
    write_readings(path, [reading("sim-0", 0, temp=80)])
    admission = GPUAdmission(telemetry_path=str(path))
    assert [r.temperature_c for r in admission.device_telemetry().read()] == [80]
    admission.telemetry_path = ""
    assert isinstance(admission.device_telemetry(), NVMLTelemetry)


# -- per-process readings ----------------------------------------------------------------


def test_a_simulated_file_carries_each_gpus_processes(tmp_path):
    # Given a demo's readings: a process by pid, and one by the holder it stands for
    path = tmp_path / "readings.json"
    processes = (
        ProcessReading(4242, 35.0, 1200),
        ProcessReading(None, 0.0, 900, holder="server:ana/"),
    )
    write_readings(path, [DeviceReading("sim-0", 0, 35.0, 2100, 24 * GIB, 50.0, processes)])

    # Then they read back as written; a GPU without "processes" has no per-process readings
    [read] = SimulatedTelemetry(path).read()
    assert read.processes == processes
    write_readings(path, [reading("sim-0", 0)])
    assert SimulatedTelemetry(path).read()[0].processes is None


def test_a_process_must_name_a_pid_or_a_holder(tmp_path, caplog):
    path = tmp_path / "readings.json"
    device = {
        "uuid": "sim-0",
        "index": 0,
        "utilization_pct": 1,
        "memory_used_mib": 1,
        "memory_total_mib": 24576,
        "temperature_c": 40,
    }
    path.write_text(json.dumps({"devices": [{**device, "processes": [{"utilization_pct": 5}]}]}))
    with caplog.at_level(logging.ERROR, logger="gpuspawner.core.telemetry"):
        assert SimulatedTelemetry(path).read() == []
    assert (
        'device #1, process #1 must be an object with either a "pid" or a "holder"' in caplog.text
    )


def nvml_process(pid: int, used: int | None) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, usedGpuMemory=used)


def nvml_sample(pid: int, stamp: int, sm: int) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, timeStamp=stamp, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)


def test_each_process_gets_its_highest_sample_since_the_last_reading():
    # Given NVML's running processes on a GPU and its utilisation samples
    running = [nvml_process(20, 3 * 2**30), nvml_process(10, 2**30), nvml_process(30, None)]
    samples = [nvml_sample(10, 1_000, 30), nvml_sample(10, 2_000, 60), nvml_sample(99, 3_000, 5)]
    last: dict[str, int] = {}

    # When they are joined
    processes = process_readings(running, samples, last, "GPU-1")

    # Then each process has its highest sample (0 without one), its memory in MiB (None
    # where the driver does not say); a sample of a process no longer running is dropped;
    assert processes == (
        ProcessReading(10, 60.0, 1024),
        ProcessReading(20, 0.0, 3072),
        ProcessReading(30, 0.0, None),
    )
    # and the next reading asks only for samples newer than the newest one seen.
    assert last == {"GPU-1": 3_000}


class FakeNVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(*, processes=None, samples=None) -> SimpleNamespace:
    """NVML's per-process calls answering with ``processes``/``samples``, or raising the
    error code given instead."""

    def answer(value):
        def call(*args):
            if isinstance(value, int):
                raise FakeNVMLError(value)
            return value

        return call

    return SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVML_SUCCESS=0,
        NVML_ERROR_NOT_SUPPORTED=3,
        NVML_ERROR_NOT_FOUND=6,
        nvmlDeviceGetComputeRunningProcesses=answer(processes),
        nvmlDeviceGetProcessUtilization=answer(samples),
    )


def test_nvml_without_new_samples_reads_every_process_as_idle():
    # NVML answers NOT_FOUND when no process ran a kernel since the last timestamp
    nvml = fake_pynvml(processes=[nvml_process(10, 2**30)], samples=6)
    processes, because = NVMLTelemetry()._processes(nvml, "handle", "GPU-1")
    assert processes == (ProcessReading(10, 0.0, 1024),) and because is None


def test_a_gpu_without_per_process_utilisation_says_why():
    nvml = fake_pynvml(processes=[nvml_process(10, 2**30)], samples=3)
    processes, because = NVMLTelemetry()._processes(nvml, "handle", "GPU-1")
    assert processes is None
    assert because == "NVML gives no per-process utilisation on this GPU (NVML error 3)"

    nvml = fake_pynvml(processes=3, samples=[])
    processes, because = NVMLTelemetry()._processes(nvml, "handle", "GPU-1")
    assert processes is None
    assert because == "NVML does not list the processes on this GPU (NVML error 3)"
