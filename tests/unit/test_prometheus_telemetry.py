"""Scenarios: on Kubernetes each slice's GPU use comes from the exporters' per-pod series in
Prometheus (HAMi per container for fractions, DCGM per GPU or MIG slice), joined to the
hub's slices by pod; a time-shared GPU's numbers are said to be the GPU's."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from gpuspawner.holder_use import HolderUse, use_by_holder
from gpuspawner.policy import CapacityPool, GPUDevice
from gpuspawner.prometheus_telemetry import (
    ALLOCATION_INFO,
    SERIES,
    PrometheusTelemetry,
    readings_from_series,
)

from ..support.prometheus_api import prometheus_api

NS = "jhub"


def sample(**labels: str | float) -> dict:
    value = labels.pop("value")
    return {"metric": {k: str(v) for k, v in labels.items()}, "value": [1760000000.0, str(value)]}


def slice_info(user: str, kind: str, name: str, pod: str) -> dict:
    """The hub's gpuspawner_allocation_info for the slice ``pod`` holds."""
    return sample(
        __name__="gpuspawner_allocation_info",
        gpu="node-a GPU 0: A100",
        user=user,
        course="ml101",
        profile="ml101",
        kind=kind,
        name=name,
        fraction="1/4",
        namespace=NS,
        pod=pod,
        value=1,
    )


HUB_SLICES = [
    slice_info("ana", "server", "", "jupyter-ana"),
    slice_info("ben", "server", "", "jupyter-ben"),
    slice_info("cy", "job", "7f3c", "job-7f3c-x2"),
]


def uses(series: dict) -> dict[str, HolderUse]:
    """What the join says each holder uses (the cluster pool names GPUs otherwise)."""
    pool = CapacityPool([GPUDevice("node-a/0", 0, "A100", 40960)])
    return use_by_holder(readings_from_series(series), pool)


def test_hami_gives_each_container_on_a_shared_card_its_own_numbers():
    # Given ana busy and ben idle on one HAMi-shared card (current metric names), and a
    # pod that is no slice of the hub's on the same card
    card = {"device_uuid": "GPU-aaa", "vdevice_index": "0"}
    series = {
        "gpuspawner_allocation_info": HUB_SLICES,
        "hami_container_device_utilization_ratio": [
            sample(namespace=NS, pod="jupyter-ana", container="notebook", **card, value=73),
            sample(namespace=NS, pod="jupyter-ben", container="notebook", **card, value=0),
            sample(namespace="other", pod="someone", container="x", **card, value=99),
        ],
        "hami_vgpu_memory_used_bytes": [
            sample(namespace=NS, pod="jupyter-ana", container="notebook", **card, value=3 * 2**30),
            sample(namespace=NS, pod="jupyter-ben", container="notebook", **card, value=2**30),
        ],
    }

    # Then each holder has its own numbers, measured for it
    assert uses(series) == {
        "server:ana/": HolderUse("server:ana/", 73.0, 3072),
        "server:ben/": HolderUse("server:ben/", 0.0, 1024),
    }


def test_hamis_older_metric_names_and_labels_are_read_too():
    card = {"deviceuuid": "GPU-aaa", "vdeviceid": "0"}
    series = {
        "gpuspawner_allocation_info": HUB_SLICES,
        "Device_utilization_desc_of_container": [
            sample(podnamespace=NS, podname="job-7f3c-x2", ctrname="runner", **card, value=40),
        ],
        "vGPU_device_memory_usage_in_bytes": [
            sample(podnamespace=NS, podname="job-7f3c-x2", ctrname="runner", **card, value=2**31),
        ],
    }
    assert uses(series) == {"job:7f3c": HolderUse("job:7f3c", 40.0, 2048)}


def test_a_whole_gpu_or_a_mig_slice_is_its_one_pods():
    # Given ana on a whole GPU and cy's job on a MIG slice of another (DCGM with pods)
    whole = {"Hostname": "node-a", "UUID": "GPU-aaa", "gpu": "0"}
    mig = {"Hostname": "node-a", "UUID": "GPU-bbb", "gpu": "1", "GPU_I_ID": "3"}
    series = {
        "gpuspawner_allocation_info": HUB_SLICES,
        "DCGM_FI_DEV_GPU_UTIL": [
            sample(namespace=NS, pod="jupyter-ana", **whole, value=12),
            # Not measured per MIG slice: the slice's engine activity is its number
            sample(namespace=NS, pod="job-7f3c-x2", **mig, value=0),
        ],
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [
            sample(namespace=NS, pod="jupyter-ana", **whole, value=0.5),
            sample(namespace=NS, pod="job-7f3c-x2", **mig, value=0.61),
        ],
        "DCGM_FI_DEV_FB_USED": [
            sample(namespace=NS, pod="jupyter-ana", **whole, value=4000),
            sample(namespace=NS, pod="job-7f3c-x2", **mig, value=9000),
        ],
    }

    # Then the whole GPU's utilisation is ana's, the MIG slice's activity cy's job's
    assert uses(series) == {
        "job:7f3c": HolderUse("job:7f3c", 61.0, 9000),
        "server:ana/": HolderUse("server:ana/", 12.0, 4000),
    }


