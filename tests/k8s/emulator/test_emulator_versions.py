"""The Kubernetes version the emulator plays: /version, and resource.k8s.io per release."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.k8s_emulator import EmulatedCluster

SERVED = {
    "1.32": ["v1beta1"],
    "1.33": ["v1beta2", "v1beta1"],
    "1.34": ["v1", "v1beta2", "v1beta1"],
}


@pytest.fixture(params=sorted(SERVED))
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmulatedCluster]:
    started = EmulatedCluster.start(tmp_path / "kubeconfig", kubernetes_version=request.param)
    try:
        yield started
    finally:
        started.stop()


async def call(cluster: EmulatedCluster, method: str, path: str, body: Any = None) -> Any:
    async with aiohttp.ClientSession() as session:
        async with session.request(method, f"{cluster.url}{path}", json=body) as response:
            return response.status, await response.json()


def played(cluster: EmulatedCluster) -> str:
    return f"1.{cluster.emulator.settings.kubernetes_minor}"


async def test_resource_k8s_io_is_served_in_the_versions_of_the_release(cluster):
    release = played(cluster)
    _, version = await call(cluster, "GET", "/version")
    assert (version["major"], version["minor"]) == ("1", release.split(".")[1])
    _, group = await call(cluster, "GET", "/apis/resource.k8s.io")
    assert [v["version"] for v in group["versions"]] == SERVED[release]
    assert group["preferredVersion"]["version"] == SERVED[release][0]
    for version_name in ("v1", "v1beta2", "v1beta1"):
        code, _ = await call(
            cluster,
            "GET",
            f"/apis/resource.k8s.io/{version_name}/namespaces/default/resourceclaims",
        )
        assert code == (200 if version_name in SERVED[release] else 404), version_name


def test_a_release_the_emulator_cannot_play_is_refused(tmp_path):
    with pytest.raises(ValueError, match="plays Kubernetes 1.32 to 1.34"):
        EmulatedCluster.start(tmp_path / "kubeconfig", kubernetes_version="1.29")
