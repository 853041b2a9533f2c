"""Scenarios: when a course's class sessions happen, in its own time zone, DST included.

2024 changes: Zurich springs forward on Sun 31 Mar (02:00 -> 03:00) and falls back on
Sun 27 Oct (03:00 -> 02:00); New York on Sun 10 Mar and Sun 3 Nov (02:00 -> 01:00).
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

import pytest

from gpuspawner.policy.schedule import (
    ClassSession,
    CourseSchedule,
    Phase,
    WeeklyWindow,
    parse_clock,
    parse_timezone,
    parse_weekday,
)

from .conftest import NEW_YORK, UTC, ZURICH, at


def weekly(text: str) -> WeeklyWindow:
    """``"Mon 10:00-12:00"`` as a window."""
    day, hours = text.split()
    start, end = hours.split("-")
    return WeeklyWindow(parse_weekday(day), parse_clock(start), parse_clock(end))


def course(
    *windows: str,
    zone=ZURICH,
    first_day=date(2024, 2, 19),
    last_day=date(2024, 12, 20),
    **options,
) -> CourseSchedule:
    return CourseSchedule(
        timezone=zone,
        windows=tuple(weekly(w) for w in windows),
        first_day=first_day,
        last_day=last_day,
        **options,
    )


def utc(text: str) -> datetime:
    return at(text, UTC)


def local_span(session: ClassSession, zone) -> str:
    """``Mon 2024-03-25 10:00-12:00`` in the course's wall-clock time."""
    start, end = session.start.astimezone(zone), session.end.astimezone(zone)
    return f"{start:%a %Y-%m-%d %H:%M}-{end:%H:%M}"


def sessions_on(schedule: CourseSchedule, day: str) -> list[ClassSession]:
    begin = at(day + " 00:00", schedule.timezone)
    return [
        s
        for s in schedule.sessions_between(begin, begin + timedelta(days=1))
        if s.start.astimezone(schedule.timezone).date() == begin.date()
    ]


