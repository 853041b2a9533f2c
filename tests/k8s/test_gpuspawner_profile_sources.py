"""A hub with a course catalog and a KubeSpawner profile_list is told so, never silently."""

from __future__ import annotations

import pytest
from jupyterhub.spawner import SpawnException

from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")

PROFILE_LIST = [{"display_name": "Small", "slug": "small", "kubespawner_override": {}}]


async def test_a_profile_list_beside_a_catalog_stops_every_start_with_both_settings_named(
    tmp_path,
):
    spawner = make_gpu_spawner(
        "ana", write_class_catalog(tmp_path / "c.yaml", ["ana"]), profile_list=PROFILE_LIST
    )

    with pytest.raises(SpawnException) as at_start:
        await spawner.start()
    with pytest.raises(SpawnException) as on_the_form:
        await spawner.get_options_form()

    for refused in (at_start.value, on_the_form.value):
        assert refused.status_code == 503
        assert "c.GPUAdmission.catalog_path" in refused.message
        assert "c.KubeSpawner.profile_list" in refused.message


async def test_the_catalog_alone_or_the_profile_list_alone_is_fine(tmp_path):
    with_catalog = make_gpu_spawner("ana", write_class_catalog(tmp_path / "c.yaml", ["ana"]))
    with_catalog.check_one_profile_source()
    without = make_gpu_spawner(
        "ana", tmp_path / "none.yaml", catalog_path="", profile_list=PROFILE_LIST
    )
    without.check_one_profile_source()
    assert "Small" in await without.get_options_form()