def test_a_gpu_time_shared_by_pods_gives_the_gpus_numbers_and_says_so():
    # Given ana's and ben's pods on one time-sliced GPU: DCGM gives both the GPU's numbers
    shared = {"Hostname": "node-a", "UUID": "GPU-aaa", "gpu": "0"}
    series = {
        "gpuspawner_allocation_info": HUB_SLICES,
        "DCGM_FI_DEV_GPU_UTIL": [
            sample(namespace=NS, pod="jupyter-ana", **shared, value=80),
            sample(namespace=NS, pod="jupyter-ben", **shared, value=80),
        ],
    }

    found = uses(series)

    why = "the DCGM exporter gives each of the 2 pods on this time-shared GPU the GPU's numbers"
    assert found == {
        "server:ana/": HolderUse("server:ana/", 80.0, None, why),
        "server:ben/": HolderUse("server:ben/", 80.0, None, why),
    }
    assert {use.measured for use in found.values()} == {"device"}


def test_hami_wins_over_dcgm_for_a_pod_that_has_both():
    series = {
        "gpuspawner_allocation_info": HUB_SLICES,
        "hami_container_device_utilization_ratio": [
            sample(namespace=NS, pod="jupyter-ben", container="nb", device_uuid="GPU-aaa", value=0),
        ],
        "DCGM_FI_DEV_GPU_UTIL": [
            sample(namespace=NS, pod="jupyter-ben", Hostname="node-a", UUID="GPU-aaa", value=95),
        ],
    }
    assert uses(series)["server:ben/"].utilization_pct == 0.0


def test_memory_without_utilisation_leaves_the_utilisation_unknown():
    series = {
        "gpuspawner_allocation_info": HUB_SLICES,
        "DCGM_FI_DEV_FB_USED": [
            sample(namespace=NS, pod="jupyter-ana", Hostname="node-a", UUID="GPU-aaa", value=500),
        ],
    }
    assert uses(series) == {"server:ana/": HolderUse("server:ana/", None, 500)}


# -- the HTTP API ------------------------------------------------------------------------


@pytest.fixture
def prometheus() -> Iterator[tuple[str, dict]]:
    """The query API's stand-in (tests/support/prometheus_api.py) and its answers."""
    answers: dict = {}
    with prometheus_api(answers) as url:
        yield url, answers


def test_readings_are_read_through_prometheus_http_api(prometheus):
    url, answers = prometheus
    answers.update({name: [] for name in (*SERIES, ALLOCATION_INFO)})
    answers[ALLOCATION_INFO] = HUB_SLICES
    answers["hami_container_device_utilization_ratio"] = [
        sample(namespace=NS, pod="jupyter-ana", container="nb", device_uuid="GPU-aaa", value=5)
    ]

    [reading] = PrometheusTelemetry(url).read()

    assert [(p.holder, p.utilization_pct) for p in reading.processes or ()] == [
        ("server:ana/", 5.0)
    ]


def test_a_prometheus_that_cannot_answer_gives_no_readings_and_says_so_once(prometheus, caplog):
    url, _ = prometheus  # answers nothing: every query is refused
    telemetry = PrometheusTelemetry(url)
    with caplog.at_level(logging.ERROR, logger="gpuspawner.prometheus_telemetry"):
        assert telemetry.read() == []
        assert telemetry.read() == []
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 1
    assert "no server is reclaimed for idleness until it answers" in told[0]

    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="gpuspawner.prometheus_telemetry"):
        assert PrometheusTelemetry("http://127.0.0.1:9/").read() == []
    assert "Cannot read GPU use per pod from Prometheus" in caplog.text


def test_a_time_shared_gpu_is_said_once_to_be_counted_device_wide(prometheus, caplog):
    url, answers = prometheus
    answers.update({name: [] for name in (*SERIES, ALLOCATION_INFO)})
    answers[ALLOCATION_INFO] = HUB_SLICES
    shared = {"Hostname": "node-a", "UUID": "GPU-aaa", "gpu": "0"}
    answers["DCGM_FI_DEV_GPU_UTIL"] = [
        sample(namespace=NS, pod="jupyter-ana", **shared, value=80),
        sample(namespace=NS, pod="jupyter-ben", **shared, value=80),
    ]
    telemetry = PrometheusTelemetry(url)
    with caplog.at_level(logging.WARNING, logger="gpuspawner.prometheus_telemetry"):
        telemetry.read()
        telemetry.read()
    told = [r.getMessage() for r in caplog.records]
    assert told == [
        "GPU use on node-a/GPU-aaa is counted device-wide, not per server or job: the DCGM "
        "exporter gives each of the 2 pods on this time-shared GPU the GPU's numbers."
    ]