class TestDaylightSaving:
    @pytest.mark.parametrize(
        ("zone", "before", "after", "utc_before", "utc_after"),
        [
            # Spring forward: the local class keeps its hour, the UTC instant moves earlier.
            (ZURICH, "2024-03-25", "2024-04-01", "09:00", "08:00"),
            (NEW_YORK, "2024-03-04", "2024-03-11", "15:00", "14:00"),
            # Fall back: the UTC instant moves later again.
            (ZURICH, "2024-10-21", "2024-10-28", "08:00", "09:00"),
            (NEW_YORK, "2024-10-28", "2024-11-04", "14:00", "15:00"),
        ],
    )
    def test_given_a_monday_10_oclock_class_when_the_clocks_change_then_it_stays_at_10_local(
        self, zone, before, after, utc_before, utc_after
    ):
        schedule = course("Mon 10:00-12:00", zone=zone)

        (week_before,) = sessions_on(schedule, before)
        (week_after,) = sessions_on(schedule, after)

        assert local_span(week_before, zone).endswith("10:00-12:00")
        assert local_span(week_after, zone).endswith("10:00-12:00")
        assert week_before.start == utc(f"{before} {utc_before}")
        assert week_after.start == utc(f"{after} {utc_after}")

    @pytest.mark.parametrize(
        ("zone", "day", "utc_start"),
        [(ZURICH, "2024-03-31", "2024-03-31 01:00"), (NEW_YORK, "2024-03-10", "2024-03-10 07:00")],
    )
    def test_given_a_window_starting_inside_the_spring_gap_then_it_starts_at_three(
        self, zone, day, utc_start
    ):
        schedule = course("Sun 02:30-04:00", zone=zone)

        (session,) = sessions_on(schedule, day)

        assert session.start == utc(utc_start)
        assert local_span(session, zone) == f"Sun {day} 03:00-04:00"
        assert session.end - session.start == timedelta(hours=1)

    def test_given_the_spring_gap_when_a_student_looks_before_it_then_lead_time_still_applies(
        self,
    ):
        schedule = course("Sun 02:30-04:00")

        # 01:51 CET is 00:51 UTC; the class starts at 03:00 CEST (01:00 UTC), lead 10 min.
        status = schedule.status(at("2024-03-31 01:51"))

        assert status.phase is Phase.OPENING
        assert status.session is not None
        assert status.session.opens_at == utc("2024-03-31 00:50")

    def test_given_a_window_on_zurichs_repeated_hour_then_it_starts_at_the_first_one(self):
        schedule = course("Sun 02:00-03:00")

        (session,) = sessions_on(schedule, "2024-10-27")

        # 02:00 CEST is 00:00 UTC; 03:00 CET is 02:00 UTC: this class lasts two real hours.
        assert session.start == utc("2024-10-27 00:00")
        assert session.end == utc("2024-10-27 02:00")

    def test_given_a_short_window_inside_the_repeated_hour_then_it_happens_once(self):
        schedule = course("Sun 02:15-02:45")

        (session,) = sessions_on(schedule, "2024-10-27")

        assert session.start == utc("2024-10-27 00:15")
        assert session.end - session.start == timedelta(minutes=30)

    def test_given_a_window_on_new_yorks_repeated_hour_then_it_starts_at_the_first_one(self):
        schedule = course("Sun 01:00-02:00", zone=NEW_YORK)

        (session,) = sessions_on(schedule, "2024-11-03")

        # 01:00 EDT is 05:00 UTC; 02:00 EST is 07:00 UTC.
        assert session.start == utc("2024-11-03 05:00")
        assert session.end == utc("2024-11-03 07:00")

    def test_given_the_week_after_the_change_then_phases_follow_local_time(self):
        schedule = course("Mon 10:00-12:00", zone=NEW_YORK)

        # Mon 11 Mar 2024, first Monday of EDT: 14:30 UTC is 10:30 local.
        assert schedule.status(utc("2024-03-11 14:30")).phase is Phase.OPEN
        # The same UTC time a week earlier (EST) was 09:30 local: not yet open.
        assert schedule.status(utc("2024-03-04 14:30")).phase is Phase.CLOSED


def test_given_two_courses_in_different_zones_when_evaluated_at_one_instant_then_each_uses_its_own_clock():
    zurich_course = course("Mon 15:00-17:00", zone=ZURICH)
    new_york_morning = course("Mon 10:00-12:00", zone=NEW_YORK)
    new_york_afternoon = course("Mon 15:00-17:00", zone=NEW_YORK)
    # Mon 18 Mar 2024: Zurich is UTC+1, New York already UTC-4 (its clocks changed on the 10th).
    instant = utc("2024-03-18 14:30")  # 15:30 in Zurich, 10:30 in New York

    assert zurich_course.status(instant).phase is Phase.OPEN
    assert new_york_morning.status(instant).phase is Phase.OPEN
    afternoon = new_york_afternoon.status(instant)
    assert afternoon.phase is Phase.CLOSED
    assert afternoon.next_session is not None
    assert afternoon.next_session.start == utc("2024-03-18 19:00")


class TestDatesWithoutClass:
    def test_given_a_no_class_monday_then_that_day_has_no_session(self):
        schedule = course(
            "Mon 10:00-12:00", "Wed 10:00-12:00", no_class=frozenset({date(2024, 4, 1)})
        )

        assert sessions_on(schedule, "2024-04-01") == []
        assert schedule.status(at("2024-04-01 10:30")).phase is Phase.CLOSED

    def test_given_a_no_class_monday_when_looking_ahead_then_the_next_opening_is_wednesday(self):
        schedule = course(
            "Mon 10:00-12:00", "Wed 10:00-12:00", no_class=frozenset({date(2024, 4, 1)})
        )

        status = schedule.status(at("2024-03-29 12:00"))  # the Friday before

        assert status.next_session is not None
        assert local_span(status.next_session, ZURICH) == "Wed 2024-04-03 10:00-12:00"
        assert status.next_session.opens_at == at("2024-04-03 09:50")

    def test_given_a_weekly_class_with_one_date_off_then_the_next_opening_skips_a_week(self):
        schedule = course("Mon 10:00-12:00", no_class=frozenset({date(2024, 4, 1)}))

        status = schedule.status(at("2024-03-26 09:00"))

        assert status.next_session is not None
        assert local_span(status.next_session, ZURICH) == "Mon 2024-04-08 10:00-12:00"


