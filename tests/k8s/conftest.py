"""Fixtures for tests against a Kubernetes API: registered suite-wide from tests/conftest.py."""
