"""Instructors' changes on top of the catalog: checked against the admins' bounds, applied
by the same schedule code that reads the catalog, and reported when the bounds narrow."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from gpuspawner.policy import CatalogError, load_catalog
from gpuspawner.policy.course_overrides import (
    ExtraSession,
    OverrideRefused,
    OverridesFile,
    bounds_for,
    cancel_change,
    classes_between,
    course_overrides,
    extension_change,
    extra_change,
    notice_change,
    timing_change,
)

CATALOG = """\
settings:
  timezone: Europe/Zurich
  instructor_bounds:
    overrides_file: overrides.json
    extra_sessions_per_week: 1
    lead_time: {min: 0m, max: 30m}
    notice_length: 40
    extension: 30m
courses:
  - id: ml101
    title: Machine Learning 101
    instructors: [bob]
    enrolment: {users: [alice]}
    schedule:
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows:
        - {days: [Mon, Wed], start: "10:15", end: "12:00"}
"""

# Wednesday 25 November 2026, 13:00 in Zurich: the next class is Monday 30 November.
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MONDAY = date(2026, 11, 30)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    return tmp_path


def save(folder: Path, course_id: str, overrides) -> None:
    document = load_catalog(folder).overrides or OverridesFile()
    (folder / "overrides.json").write_text(document.replace(course_id, overrides).to_json())


def test_a_cancelled_monday_is_no_longer_the_next_class(folder: Path) -> None:
    catalog = load_catalog(folder)
    course = catalog.courses_by_id["ml101"]
    bounds = catalog.settings.instructor_bounds
    assert course.course_schedule.status(NOW).next_session.start.date() == MONDAY

    save(folder, "ml101", cancel_change(course, bounds, course_overrides(course), MONDAY, NOW))

    after = load_catalog(folder).courses_by_id["ml101"]
    assert after.course_schedule.status(NOW).next_session.start.date() == date(2026, 12, 2)
    (day, [(session, cancelled)]) = classes_between(after, MONDAY, MONDAY)[0]
    assert cancelled is True


def test_a_day_without_class_or_a_past_class_cannot_be_cancelled(folder: Path) -> None:
    catalog = load_catalog(folder)
    course = catalog.courses_by_id["ml101"]
    bounds = catalog.settings.instructor_bounds
    with pytest.raises(OverrideRefused, match="has no class on Tue 01 Dec 2026"):
        cancel_change(course, bounds, course_overrides(course), date(2026, 12, 1), NOW)
    with pytest.raises(OverrideRefused, match="already begun or taken place"):
        cancel_change(course, bounds, course_overrides(course), date(2026, 11, 23), NOW)


def test_an_extra_session_opens_the_course_and_the_weekly_limit_holds(folder: Path) -> None:
    catalog = load_catalog(folder)
    course = catalog.courses_by_id["ml101"]
    bounds = catalog.settings.instructor_bounds
    friday = ExtraSession(day=date(2026, 11, 27), start="14:00", end="16:00")
    overrides = extra_change(course, bounds, course_overrides(course), friday, NOW)
    save(folder, "ml101", overrides)

    after = load_catalog(folder).courses_by_id["ml101"]
    at_friday_class = datetime(2026, 11, 27, 13, 30, tzinfo=UTC)  # 14:30 in Zurich
    assert after.course_schedule.status(at_friday_class).phase.accepts_new_servers

    saturday = ExtraSession(day=date(2026, 11, 28), start="09:00", end="10:00")
    with pytest.raises(OverrideRefused, match="allow 1 extra session a week"):
        extra_change(after, bounds, overrides, saturday, NOW)


def test_settings_outside_the_bounds_are_refused_with_a_sentence(folder: Path) -> None:
    catalog = load_catalog(folder)
    bounds = catalog.settings.instructor_bounds
    empty = course_overrides(catalog.courses_by_id["ml101"])
    with pytest.raises(OverrideRefused, match="between 0 minutes and 30 minutes") as refused:
        timing_change(bounds, empty, "lead_time", timedelta(minutes=45))
    assert refused.value.status == 400
    with pytest.raises(OverrideRefused, match="do not let instructors change the grace"):
        timing_change(bounds, empty, "grace", timedelta(minutes=5))
    with pytest.raises(OverrideRefused, match="at most 40 characters"):
        notice_change(bounds, empty, "x" * 41)


def test_a_server_is_extended_up_to_the_admins_limit(folder: Path) -> None:
    catalog = load_catalog(folder)
    bounds = catalog.settings.instructor_bounds
    started = datetime(2026, 11, 30, 9, 10, tzinfo=UTC)
    once = extension_change(
        bounds, course_overrides(catalog.courses_by_id["ml101"]), "alice", "", started, 15
    )
    twice = extension_change(bounds, once, "alice", "", started, 15)
    assert twice.extension_for("alice", "", started) == timedelta(minutes=30)
    assert twice.extension_for("alice", "", started + timedelta(minutes=1)) == timedelta(0)
    with pytest.raises(OverrideRefused, match="at most 0 minutes more"):
        extension_change(bounds, twice, "alice", "", started, 1)


def test_changes_the_narrowed_bounds_no_longer_allow_are_left_out_and_reported(
    folder: Path,
) -> None:
    catalog = load_catalog(folder)
    bounds = catalog.settings.instructor_bounds
    course = catalog.courses_by_id["ml101"]
    save(
        folder,
        "ml101",
        timing_change(bounds, course_overrides(course), "lead_time", timedelta(minutes=25)),
    )
    assert load_catalog(folder).courses_by_id["ml101"].course_schedule.lead_time == timedelta(
        minutes=25
    )

    (folder / "catalog.yaml").write_text(CATALOG.replace("max: 30m", "max: 20m"))

    narrowed = load_catalog(folder)
    assert narrowed.courses_by_id["ml101"].course_schedule.lead_time == timedelta(minutes=10)
    assert narrowed.override_problems == ["ml101: the lead time of 25 min is outside the bounds"]


def test_gpuspawner_check_lists_the_instructors_changes(folder: Path, capsys) -> None:
    from gpuspawner.cli import main

    catalog = load_catalog(folder)
    course = catalog.courses_by_id["ml101"]
    bounds = catalog.settings.instructor_bounds
    cancelled = cancel_change(course, bounds, course_overrides(course), MONDAY, NOW)
    save(folder, "ml101", notice_change(bounds, cancelled, "Bring your charger."))

    assert main(["check", str(folder), "--from", "2026-11-30T00:00"]) == 0

    out = capsys.readouterr().out
    assert (
        "Instructors: changed on the course page: cancelled Mon 30 Nov 2026; "
        "notice 'Bring your charger.'" in out
    )
    assert "Mon 30 Nov 2026 10:15" not in out  # no longer among the week's classes
    assert "Wed 02 Dec 2026 10:15-12:00" in out


def test_an_extra_session_that_overlaps_a_class_or_another_is_refused_with_a_sentence(
    tmp_path: Path,
) -> None:
    # Given ML101 (Mon and Wed 10:15-12:00) whose instructors may add 3 extra sessions a week
    (tmp_path / "catalog.yaml").write_text(
        CATALOG.replace("extra_sessions_per_week: 1", "extra_sessions_per_week: 3")
    )
    catalog = load_catalog(tmp_path)
    course = catalog.courses_by_id["ml101"]
    bounds = catalog.settings.instructor_bounds
    none = course_overrides(course)

    # When an extra session would share time with Monday's class, it is refused (not merged
    # into one longer class without a word), saying which class and what to do
    over_monday = ExtraSession(day=MONDAY, start="11:00", end="13:00")
    with pytest.raises(OverrideRefused) as refused:
        extra_change(course, bounds, none, over_monday, NOW)
    assert refused.value.status == 409
    assert refused.value.message == (
        "The extra session Mon 30 Nov 2026 11:00-13:00 overlaps the class of Mon 30 Nov 2026 "
        "10:15-12:00 of Machine Learning 101; pick a time that ends by 10:15 or starts from "
        "12:00, or cancel that class first if the extra session replaces it."
    )
    # and the class stays as it was
    assert [(s.start.hour, s.end.hour) for s in course.course_schedule.classes_on(MONDAY)] == [
        (9, 11)  # 10:15-12:00 in Zurich, in UTC
    ]

    # But one that starts when the class ends is a session of its own
    after_class = ExtraSession(day=MONDAY, start="12:00", end="13:00")
    assert extra_change(course, bounds, none, after_class, NOW).extra == (after_class,)
    # and once Monday's class is cancelled, the extra session may take its place
    cancelled = cancel_change(course, bounds, none, MONDAY, NOW)
    assert extra_change(course, bounds, cancelled, over_monday, NOW).extra == (over_monday,)

    # When a second extra session would share time with the first, it is refused too
    tuesday = ExtraSession(day=date(2026, 12, 1), start="14:00", end="16:00")
    with_tuesday = extra_change(course, bounds, none, tuesday, NOW)
    later_tuesday = ExtraSession(day=date(2026, 12, 1), start="15:00", end="17:00")
    with pytest.raises(OverrideRefused) as refused:
        extra_change(course, bounds, with_tuesday, later_tuesday, NOW)
    assert refused.value.status == 409
    assert refused.value.message == (
        "The extra session Tue 01 Dec 2026 15:00-17:00 overlaps the extra session "
        "Tue 01 Dec 2026 14:00-16:00 of Machine Learning 101; pick a time that ends by "
        "14:00 or starts from 16:00, or remove that extra session first."
    )


NARROWED = (
    CATALOG.replace(
        """    instructors: [bob]
