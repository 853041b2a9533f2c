"""Run the test cluster standalone: ``python -m tests.support.cluster --kubeconfig FILE``.

Starts the real control plane (etcd, kube-apiserver, kube-controller-manager and
kube-scheduler built by ``make k8s-tools``) on loopback with this project's node agent,
writes an admin kubeconfig, prints the API's URL and serves until interrupted. The hub's
and the job service's kubeconfigs are written beside the admin's (``<FILE>.hub``,
``<FILE>.job-service``).

With ``--deploy-chart`` (root only: the node gives each pod a network and mount namespace),
a fresh cluster gets the whole hub installed with helm as chart_deployment.py does, and
``http://127.0.0.1:PORT`` is relayed to its proxy-public Service; the browser tests'
``chart`` project (tests/ui/playwright.chart.config.js) starts it so. ``--catalog FILE``
replaces the people's catalog (chart_deployment.people_catalog: ana and ben in the course
ml101, open now; rhea in the research group vision-lab).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from ..k8s_emulator.nodes import node
from .chart_deployment import PortForward, deploy, people_catalog
from .session import ControlPlaneCluster


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cluster", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, help="write the admin's here")
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
    chart = parser.add_argument_group("the whole hub, installed with helm")
    chart.add_argument(
        "--deploy-chart",
        action="store_true",
        help="install the hub on the cluster and serve it on 127.0.0.1:PORT (root only)",
    )
    chart.add_argument("--port", type=int, default=8650, help="the hub's local port (0: any)")
    chart.add_argument(
        "--catalog", type=Path, help="the course catalog (default: the people's catalog)"
    )
    chart.add_argument("--backend", choices=("time-slicing", "whole"), default="time-slicing")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not args.deploy_chart and args.kubeconfig is None:
        parser.error("--kubeconfig is required (or --deploy-chart)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    if args.deploy_chart and os.geteuid() != 0:
        sys.exit(
            "--deploy-chart needs root: the node runs each pod in a network and mount "
            "namespace of its own. Run it as root (sudo)."
        )
    folder = args.folder or Path(tempfile.mkdtemp(prefix="campus-test-cluster-"))
    # SIGTERM as Ctrl-C: a start (or deployment) interrupted halfway is cleaned up too.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupted)
    cluster: ControlPlaneCluster | None = None
    forward: PortForward | None = None
    try:
        if args.deploy_chart:
            # A cluster of its own: the chart makes its own accounts and cluster-wide RBAC.
            cluster = ControlPlaneCluster.start(folder / "cluster", identities=False)
            forward = serve_chart(cluster, folder, args)
        else:
            cluster = ControlPlaneCluster.start(folder)
            serve_cluster(cluster, args)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)  # let the clean-up finish
        if forward is not None:
            forward.close()
        if cluster is not None:
            cluster.stop()
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_cluster(cluster: ControlPlaneCluster, args: argparse.Namespace) -> None:
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
    write_kubeconfigs(cluster, args.kubeconfig)
    print(f"Kubernetes control plane listening on {cluster.url}", flush=True)


def serve_chart(
    cluster: ControlPlaneCluster, folder: Path, args: argparse.Namespace
) -> PortForward:
    catalog = args.catalog
    if catalog is None:
        catalog = folder / "catalog.yaml"
        catalog.write_text(people_catalog())
    print(f"Kubernetes control plane listening on {cluster.url}; installing the hub", flush=True)
    deployment = deploy(
        cluster,
        folder / "deploy",
        catalog,
        backend=args.backend,
        gpu_nodes=args.gpu_nodes,
        gpus_per_node=args.gpus_per_node,
    )
    if args.kubeconfig is not None:
        shutil.copyfile(cluster.kubeconfig, args.kubeconfig)
    forward = deployment.forward(args.port)
    print(
        f"Campus GPU Hub (helm, namespace {deployment.namespace}) at {forward.url} "
        f"(its proxy-public Service: {deployment.url})",
        flush=True,
    )
    return forward


def write_kubeconfigs(cluster: ControlPlaneCluster, kubeconfig: Path) -> None:
    shutil.copyfile(cluster.kubeconfig, kubeconfig)
    for key, identity in cluster.identities.items():
        shutil.copyfile(identity.kubeconfig, f"{kubeconfig}.{key}")


if __name__ == "__main__":
    main()
