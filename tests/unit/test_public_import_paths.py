"""The spawners' public import paths stay what hub configurations name, wherever the code
moves: ``gpuspawner.kubernetes.GPUSpawner`` (also the default target of
../shared/tools/kubespawner-suite.sh) and ``gpuspawner.local.LocalGPUSpawner``."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("public", "home"),
    [
        ("gpuspawner.kubernetes:GPUSpawner", "gpuspawner.spawners.kubernetes"),
        ("gpuspawner.local:LocalGPUSpawner", "gpuspawner.spawners.local"),
        ("gpuspawner.local:SimpleLocalGPUSpawner", "gpuspawner.spawners.local"),
    ],
)
def test_a_hub_config_written_for_the_public_path_gets_the_spawner(public: str, home: str) -> None:
    module, name = public.split(":")
    # Given a hub configuration that names the spawner by its public path
    spawner = getattr(importlib.import_module(module), name)
    # Then it is the spawner itself, not a copy or a subclass
    assert spawner is getattr(importlib.import_module(home), name)
    assert spawner.__module__ == home


def test_the_entry_points_name_the_same_spawners() -> None:
    from importlib.metadata import entry_points

    found = {ep.name: ep.load() for ep in entry_points(group="jupyterhub.spawners")}
    from gpuspawner.kubernetes import GPUSpawner
    from gpuspawner.local import LocalGPUSpawner, SimpleLocalGPUSpawner

    assert (found.get("gpu"), found.get("localgpu"), found.get("simplelocalgpu")) == (
        GPUSpawner,
        LocalGPUSpawner,
        SimpleLocalGPUSpawner,
    )
