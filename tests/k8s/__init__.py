"""Tests against a Kubernetes API: the real control plane of tests/support/cluster (or the
cluster of $KUBECONFIG with ``-m k8s``); the emulator's own tests are in ``emulator/``."""
