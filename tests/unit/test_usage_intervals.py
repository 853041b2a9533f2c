"""GPU-hours as exact fractions: share × time, clipping to a range, weeks in a time zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction
from zoneinfo import ZoneInfo

from gpuspawner.accounting.intervals import UsageInterval, clip, hours_between, week_of
from gpuspawner.accounting.report import NamedRange, usage_report
from gpuspawner.policy.budget_spec import budget_text, format_gpu_hours

AUCKLAND = ZoneInfo("Pacific/Auckland")
T0 = datetime(2026, 9, 7, 8, 0, tzinfo=UTC)


def interval(
    share: Fraction,
    start: datetime,
    hours: float | None,
    owner: str = "ana",
    kind: str = "server",
    **fields,
) -> UsageInterval:
    end = start + timedelta(hours=hours) if hours is not None else None
    return UsageInterval(
        key=f"{kind}:{owner}/{start.isoformat()}",
        kind=kind,
        owner=owner,
        name="",
        profile=fields.pop("profile", "ml101"),
        share=share,
        started=start,
        ended=end,
        **fields,
    )


def test_sevenths_of_a_gpu_add_up_to_exactly_the_time_they_held():
    # Given seven servers each holding 1/7 of a GPU for 1 h 23 min 0.000001 s
    span = timedelta(hours=1, minutes=23, microseconds=1)
    runs = [interval(Fraction(1, 7), T0 + i * span, span / timedelta(hours=1)) for i in range(7)]

    # When their GPU-hours are summed
    total = sum((run.gpu_hours(now=T0) for run in runs), Fraction(0))

    # Then they make exactly one GPU for that long: no float drift
    assert total == hours_between(T0, T0 + span)
    assert total == Fraction(4980000001, 3600000000)


def test_an_interval_is_clipped_exactly_to_the_range():
    # Given a half-GPU server from 22:30 to 01:30 the next day
    run = interval(Fraction(1, 2), T0.replace(hour=22, minute=30), 3)
    midnight = T0.replace(hour=0) + timedelta(days=1)

    # When only the day before midnight is counted
    before = run.gpu_hours(None, midnight, now=T0)
    after = run.gpu_hours(midnight, None, now=T0)

    # Then each side gets its own part, and the parts make the whole
    assert before == Fraction(3, 4) and after == Fraction(3, 4)
    assert clip(run.started, run.ended, midnight + timedelta(hours=2), None) is None


def test_a_running_interval_counts_up_to_now():
    # Given a whole GPU started two hours ago and still running
    run = interval(Fraction(1), T0, None)

    # Then it has used two GPU-hours now, and none before it started
    assert run.gpu_hours(now=T0 + timedelta(hours=2)) == 2
    assert run.gpu_hours(now=T0 - timedelta(hours=1)) == 0


def test_the_week_holding_a_daylight_saving_change_in_auckland_has_167_hours():
    # Given New Zealand moves its clocks forward on Sunday 27 September 2026 (02:00 -> 03:00)
    sunday_noon = datetime(2026, 9, 27, 12, 0, tzinfo=AUCKLAND)

    # When the week holding it is taken in Auckland's time
    start, end = week_of(sunday_noon, AUCKLAND)

    # Then it runs from Monday 00:00 (+12:00) to the next Monday 00:00 (+13:00)
    assert start == datetime(2026, 9, 21, 0, 0, tzinfo=AUCKLAND)
    assert start == datetime(2026, 9, 20, 12, 0, tzinfo=UTC)
    assert end == datetime(2026, 9, 27, 11, 0, tzinfo=UTC)
    assert end.astimezone(AUCKLAND).strftime("%a %H:%M") == "Mon 00:00"
    assert end - start == timedelta(hours=167)
    # and Monday 00:30 in Auckland is Sunday in UTC, yet already the next week
    early_monday = datetime(2026, 9, 28, 0, 30, tzinfo=AUCKLAND)
    assert week_of(early_monday, AUCKLAND)[0] == end


def test_the_week_holding_the_change_back_in_auckland_has_169_hours():
    # Given clocks go back on Sunday 5 April 2026 (03:00 -> 02:00)
    start, end = week_of(datetime(2026, 4, 2, 9, 0, tzinfo=AUCKLAND), AUCKLAND)

    # Then that week is an hour longer
    assert end - start == timedelta(hours=169)


def test_gpu_hours_are_written_rounded_and_budgets_as_given():
    assert format_gpu_hours(Fraction(6)) == "6.0"
    assert format_gpu_hours(Fraction(1, 20)) == "0.1"  # half up
    assert format_gpu_hours(Fraction(1, 4), down=True) == "0.2"  # what is left: down
    assert format_gpu_hours(Fraction(1, 7), 6) == "0.142857"
    assert budget_text(Fraction(6)) == "6" and budget_text(Fraction(5, 2)) == "2.5"
    assert budget_text(Fraction(1, 3)) == "1/3"


def test_a_report_by_course_adds_up_to_the_total_and_splits_servers_from_jobs():
    # Given a server and a job of ml101 and a research job
    intervals = [
        interval(Fraction(1, 4), T0, 4, course="ml101"),
        interval(Fraction(1, 2), T0, 1, owner="ben", kind="job", course="ml101"),
        interval(Fraction(2), T0, 3, owner="cy", kind="job", allocation="vision"),
    ]

    # When reported by course for the whole day
    report = usage_report(
        intervals, begin=T0, finish=T0 + timedelta(days=1), now=T0 + timedelta(days=2), by="course"
    )

    # Then ml101 has 1 server GPU-hour and 1/2 job GPU-hour; the research job is listed
    # under its allocation, not under an empty course name
    lines = {line.name: line for line in report.lines}
    assert lines["ml101"].server_gpu_hours == 1 and lines["ml101"].job_gpu_hours == Fraction(1, 2)
    assert lines["research allocation vision"].gpu_hours == 6
    assert "" not in lines
    assert report.total.gpu_hours == sum(line.gpu_hours for line in report.lines)
    assert report.to_csv().splitlines()[1].startswith("ml101,")


def test_a_report_by_term_clips_each_interval_to_each_term():
    # Given a whole GPU running from 20:00 on the last day of one term into the next
    run = interval(Fraction(1), T0.replace(hour=20), 10)
    cut = T0.replace(hour=0) + timedelta(days=1)
    terms = [
        NamedRange("summer", cut - timedelta(days=90), cut),
        NamedRange("autumn", cut, cut + timedelta(days=90)),
    ]

    # When reported by term
    report = usage_report(
        [run], begin=None, finish=None, now=cut + timedelta(days=3), by="term", terms=terms
    )

    # Then each term has its own hours
    assert {line.name: line.gpu_hours for line in report.lines} == {"autumn": 6, "summer": 4}
