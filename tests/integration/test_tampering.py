"""Requests for profiles or options a student was not offered, through the form and the API.

Every one is refused with a 4xx and a sentence, none counts toward the hub's
consecutive-failure limit (set to 2 here, so two counted failures would stop the
hub), and the hub keeps serving: the student can still start what was offered.
"""

from __future__ import annotations

import json

import pytest

from ..support.course_catalogs import spawner_config
from ..support.tampering import refuse_every_tampered_request, write_tampering_catalog

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'


@pytest.fixture
def tampering_hub(start_hub, browserless_user, tmp_path):
    catalog_dir = tmp_path / "catalog"
    write_tampering_catalog(catalog_dir)
    hub = start_hub(spawner_config(catalog_dir, ONE_GPU))
    sam = browserless_user(hub, "sam")
    sam.login()
    return hub, sam


def test_tampered_requests_are_refused_and_the_hub_keeps_running(tampering_hub):
    hub, sam = tampering_hub

    # When Sam sends each tampered start request through the REST API and the form,
    # then each is refused with a 4xx that says why, and nothing starts
    refuse_every_tampered_request(sam)

    # And a body that is not a JSON object is refused too
    raw = sam.api(
        "POST",
        "/users/sam/server",
        data=json.dumps(["ml101"]),
        headers={"Content-Type": "application/json"},
    )
    assert 400 <= raw.status_code < 500

    # Then the hub is still up (no refusal counted as a failure) and the offered course starts
    assert hub.api("GET", "/").status_code == 200
    assert sam.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    sam.wait_ready()
    assert "consecutive spawns failed" not in hub.log_text()
    assert "Aborting due to" not in hub.log_text()
