"""The emulator's own scenarios: the cluster fixtures here are the API emulator's.

These check what tests/support/k8s_emulator does (its README lists what it does not check);
every product scenario runs on the real control plane instead (tests/k8s, tests/jobs_k8s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.k8s_emulator import EmulatedCluster


@pytest.fixture
def k8s_cluster(emulated_cluster: EmulatedCluster) -> EmulatedCluster:
    return emulated_cluster


@pytest.fixture
def k8s_controls(emulated_cluster: EmulatedCluster) -> EmulatedCluster:
    return emulated_cluster


@pytest.fixture
def hub_kubeconfig(emulated_cluster: EmulatedCluster) -> Path:
    return emulated_cluster.kubeconfig


@pytest.fixture
def job_service_kubeconfig(emulated_cluster: EmulatedCluster) -> Path:
    return emulated_cluster.kubeconfig
