"""Tests against a Kubernetes API: the emulator in ``emulator/`` or a real cluster."""
