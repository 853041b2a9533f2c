"""The tampered spawn requests both spawners must refuse: options a student was not offered,
through the REST API and the form, each with the status and the words of its refusal."""

from __future__ import annotations

from datetime import timedelta

from .course_catalogs import catalog, course, minute, now, write_catalog
from .hub_pages import page_error

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
    (
        "an environment the profile does not offer",
        {"profile": "ml101", "environment": "root-shell"},
        400,
        "ML101 offers no choice of environment",
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
    (
        "an environment field the card did not offer",
        {"profile": "ml101", "environment-ml101": "root-shell"},
        400,
        "offers no choice of environment",
    ),
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
