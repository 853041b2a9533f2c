"""Scenarios: class windows meet the spring daylight-saving jump, or each other."""

from __future__ import annotations

from datetime import date, time
from zoneinfo import ZoneInfo

import pytest

from gpuspawner.policy.schedule import WeeklyWindow, gap_clashes

SUNDAY, SATURDAY, MONDAY = 6, 5, 0


def clashes(window: WeeklyWindow, zone: str, first: date, last: date, no_class=frozenset()):
    return [
        (c.day, c.jump_from, c.jump_to, c.starts_in_gap, c.ends_in_gap, c.wholly)
        for c in gap_clashes(window, ZoneInfo(zone), first, last, frozenset(no_class))
    ]


def test_given_a_two_year_term_then_each_spring_jump_inside_a_window_is_found():
    window = WeeklyWindow(SUNDAY, time(2, 15), time(2, 45))

    found = clashes(window, "Europe/Zurich", date(2024, 1, 1), date(2025, 12, 31))

    assert found == [
        (date(2024, 3, 31), time(2), time(3), True, True, True),
        (date(2025, 3, 30), time(2), time(3), True, True, True),
    ]


def test_given_the_southern_hemisphere_then_the_october_jump_is_found():
    window = WeeklyWindow(SUNDAY, time(2, 0), time(2, 59))

    found = clashes(window, "Australia/Sydney", date(2024, 7, 1), date(2024, 12, 1))

    assert found == [(date(2024, 10, 6), time(2), time(3), True, True, True)]


def test_given_a_half_hour_jump_then_only_a_window_inside_the_half_hour_is_wholly_in_it():
    # Lord Howe Island moves its clocks by 30 minutes, from 02:00 to 02:30.
    inside = WeeklyWindow(SUNDAY, time(2, 5), time(2, 25))
    across = WeeklyWindow(SUNDAY, time(2, 15), time(3, 0))
    term = (date(2024, 9, 1), date(2024, 11, 1))

    assert clashes(inside, "Australia/Lord_Howe", *term) == [
        (date(2024, 10, 6), time(2), time(2, 30), True, True, True)
    ]
    assert clashes(across, "Australia/Lord_Howe", *term) == [
        (date(2024, 10, 6), time(2), time(2, 30), True, False, False)
    ]


def test_given_a_class_past_midnight_then_an_end_in_the_next_days_gap_is_found():
    window = WeeklyWindow(SATURDAY, time(23, 0), time(2, 30))

    found = clashes(window, "Europe/Zurich", date(2024, 3, 1), date(2024, 4, 30))

    assert found == [(date(2024, 3, 30), time(2), time(3), False, True, False)]


def test_given_the_jump_day_without_class_or_a_zone_without_jumps_then_nothing_is_found():
    window = WeeklyWindow(SUNDAY, time(2, 15), time(2, 45))
    term = (date(2024, 3, 1), date(2024, 4, 30))

    assert clashes(window, "Europe/Zurich", *term, no_class={date(2024, 3, 31)}) == []
    assert clashes(window, "UTC", *term) == []
    assert clashes(window, "Asia/Tokyo", *term) == []


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        (WeeklyWindow(MONDAY, time(10), time(12)), WeeklyWindow(MONDAY, time(11), time(13)), True),
        (WeeklyWindow(MONDAY, time(10), time(12)), WeeklyWindow(MONDAY, time(12), time(13)), False),
        (WeeklyWindow(MONDAY, time(10), time(12)), WeeklyWindow(MONDAY, time(10), time(12)), True),
        (WeeklyWindow(MONDAY, time(10), time(12)), WeeklyWindow(1, time(10), time(12)), False),
        (WeeklyWindow(SUNDAY, time(23), time(1)), WeeklyWindow(MONDAY, time(0, 30), time(2)), True),
        (WeeklyWindow(SUNDAY, time(23), time(1)), WeeklyWindow(MONDAY, time(1), time(2)), False),
        (
            WeeklyWindow(MONDAY, time(9), time(17)),
            WeeklyWindow(MONDAY, time(12), time(12, 5)),
            True,
        ),
    ],
)
def test_given_two_weekly_windows_then_overlap_is_shared_time_not_touching(first, second, overlap):
    assert first.overlaps(second) is overlap
    assert second.overlaps(first) is overlap
