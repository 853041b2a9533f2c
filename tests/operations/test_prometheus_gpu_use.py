"""Scenario: the course-sessions service reads each slice's GPU use on Kubernetes from a
real Prometheus that scrapes the exporters (HAMi's monitor and the DCGM exporter, as their
/metrics pages read) and the hub's allocation info, with honor_labels as
hub_config/monitoring/prometheus.yml scrapes them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuspawner.holder_use import HolderUse, use_by_holder
from gpuspawner.prometheus_telemetry import PrometheusTelemetry

from ..support.prometheus import MISSING_REASON, PROMETHEUS, RunningPrometheus

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON)

# What the exporters' and the hub's /metrics pages say: ana busy and ben idle on a HAMi-shared
# card (HAMi's current names), cy's job alone on a MIG slice, dee and eve time-sharing a GPU
# (DCGM), and a pod of another namespace that holds no slice of the hub's.
EXPORTED = """\
# TYPE hami_container_device_utilization_ratio gauge
hami_container_device_utilization_ratio{namespace="jhub",pod="jupyter-ana",container="notebook",vdevice_index="0",device_uuid="GPU-aaa"} 64
hami_container_device_utilization_ratio{namespace="jhub",pod="jupyter-ben",container="notebook",vdevice_index="0",device_uuid="GPU-aaa"} 0
hami_container_device_utilization_ratio{namespace="other",pod="render",container="x",vdevice_index="0",device_uuid="GPU-aaa"} 99
# TYPE hami_vgpu_memory_used_bytes gauge
hami_vgpu_memory_used_bytes{namespace="jhub",pod="jupyter-ana",container="notebook",vdevice_index="0",device_uuid="GPU-aaa"} 4294967296
hami_vgpu_memory_used_bytes{namespace="jhub",pod="jupyter-ben",container="notebook",vdevice_index="0",device_uuid="GPU-aaa"} 1073741824
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",UUID="GPU-bbb",Hostname="node-a",GPU_I_ID="2",GPU_I_PROFILE="1g.10gb",namespace="jhub",pod="job-7f3c-x2",container="runner"} 0.25
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bbb",Hostname="node-a",GPU_I_ID="2",GPU_I_PROFILE="1g.10gb",namespace="jhub",pod="job-7f3c-x2",container="runner"} 3000
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-ccc",Hostname="node-b",namespace="jhub",pod="jupyter-dee",container="notebook"} 90
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-ccc",Hostname="node-b",namespace="jhub",pod="jupyter-eve",container="notebook"} 90
# TYPE gpuspawner_allocation_info gauge
gpuspawner_allocation_info{gpu="node-a GPU 0: A100",user="ana",course="ml101",profile="ml101",kind="server",name="",fraction="1/4",namespace="jhub",pod="jupyter-ana"} 1
gpuspawner_allocation_info{gpu="node-a GPU 0: A100",user="ben",course="ml101",profile="ml101",kind="server",name="",fraction="1/4",namespace="jhub",pod="jupyter-ben"} 1
gpuspawner_allocation_info{gpu="node-a GPU 1: A100",user="cy",course="",profile="batch",kind="job",name="7f3c",fraction="1/7",namespace="jhub",pod="job-7f3c-x2"} 1
gpuspawner_allocation_info{gpu="node-b GPU 0: A100",user="dee",course="ml101",profile="ml101",kind="server",name="",fraction="1/2",namespace="jhub",pod="jupyter-dee"} 1
gpuspawner_allocation_info{gpu="node-b GPU 0: A100",user="eve",course="ml101",profile="ml101",kind="server",name="lab",fraction="1/2",namespace="jhub",pod="jupyter-eve"} 1
"""


@pytest.fixture
def exporters() -> Iterator[str]:
    """The exporters' and the hub's metrics, served as one /metrics page."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = EXPORTED.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_service_reads_each_slices_gpu_use_from_prometheus(tmp_path, exporters):
    # Given Prometheus scraping the exporters with their workload labels kept
    scrape = {
        "job_name": "gpu-exporters",
        "scrape_interval": "1s",
        "honor_labels": True,
        "static_configs": [{"targets": [exporters]}],
    }
    prometheus = RunningPrometheus(tmp_path / "prometheus", [scrape])
    try:
        prometheus.wait_for("gpuspawner_allocation_info", lambda result: len(result) == 5)

        # When the service reads the readings and joins them to the slices
        readings = PrometheusTelemetry(prometheus.url).read()
    finally:
        prometheus.stop()
    uses = use_by_holder(readings, [])

    # Then the shared card's holders each have their own use, the MIG slice's job its
    # slice's activity, and the time-shared GPU's two servers its numbers, said so
    shared = "the DCGM exporter gives each of the 2 pods on this time-shared GPU the GPU's numbers"
    assert uses == {
        "job:7f3c": HolderUse("job:7f3c", 25.0, 3000),
        "server:ana/": HolderUse("server:ana/", 64.0, 4096),
        "server:ben/": HolderUse("server:ben/", 0.0, 1024),
        "server:dee/": HolderUse("server:dee/", 90.0, None, shared),
        "server:eve/lab": HolderUse("server:eve/lab", 90.0, None, shared),
    }