class TestMerging:
    def test_given_overlapping_windows_then_they_are_one_session(self):
        schedule = course("Mon 10:00-12:00", "Mon 11:00-13:00")

        assert [local_span(s, ZURICH) for s in sessions_on(schedule, "2024-03-18")] == [
            "Mon 2024-03-18 10:00-13:00"
        ]

    def test_given_touching_windows_then_they_are_one_session_without_grace_in_between(self):
        schedule = course("Mon 10:00-12:00", "Mon 12:00-14:00")

        assert [local_span(s, ZURICH) for s in sessions_on(schedule, "2024-03-18")] == [
            "Mon 2024-03-18 10:00-14:00"
        ]
        assert schedule.status(at("2024-03-18 12:05")).phase is Phase.OPEN

    def test_given_a_gap_between_windows_then_they_stay_two_sessions(self):
        schedule = course("Mon 10:00-12:00", "Mon 12:15-13:00")

        assert len(sessions_on(schedule, "2024-03-18")) == 2

    def test_given_the_next_class_lead_time_during_the_last_one_grace_then_students_may_start(
        self,
    ):
        schedule = course("Mon 10:00-12:00", "Mon 12:15-13:00")

        # 12:07: the first class is in its grace, and the 12:15 class opened at 12:05.
        status = schedule.status(at("2024-03-18 12:07"))

        assert status.phase is Phase.OPENING
        assert status.session is not None
        assert local_span(status.session, ZURICH) == "Mon 2024-03-18 12:15-13:00"
        assert status.next_session is not None
        assert local_span(status.next_session, ZURICH) == "Mon 2024-03-25 10:00-12:00"


class TestAcrossMidnight:
    def test_given_a_window_from_22_to_01_then_it_ends_the_next_day(self):
        schedule = course("Fri 22:00-01:00")

        (session,) = sessions_on(schedule, "2024-03-22")

        assert session.start == at("2024-03-22 22:00")
        assert session.end == at("2024-03-23 01:00")

    @pytest.mark.parametrize(
        ("moment", "phase"),
        [
            ("2024-03-22 21:49", Phase.CLOSED),
            ("2024-03-22 21:55", Phase.OPENING),
            ("2024-03-22 23:59", Phase.OPEN),
            ("2024-03-23 00:30", Phase.OPEN),
            ("2024-03-23 01:05", Phase.GRACE),
            ("2024-03-23 01:10", Phase.CLOSED),
        ],
    )
    def test_given_a_late_class_then_after_midnight_it_is_still_open(self, moment, phase):
        assert course("Fri 22:00-01:00").status(at(moment)).phase is phase

    def test_given_a_late_class_on_the_last_day_of_term_then_it_still_ends_after_midnight(self):
        schedule = course("Fri 22:00-01:00", last_day=date(2024, 3, 22))

        assert schedule.status(at("2024-03-23 00:30")).phase is Phase.OPEN


