"""The identities components have in production, made in the test cluster.

- the hub: service account ``hub`` bound to the Role the Zero to JupyterHub chart renders
  (``helm template``, from the chart and ``hub_config/kubernetes/values.yaml``) plus
  ``hub_config/kubernetes/rbac.yaml``;
- the job service: service account ``jupyter-to-job`` with the RBAC of
  ``hub_config/kubernetes/job-service.yaml``.

Each gets a kubeconfig with a token from the TokenRequest API, as a pod's projected token.
Every object made here carries the session label, so the clean-up between tests keeps it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .control_plane import REPO, ControlPlane

SESSION_LABEL = "campus-test/session"
"""Objects that live for the whole test session (the clean-up between tests keeps them)."""
CHART = REPO.parent / "shared" / "reference" / "z2jh" / "chart"
VALUES = REPO / "hub_config" / "kubernetes" / "values.yaml"
HUB_RBAC = REPO / "hub_config" / "kubernetes" / "rbac.yaml"
JOB_SERVICE = REPO / "hub_config" / "kubernetes" / "job-service.yaml"
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
TOKEN_SECONDS = 24 * 3600

Object = dict[str, Any]


@dataclass(frozen=True)
class Identity:
    """A component's service account and a kubeconfig that authenticates as it."""

    name: str
    namespace: str
    kubeconfig: Path

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


def chart_hub_rbac(helm: Path, namespace: str) -> list[Object]:
    """The hub's ServiceAccount, Role and RoleBinding as the z2jh chart renders them."""
    rendered = subprocess.run(
        [
            str(helm),
            "template",
            "campus",
            str(CHART),
            f"--namespace={namespace}",
            f"--values={VALUES}",
            "--show-only=templates/hub/rbac.yaml",
            "--show-only=templates/hub/serviceaccount.yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def rbac_documents(path: Path, namespace: str) -> list[Object]:
    """The RBAC objects of a manifest file, placed in ``namespace`` (subjects too)."""
    documents = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") not in RBAC_KINDS:
            continue
        if doc["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
        documents.append(doc)
    return documents


def kubectl_apply(plane: ControlPlane, documents: list[Object]) -> None:
    """Server-side apply, as an admin would ``kubectl apply --server-side`` the files."""
    for doc in documents:
        doc["metadata"].setdefault("labels", {})[SESSION_LABEL] = "true"
    subprocess.run(
        [
            str(plane.bin / "kubectl"),
            f"--kubeconfig={plane.admin_kubeconfig}",
            "apply",
            "--server-side",
            "--field-manager=campus-test",
            "-f",
            "-",
        ],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}),
        capture_output=True,
        text=True,
        check=True,
    )


def token_for(plane: ControlPlane, namespace: str, account: str) -> str:
    result = subprocess.run(
        [
            str(plane.bin / "kubectl"),
            f"--kubeconfig={plane.admin_kubeconfig}",
            f"--namespace={namespace}",
            "create",
            "token",
            account,
            f"--duration={TOKEN_SECONDS}s",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def make_identities(plane: ControlPlane, namespace: str = "default") -> dict[str, Identity]:
    """The hub's and the job service's accounts in ``namespace``, with their kubeconfigs."""
    documents = chart_hub_rbac(plane.bin / "helm", namespace)
    documents += rbac_documents(HUB_RBAC, namespace)
    documents += rbac_documents(JOB_SERVICE, namespace)
    kubectl_apply(plane, documents)
    identities = {}
    for key, account in (("hub", "hub"), ("job-service", "jupyter-to-job")):
        path = plane.write_kubeconfig(
            plane.folder / f"{key}.kubeconfig",
            user=f"system:serviceaccount:{namespace}:{account}",
            token=token_for(plane, namespace, account),
            namespace=namespace,
        )
        identities[key] = Identity(account, namespace, path)
    return identities
