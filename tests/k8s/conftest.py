"""Fixtures for tests against a Kubernetes API; see fixtures.py."""

from .fixtures import k8s_api, k8s_controls, k8s_emulator, k8s_namespace, kubespawner_env

__all__ = ["k8s_api", "k8s_emulator", "k8s_controls", "k8s_namespace", "kubespawner_env"]
