"""KAI-scheduler's resource reservation program (``cmd/resourcereservation`` of v0.12.0), as the
test node runs its image.

The real program, in the reservation pod the binder made for a shared GPU, asks NVML for the
one GPU the device plugin gave its container, writes that GPU's UUID on its own pod
(annotation ``run.ai/reserve_for_gpu_index``, a merge patch with the pod's service-account
token) unless it is already there, and then idles. The binder waits for that annotation and
gives the UUID to the fractions sharing the GPU. Here the container has no device to ask
NVML about: the node names its GPU in ``NVIDIA_VISIBLE_DEVICES`` (tests/support/cluster/kai.py),
and that is read instead. Everything else is as the program does it.
"""

import json
import os
import ssl
import sys
import time
import urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
ANNOTATION = "run.ai/reserve_for_gpu_index"


def call(url: str, token: str, context: ssl.SSLContext, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        method="PATCH" if body is not None else "GET",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "Content-Type": "application/merge-patch+json",
        },
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return json.loads(answer.read())


def main() -> int:
    namespace, name = os.environ["POD_NAMESPACE"], os.environ["POD_NAME"]
    server = (
        f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
    )
    with open(f"{ACCOUNT}/token") as file:
        token = file.read().strip()
    context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")
    url = f"{server}/api/v1/namespaces/{namespace}/pods/{name}"
    pod = call(url, token, context)
    if ANNOTATION not in (pod["metadata"].get("annotations") or {}):
        print(f"Looking for GPU device id for pod {namespace}/{name}", flush=True)
        devices = [d for d in os.environ.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if d]
        if len(devices) != 1:
            print(f"found {len(devices)} devices, 1 was expected", file=sys.stderr, flush=True)
            return 1
        print(f"Found GPU device {devices[0]}", flush=True)
        call(url, token, context, {"metadata": {"annotations": {ANNOTATION: devices[0]}}})
        print("Pod was updated with GPU device UUID", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
