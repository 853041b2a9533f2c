"""A Kubernetes API emulator for tests: real HTTP, the kubernetes_asyncio client's view.

Test infrastructure, never product code. See tests/support/k8s_emulator/README.md for what is emulated.

    cluster = EmulatedCluster.start(tmp_path / "kubeconfig")
    cluster.add_gpu_nodes(2, product="NVIDIA-A100-SXM4-80GB", gpu_count=4)
    ...  # point kubernetes_asyncio / KubeSpawner at cluster.kubeconfig
    cluster.stop()
"""

from .cluster import EmulatedCluster, EmulatorThread, KubernetesEmulator, kubeconfig_for
from .containers import ContainerScript, PodMatch, ProcessRunner
from .kubelet import KubeletTimings
from .nodes import gpu_node, node

__all__ = [
    "ContainerScript",
    "EmulatedCluster",
    "EmulatorThread",
    "KubeletTimings",
    "KubernetesEmulator",
    "PodMatch",
    "ProcessRunner",
    "gpu_node",
    "kubeconfig_for",
    "node",
]
