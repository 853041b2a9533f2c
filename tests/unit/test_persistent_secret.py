"""Scenarios: a secret shared by the hub and its services stays the same across restarts."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path

import pytest

from gpuspawner.persistent_secret import SecretFileError, persistent_secret


def test_the_first_start_makes_a_private_secret_and_later_starts_read_it_back(tmp_path):
    # Given no secret yet
    path = tmp_path / "runtime" / "prewarm-secret"
    # When the hub starts, then restarts
    first = persistent_secret(path)
    again = persistent_secret(path)
    # Then the secret is random, saved for its owner only, and the same after the restart
    assert len(first) == 64 and int(first, 16) >= 0
    assert again == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == first + "\n"
    # And another file holds another secret
    assert persistent_secret(tmp_path / "runtime" / "other-secret") != first


def test_deleting_the_file_makes_a_new_secret(tmp_path):
    path = tmp_path / "prewarm-secret"
    first = persistent_secret(path)
    path.unlink()
    assert persistent_secret(path) != first


def _read_secret(path: str) -> str:
    return persistent_secret(path)


def test_processes_starting_at_once_share_one_secret(tmp_path):
    path = str(tmp_path / "prewarm-secret")
    with multiprocessing.get_context("spawn").Pool(4) as workers:
        found = workers.map(_read_secret, [path] * 8)
    assert len(set(found)) == 1
    assert persistent_secret(path) == found[0]


def test_a_secret_file_others_can_read_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "prewarm-secret"
    persistent_secret(path)
    path.chmod(0o644)
    with pytest.raises(SecretFileError, match=r"chmod 600 .*prewarm-secret"):
        persistent_secret(path)


def test_an_empty_secret_file_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "prewarm-secret"
    path.touch(mode=0o600)
    with pytest.raises(SecretFileError, match="delete it to make a new secret"):
        persistent_secret(path)


def _demo_config():
    from traitlets.config.loader import PyFileConfigLoader

    folder = Path(__file__).resolve().parents[2] / "hub_config" / "local"
    return PyFileConfigLoader("jupyterhub_config.py", path=str(folder)).load_config()


def test_the_demo_hub_keeps_its_prewarm_secret_when_it_restarts(tmp_path, monkeypatch):
    # Given the demo hub's configuration, with no secret in the environment
    monkeypatch.setenv("GPUSPAWNER_DEMO_RUNTIME", str(tmp_path))
    monkeypatch.delenv("GPUSPAWNER_PREWARM_SECRET", raising=False)
    # When the hub starts, then starts again
    first = _demo_config().GPUAdmission.prewarm_secret
    again = _demo_config().GPUAdmission.prewarm_secret
    # Then the spawner gets the same secret both times, kept in the runtime folder
    assert first and again == first
    assert (tmp_path / "prewarm-secret").read_text().strip() == first
    assert stat.S_IMODE((tmp_path / "prewarm-secret").stat().st_mode) == 0o600
    # And a secret given in the environment still wins
    monkeypatch.setenv("GPUSPAWNER_PREWARM_SECRET", "from-the-environment")
    assert _demo_config().GPUAdmission.prewarm_secret == "from-the-environment"