""",
        """    instructors: [bob]
    instructor_bounds:
      lead_time: {min: 5m, max: 15m}
      notice_length: 10
""",
    )
    + """\
  - id: cs102
    title: CS102
    instructors: [olga]
    enrolment: {users: [ben]}
    schedule:
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows:
        - {days: [Tue], start: "10:15", end: "12:00"}
"""
)


def test_a_course_narrows_the_catalogs_bounds_for_its_own_instructors(folder: Path) -> None:
    from gpuspawner.sessions.course_page import course_view

    # Given a lead time of 20 minutes bob chose while the catalog-wide 0-30 minutes applied
    catalog = load_catalog(folder)
    course = catalog.courses_by_id["ml101"]
    save(
        folder,
        "ml101",
        timing_change(
            bounds_for(catalog, course),
            course_overrides(course),
            "lead_time",
            timedelta(minutes=20),
        ),
    )
    # When the admins narrow ML101's lead time to 5-15 minutes and its notices to 10
    # characters, leaving CS102 with the catalog-wide bounds
    (folder / "catalog.yaml").write_text(NARROWED)
    catalog = load_catalog(folder)
    ml101, cs102 = catalog.courses_by_id["ml101"], catalog.courses_by_id["cs102"]

    # Then bob's 20 minutes are left out and reported, as when the catalog-wide ones narrow
    assert ml101.course_schedule.lead_time == timedelta(minutes=10)
    assert catalog.override_problems == ["ml101: the lead time of 20 min is outside the bounds"]
    # and his changes are refused with ML101's bounds, CS102's are not
    with pytest.raises(OverrideRefused, match="between 5 minutes and 15 minutes"):
        timing_change(
            bounds_for(catalog, ml101), course_overrides(ml101), "lead_time", timedelta(minutes=20)
        )
    with pytest.raises(OverrideRefused, match="at most 10 characters"):
        notice_change(bounds_for(catalog, ml101), course_overrides(ml101), "Bring chargers.")
    cs102_lead = timing_change(
        bounds_for(catalog, cs102), course_overrides(cs102), "lead_time", timedelta(minutes=20)
    )
    assert cs102_lead.lead_time == 20
    # and what ML101 does not narrow stays the catalog's (the extension limit, 30 minutes)
    assert bounds_for(catalog, ml101).extension == timedelta(minutes=30)
    # and the course page offers ML101's range and notice length, CS102 the catalog's
    views = [course_view(catalog, c, [], NOW, [], None) for c in (ml101, cs102)]
    from gpuspawner.sessions.hub_page import page_vars, templates

    page = templates.get_template("course_page.html").render(
        **page_vars("/hub/", {"name": "bob"}, "token"),
        views=views,
        bounds=catalog.settings.instructor_bounds,
        message="",
        problems=[],
        hub_prefix="/hub/",
        page_url="/services/course-sessions/courses",
        xsrf="token",
    )
    ml101_card, cs102_card = page.split('id="course-cs102"')
    assert "5–15 min" in ml101_card and "At most 10 characters" in ml101_card
    assert "0–30 min" in cs102_card and "At most 40 characters" in cs102_card


def test_a_course_cannot_widen_the_catalogs_bounds(folder: Path) -> None:
    # Given ML101 asking for a wider lead time, a grace the catalog does not bound, and
    # more extra sessions than the catalog allows
    (folder / "catalog.yaml").write_text(
        CATALOG.replace(
            """    instructors: [bob]
""",
            """    instructors: [bob]
    instructor_bounds:
      lead_time: {min: 0m, max: 45m}
      grace: {max: 10m}
      extra_sessions_per_week: 2
""",
        )
    )
    # Then the catalog is refused, each problem at its line, saying what to do
    with pytest.raises(CatalogError) as refused:
        load_catalog(folder)
    found = [(p.line, p.field, p.message) for p in refused.value.problems]
    assert found == [
        (
            16,
            "courses[0].instructor_bounds.extra_sessions_per_week",
            "2 extra sessions a week is more than the catalog-wide 1; lower it, or widen "
            "settings.instructor_bounds",
        ),
        (
            14,
            "courses[0].instructor_bounds.lead_time",
            "0 min to 45 min is not within the catalog-wide 0 min to 30 min; keep min and "
            "max within it, or widen settings.instructor_bounds",
        ),
        (
            15,
            "courses[0].instructor_bounds.grace",
            "settings.instructor_bounds do not let instructors change the grace, so a "
            "course cannot let them; remove grace here, or add it to "
            "settings.instructor_bounds",
        ),
    ]