class TestPhasesAroundOneClass:
    @pytest.mark.parametrize(
        ("moment", "phase"),
        [
            ("2024-03-18 09:49", Phase.CLOSED),
            ("2024-03-18 09:50", Phase.OPENING),
            ("2024-03-18 10:00", Phase.OPEN),
            ("2024-03-18 11:59", Phase.OPEN),
            ("2024-03-18 12:00", Phase.GRACE),
            ("2024-03-18 12:09", Phase.GRACE),
            ("2024-03-18 12:10", Phase.CLOSED),
        ],
    )
    def test_given_ten_minutes_lead_and_grace_then_the_phase_follows_the_clock(self, moment, phase):
        assert course("Mon 10:00-12:00").status(at(moment)).phase is phase

    def test_given_lead_time_then_only_opening_and_open_accept_new_servers(self):
        assert Phase.OPENING.accepts_new_servers and Phase.OPEN.accepts_new_servers
        assert not Phase.GRACE.accepts_new_servers and not Phase.CLOSED.accepts_new_servers

    def test_given_a_longer_lead_time_then_students_may_start_earlier(self):
        schedule = course("Mon 10:00-12:00", lead_time=timedelta(minutes=30))

        status = schedule.status(at("2024-03-18 09:31"))

        assert status.phase is Phase.OPENING
        assert status.session is not None
        assert status.session.opens_at == at("2024-03-18 09:30")

    def test_given_grace_then_servers_are_reclaimed_at_class_end_plus_grace(self):
        schedule = course("Mon 10:00-12:00", grace=timedelta(minutes=20))

        status = schedule.status(at("2024-03-18 12:15"))

        assert status.phase is Phase.GRACE
        assert status.session is not None
        assert status.session.reclaim_at == at("2024-03-18 12:20")
        assert status.next_session is not None
        assert status.next_session.start == at("2024-03-25 10:00")


class TestTerm:
    def test_given_a_date_before_term_then_closed_and_next_is_the_first_class(self):
        schedule = course("Wed 10:00-12:00", first_day=date(2024, 9, 16))

        status = schedule.status(at("2024-08-01 10:30"))

        assert status.phase is Phase.CLOSED
        assert status.next_session is not None
        assert local_span(status.next_session, ZURICH) == "Wed 2024-09-18 10:00-12:00"

    def test_given_a_date_after_term_then_there_is_no_next_session(self):
        schedule = course("Mon 10:00-12:00", last_day=date(2024, 6, 1))

        status = schedule.status(at("2024-06-03 10:30"))

        assert status.phase is Phase.CLOSED
        assert status.next_session is None

    def test_given_the_last_class_in_grace_then_no_next_session(self):
        schedule = course("Mon 10:00-12:00", last_day=date(2024, 3, 18))

        status = schedule.status(at("2024-03-18 12:05"))

        assert status.phase is Phase.GRACE
        assert status.next_session is None

    def test_given_a_naive_datetime_then_status_refuses_it(self):
        with pytest.raises(ValueError, match="aware"):
            course("Mon 10:00-12:00").status(datetime(2024, 3, 18, 10))


class TestNextSession:
    def test_given_a_tuesday_then_the_next_monday_class_is_found(self):
        schedule = course("Mon 10:00-12:00")

        status = schedule.status(at("2024-03-19 09:00"))

        assert status.next_session is not None
        assert status.next_session.start == at("2024-03-25 10:00")

    def test_given_a_class_every_other_month_then_the_search_spans_many_weeks(self):
        schedule = course(
            "Mon 10:00-12:00",
            no_class=frozenset(date(2024, 3, 25) + timedelta(weeks=n) for n in range(8)),
        )

        status = schedule.status(at("2024-03-19 09:00"))

        assert status.next_session is not None
        assert status.next_session.start == at("2024-05-20 10:00")

    def test_given_a_week_from_monday_then_every_class_in_it_is_listed(self):
        schedule = course("Mon 10:00-12:00", "Thu 14:00-16:00")

        week = schedule.week(at("2024-03-18 00:00"))

        assert [local_span(s, ZURICH) for s in week] == [
            "Mon 2024-03-18 10:00-12:00",
            "Thu 2024-03-21 14:00-16:00",
        ]


