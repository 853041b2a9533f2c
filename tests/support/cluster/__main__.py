"""Run the test cluster standalone: ``python -m tests.support.cluster --kubeconfig FILE``.

Starts the real control plane (etcd, kube-apiserver, kube-controller-manager and
kube-scheduler built by ``make k8s-tools``) on loopback with this project's node agent,
writes an admin kubeconfig, prints the API's URL and serves until interrupted. The hub's
and the job service's kubeconfigs are written beside the admin's (``<FILE>.hub``,
``<FILE>.job-service``).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from ..k8s_emulator.nodes import node
from .session import ControlPlaneCluster


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cluster", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="write the admin's here")
    parser.add_argument(
        "--folder", type=Path, help="keep the cluster's files here (default: a temporary folder)"
    )
    parser.add_argument("--gpu-nodes", type=int, default=2, help="register this many GPU nodes")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--gpu-product", default="NVIDIA-A100-SXM4-80GB")
    parser.add_argument("--gpu-memory-mib", type=int, default=81920)
    parser.add_argument(
        "--cpu-nodes", type=int, default=0, help="register this many nodes without GPUs"
    )
    parser.add_argument(
        "--no-serve-ports",
        dest="serve_ports",
        action="store_false",
        help="do not answer HTTP on simulated containers' ports at their pod IPs",
    )
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="campus-test-cluster-"))
    cluster = ControlPlaneCluster.start(folder)
    try:
        if args.gpu_nodes:
            cluster.add_gpu_nodes(
                args.gpu_nodes,
                product=args.gpu_product,
                gpu_count=args.gpus_per_node,
                gpu_memory_mib=args.gpu_memory_mib,
            )
        for i in range(args.cpu_nodes):
            cluster.add_node(node(f"cpu-node-{i}"))
        cluster.serve_ports(args.serve_ports)
        shutil.copyfile(cluster.kubeconfig, args.kubeconfig)
        for key, identity in cluster.identities.items():
            shutil.copyfile(identity.kubeconfig, f"{args.kubeconfig}.{key}")
        print(f"Kubernetes control plane listening on {cluster.url}", flush=True)
        stopped = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopped.set())
        stopped.wait()
    finally:
        cluster.stop()
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
