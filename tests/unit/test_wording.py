"""Scenarios: times on the start page read the way a student says them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuspawner.policy.wording import duration, when

from .conftest import NEW_YORK, ZURICH, at

NOW = at("2024-03-18 09:00")  # Monday


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        ("2024-03-18 12:10", "12:10"),
        ("2024-03-19 10:00", "tomorrow 10:00"),
        ("2024-03-20 09:50", "Wed 09:50"),
        ("2024-03-24 09:50", "Sun 09:50"),
        ("2024-03-25 09:50", "Mon 25 Mar 09:50"),
    ],
)
def test_given_a_moment_then_it_is_said_relative_to_today(moment, text):
    assert when(at(moment), NOW, ZURICH) == text


def test_given_another_zone_then_the_course_zone_decides_the_day_and_hour():
    # 23:30 in New York on Monday is already Tuesday morning in Zurich.
    assert when(at("2024-03-18 23:30", NEW_YORK), NOW, ZURICH) == "tomorrow 04:30"


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (timedelta(seconds=30), "less than a minute"),
        (timedelta(minutes=12), "12 min"),
        (timedelta(hours=2), "2 h"),
        (timedelta(hours=1, minutes=5), "1 h 5 min"),
    ],
)
def test_given_a_duration_then_it_is_short_and_readable(span, text):
    assert duration(span) == text
