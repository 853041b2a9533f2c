"""Run the emulator standalone: ``python -m tests.support.k8s_emulator --port 8001 --gpu-nodes 2``.

Prints the API URL, writes a kubeconfig if asked, and serves until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from .cluster import KubernetesEmulator
from .nodes import node


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.k8s_emulator", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for the emulator here")
    parser.add_argument(
        "--namespace", action="append", default=[], help="create this namespace (repeatable)"
    )
    parser.add_argument("--gpu-nodes", type=int, default=0, help="register this many GPU nodes")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--gpu-product", default="NVIDIA-A100-SXM4-80GB")
    parser.add_argument("--gpu-memory-mib", type=int, default=81920)
    parser.add_argument(
        "--cpu-nodes", type=int, default=0, help="register this many nodes without GPUs"
    )
    parser.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        help="also schedule pods of this schedulerName",
    )
    parser.add_argument(
        "--no-serve-ports",
        dest="serve_ports",
        action="store_false",
        help="do not answer HTTP on simulated containers' ports at their pod IPs",
    )
    parser.add_argument(
        "--kubernetes-version",
        default="1.34",
        help="the Kubernetes version played (1.32 to 1.34): /version and resource.k8s.io versions",
    )
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    emulator = KubernetesEmulator(
        host=args.host,
        port=args.port,
        namespaces=args.namespace,
        scheduler_names={"default-scheduler", *args.scheduler_name},
        serve_ports=args.serve_ports,
        kubernetes_version=args.kubernetes_version,
    )
    await emulator.start()
    if args.gpu_nodes:
        await emulator.add_gpu_nodes(
            args.gpu_nodes,
            product=args.gpu_product,
            gpu_count=args.gpus_per_node,
            gpu_memory_mib=args.gpu_memory_mib,
        )
    if args.cpu_nodes:
        for i in range(args.cpu_nodes):
            await emulator.add_node(node(f"cpu-node-{i}", address=f"10.1.0.{i + 1}"))
    if args.kubeconfig:
        emulator.write_kubeconfig(args.kubeconfig)
    print(f"Kubernetes API emulator listening on {emulator.url}", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stopped.set)
    await stopped.wait()
    await emulator.stop()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
