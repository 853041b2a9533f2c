"""Scenarios: a valid catalog, one file or a folder, becomes courses, grants and profiles."""

from __future__ import annotations

from datetime import date, time, timedelta
from fractions import Fraction

from gpuspawner.policy import load_catalog
from gpuspawner.policy.schedule import WeeklyWindow

from .conftest import NEW_YORK, ZURICH

ML101 = """\
    settings:
      timezone: Europe/Zurich
      lead_time: 15m
      grace: 5m
      max_gpu_servers_per_user: 2
    standing:
      - id: cpu
        title: CPU only
        default: true
    courses:
      - id: ml101
        title: Machine Learning 101
        instructors: [prof]
        enrolment: {users: [alice], groups: [ml101-students]}
        gpu: {fraction: 25%, memory: 6GiB, model: RTX 4090}
        max_gpu_servers: 20
        reserved_seats: 4
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows:
            - {days: [Mon, Wed], start: 10:15, end: "12:00"}
          no_class: [2024-04-01]
    research:
      - id: vision-lab
        title: Vision lab
        groups: vision
        expires: 2024-12-31
        gpu: {count: 1}
"""


def test_given_a_complete_file_then_every_section_is_read(catalog_from):
    catalog = catalog_from(ML101)

    course = catalog.courses_by_id["ml101"]
    assert course.share is not None
    assert course.share.fraction == Fraction(1, 4)
    assert course.share.memory_mib == 6 * 1024
    assert course.share.models == ("RTX 4090",)
    assert catalog.research_by_id["vision-lab"].share is not None
    assert catalog.research_by_id["vision-lab"].share.is_whole
    assert catalog.standing_by_id["cpu"].default
    assert catalog.settings.max_gpu_servers_per_user == 2


def test_given_settings_then_courses_inherit_zone_lead_time_and_grace(catalog_from):
    schedule = catalog_from(ML101).courses_by_id["ml101"].course_schedule

    assert schedule.timezone == ZURICH
    assert schedule.lead_time == timedelta(minutes=15)
    assert schedule.grace == timedelta(minutes=5)
    assert schedule.no_class == frozenset({date(2024, 4, 1)})


def test_given_an_unquoted_time_then_yaml_sexagesimal_is_read_as_a_clock(catalog_from):
    schedule = catalog_from(ML101).courses_by_id["ml101"].course_schedule

    # "start: 10:15" without quotes is the YAML 1.1 number 615; it still means 10:15.
    assert schedule.windows == (
        WeeklyWindow(0, time(10, 15), time(12)),
        WeeklyWindow(2, time(10, 15), time(12)),
    )


def test_given_a_course_with_its_own_zone_then_it_overrides_the_settings(catalog_from):
    catalog = catalog_from(
        """\
        settings: {timezone: Europe/Zurich}
        courses:
          - id: nyc
            title: New York course
            schedule:
              timezone: America/New_York
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Tue, start: "09:00", end: "10:00"}]
              lead_time: 0
        """
    )

    schedule = catalog.courses_by_id["nyc"].course_schedule
    assert schedule.timezone == NEW_YORK
    assert schedule.lead_time == timedelta(0)
    assert schedule.grace == timedelta(minutes=10)


def test_given_a_folder_then_its_files_are_merged_in_name_order(write_yaml, tmp_path):
    write_yaml(ML101, name="10-ml101.yaml", folder="catalog")
    write_yaml(
        """\
        courses:
          - id: vision
            title: Computer Vision
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Thu, start: "14:00", end: "16:00"}]
        """,
        name="20-vision.yml",
        folder="catalog",
    )
    (tmp_path / "catalog" / "README.txt").write_text("not a catalog")

    catalog = load_catalog(tmp_path / "catalog")

    assert [c.id for c in catalog.courses] == ["ml101", "vision"]
    assert catalog.sources["vision"].name == "20-vision.yml"
    # The folder's settings (from the first file) apply to the second file's course too.
    assert catalog.courses_by_id["vision"].course_schedule.timezone == ZURICH


def test_given_an_empty_file_beside_a_course_then_the_folder_has_the_course_and_default_settings(
    write_yaml, tmp_path
):
    write_yaml("# nothing yet\n", name="a-placeholder.yaml", folder="catalog")
    write_yaml(
        """\
        courses:
          - id: stats
            title: Statistics
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Tue, start: "14:00", end: "16:00"}]
        """,
        name="stats.yaml",
        folder="catalog",
    )

    catalog = load_catalog(tmp_path / "catalog")

    assert [c.id for c in catalog.courses] == ["stats"]
    assert catalog.research == [] and catalog.standing == []
    assert catalog.settings.timezone == "UTC"


def test_given_anchors_and_merge_keys_then_courses_share_a_schedule_and_override_parts(
    catalog_from,
):
    catalog = catalog_from(
        """\
        courses:
          - id: ml101
            title: Machine Learning 101
            schedule: &weekly
              timezone: Europe/Zurich
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
              lead_time: 15m
          - id: ml102
            title: Machine Learning 102
            schedule:
              <<: *weekly
              windows: [{day: Tue, start: "10:00", end: "12:00"}]
          - id: ml103
            title: Machine Learning 103
            schedule:
              <<: [{lead_time: 5m, grace: 1h}, *weekly]
        """
    )

    first, second, third = (c.course_schedule for c in catalog.courses)
    assert second.timezone == first.timezone == ZURICH
    assert second.windows == (WeeklyWindow(1, time(10), time(12)),)
    assert second.lead_time == timedelta(minutes=15)
    # The first merged block wins over the later one, as YAML defines.
    assert (third.lead_time, third.grace) == (timedelta(minutes=5), timedelta(hours=1))
    assert third.first_day == date(2024, 2, 19)


def test_given_enrolment_by_user_group_and_teaching_then_lookups_find_the_course(catalog_from):
    catalog = catalog_from(ML101)

    assert [c.id for c in catalog.courses_for("alice", set())[0]] == ["ml101"]
    assert [c.id for c in catalog.courses_for("bob", {"ml101-students"})[0]] == ["ml101"]
    assert catalog.courses_for("prof", set()) == ([catalog.courses_by_id["ml101"]], {"ml101"})
    assert catalog.courses_for("mallory", {"other"}) == ([], set())
    assert [g.id for g in catalog.research_for("rita", {"vision"})] == ["vision-lab"]


def test_given_group_members_then_students_of_lists_everyone_once(catalog_from):
    catalog = catalog_from(ML101)

    students = catalog.students_of(
        catalog.courses_by_id["ml101"], {"ml101-students": ["bob", "alice", "carol"]}
    )

    assert students == ["alice", "bob", "carol"]
