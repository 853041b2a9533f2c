"""Requests for profiles or options a student was not offered, through the form and the API.

Every one is refused with a 4xx and a sentence, none counts toward the hub's
consecutive-failure limit (set to 2 here, so two counted failures would stop the
hub), and the hub keeps serving: the student can still start what was offered.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from .course_catalogs import catalog, course, minute, now, spawner_config, write_catalog
from .test_course_profiles import page_error

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'

RESEARCH = """\
  - id: vision-lab
    title: Vision lab
    users: [rhea]
    expires: 2099-12-31
    gpu: {count: 1}
"""

# (description, user options sent as JSON, expected status, words the message must contain)
API_CASES = [
    ("another course's profile", {"profile": "cv201"}, 403, "is not offered to you"),
    ("a closed course", {"profile": "ml101-closed"}, 403, "cannot be started now"),
    ("a profile that does not exist", {"profile": "gpu-unlimited"}, 403, "is not offered"),
    ("someone else's research allocation", {"profile": "vision-lab"}, 403, "is not offered"),
    ("an extra resource key", {"profile": "cpu", "cpu_limit": 64}, 400, "cpu_limit"),
    (
        "an environment override",
        {"profile": "ml101", "environment": {"LD_PRELOAD": "/x.so"}},
        400,
        "environment",
    ),
    (
        "a GPU override",
        {"profile": "ml101", "extra_resource_limits": {"nvidia.com/gpu": 8}},
        400,
        "extra_resource_limits",
    ),
    ("a profile that is not a string", {"profile": ["ml101", "cv201"]}, 400, "profile"),
    ("a huge profile id", {"profile": "x" * 5000}, 400, "profile"),
    (
        "a forged pre-warm token",
        {"profile": "ml101-closed", "prewarm_token": "0" * 64},
        403,
        "pre-warm token",
    ),
    (
        "a pre-warm token of the wrong type",
        {"profile": "ml101", "prewarm_token": 7},
        400,
        "pre-warm token",
    ),
]

FORM_CASES = [
    ("another course's profile", {"profile": "cv201"}, 403, "is not offered to you"),
    ("a closed course", {"profile": "ml101-closed"}, 403, "cannot be started now"),
    ("an extra field", {"profile": "ml101", "gpu_fraction": "1"}, 400, "gpu_fraction"),
    ("two profiles at once", {"profile": ["ml101", "cpu"]}, 400, "profile"),
    ("a resource field in the form", {"profile": "ml101", "cpu_limit": "64"}, 400, "cpu_limit"),
]


def write_tampering_catalog(catalog_dir):
    """Sam takes ML101 (open now) and ML101 evening (opens in 5 hours); CV201 is not his."""
    t = minute(now())
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=t - timedelta(minutes=5),
                end=t + timedelta(minutes=90),
                students=["sam"],
            ),
            course(
                "ml101-closed",
                start=t + timedelta(hours=5),
                end=t + timedelta(hours=6),
                students=["sam"],
                title="ML101 evening",
            ),
            course(
                "cv201",
                start=t - timedelta(minutes=5),
                end=t + timedelta(minutes=90),
                students=["other"],
                title="CV201",
            ),
            research=RESEARCH,
        ),
    )


def refuse_every_tampered_request(sam) -> None:
    """Each tampered request, through the REST API and the form, is a 4xx that says why."""
    for description, options, status, words in API_CASES:
        response = sam.spawn_via_api(options)
        assert response.status_code == status, (description, response.text)
        assert words in response.json()["message"], (description, response.text)
        assert sam.model()["servers"] == {}, description
    for description, fields, status, words in FORM_CASES:
        page = sam.post_spawn_form(fields)
        assert page.status_code == status, (description, page.status_code)
        assert words in page_error(page.text), (description, page_error(page.text))
        assert sam.model()["servers"] == {}, description


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