class TestValidation:
    def test_given_a_term_that_ends_before_it_starts_then_it_is_refused(self):
        with pytest.raises(ValueError, match="first day comes after its last day"):
            course("Mon 10:00-12:00", first_day=date(2024, 6, 1), last_day=date(2024, 3, 1))

    def test_given_negative_lead_time_then_it_is_refused(self):
        with pytest.raises(ValueError, match="cannot be negative"):
            course("Mon 10:00-12:00", lead_time=timedelta(minutes=-5))

    def test_given_a_window_that_ends_when_it_starts_then_it_is_refused(self):
        with pytest.raises(ValueError, match="end at a different time"):
            WeeklyWindow(0, time(10), time(10))

    @pytest.mark.parametrize(("written", "day"), [("Mon", 0), ("monday", 0), ("Tues", 1), (6, 6)])
    def test_given_weekday_spellings_then_they_are_understood(self, written, day):
        assert parse_weekday(written) == day

    @pytest.mark.parametrize("written", ["Funday", "mo", "Mondays", 7, True, None])
    def test_given_a_bad_weekday_then_the_message_gives_examples(self, written):
        with pytest.raises(ValueError, match="day of the week such as Mon or monday"):
            parse_weekday(written)

    @pytest.mark.parametrize(
        ("written", "clock"), [("10:00", time(10)), ("9:05", time(9, 5)), (600, time(10))]
    )
    def test_given_clock_times_then_they_are_understood(self, written, clock):
        assert parse_clock(written) == clock

    @pytest.mark.parametrize(
        ("written", "shown"),
        [("25:00", "'25:00'"), (1500, "'25:00'"), ("10h", "'10h'"), (None, "None")],
    )
    def test_given_a_bad_clock_time_then_the_message_shows_what_was_written(self, written, shown):
        with pytest.raises(ValueError, match="HH:MM") as error:
            parse_clock(written)
        assert str(error.value).endswith(f"got {shown}")

    def test_given_an_unknown_time_zone_then_the_message_gives_examples(self):
        with pytest.raises(ValueError, match="such as Europe/Zurich"):
            parse_timezone("Mars/Olympus_Mons")


def test_the_next_class_is_found_exactly_one_day_plus_grace_before_it_opens():
    # Given classes on Sun 10:00-11:45 and Wed 17:10-19:55 (UTC), lead 10 min, grace 30 min
    schedule = course(
        "Sun 10:00-11:45",
        "Wed 17:10-19:55",
        zone=UTC,
        first_day=date(2026, 3, 1),
        last_day=date(2026, 6, 13),
        lead_time=timedelta(minutes=10),
        grace=timedelta(minutes=30),
    )
    # When asked exactly one day plus the grace before Sunday's class opens, and around it
    for moment in ("2026-03-28 09:19", "2026-03-28 09:20", "2026-03-28 09:21"):
        status = schedule.status(at(moment, UTC))
        # Then the next class is Sunday's, never the following Wednesday's
        assert status.next_session is not None
        assert status.next_session.opens_at == at("2026-03-29 09:50", UTC), moment


def test_status_agrees_with_a_day_by_day_scan_over_a_whole_term():
    # Given a course whose classes and grace periods overlap, across a DST change
    schedule = course(
        "Mon 10:00-12:00",
        "Mon 12:15-13:00",
        "Thu 22:00-01:00",
        lead_time=timedelta(minutes=20),
        grace=timedelta(minutes=30),
    )
    sessions = schedule.sessions_between(at("2024-02-18 00:00"), at("2024-12-22 00:00"))
    moment = at("2024-02-18 00:00")
    # When status() is asked every 7 minutes through the term
    while moment < at("2024-12-21 00:00"):
        status = schedule.status(moment)
        # Then its next session is the first one opening later, as a plain scan says
        expected = next((s for s in sessions if s.opens_at > moment), None)
        assert status.next_session == expected, moment
        inside = [s for s in sessions if s.opens_at <= moment < s.reclaim_at]
        assert (status.session is None) == (not inside), moment
        moment += timedelta(minutes=7 * 60 + 7)
