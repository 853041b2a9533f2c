"""Scenarios: only the sessions service, holding the shared secret, can start servers early."""

from __future__ import annotations

import pytest

from gpuspawner.policy.prewarm import prewarm_token, verify_prewarm_token

from .conftest import UTC, at

SECRET = "s3cret-shared-with-the-sessions-service"
CLASS_START = at("2024-03-18 09:00", UTC)
START = ("alice", "", "ml101", CLASS_START)


def test_given_the_token_the_sessions_service_made_then_the_start_is_verified():
    token = prewarm_token(SECRET, *START)

    assert verify_prewarm_token(token, SECRET, *START)


@pytest.mark.parametrize(
    ("field", "other"),
    [
        (0, "mallory"),  # another user
        (1, "second"),  # another named server
        (2, "vision"),  # another course
        (3, at("2024-03-25 09:00", UTC)),  # another class
    ],
)
def test_given_a_token_for_another_start_then_it_is_rejected(field, other):
    token = prewarm_token(SECRET, *START)
    changed = list(START)
    changed[field] = other

    assert not verify_prewarm_token(token, SECRET, *changed)


@pytest.mark.parametrize(
    "token",
    [
        prewarm_token("a guessed secret", *START),
        "0" * 64,
        "not hex and too short",
        None,
        123,
        prewarm_token(SECRET, *START).upper(),
    ],
)
def test_given_a_forged_or_malformed_token_then_it_is_rejected(token):
    assert not verify_prewarm_token(token, SECRET, *START)


def test_given_no_secret_configured_then_no_token_is_accepted():
    assert not verify_prewarm_token(prewarm_token("", *START), "", *START)
