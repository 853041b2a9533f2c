"""Scenarios: an instructor runs ``gpuspawner check`` on a catalog before handing it to the hub."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuspawner.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]

CATALOG = """\
    settings:
      timezone: Europe/Zurich
    standing:
      - id: cpu
        title: CPU only
        default: true
      - id: gpu-club
        title: GPU club
        groups: [club, staff]
        gpu: {fraction: 1/8}
    courses:
      - id: ml101
        title: Machine Learning 101
        instructors: [prof]
        enrolment: {users: [alice], groups: [ml101-students]}
        gpu: {fraction: 1/4, memory: 6GiB}
        max_gpu_servers: 40
        reserved_seats: 4
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{days: [Mon, Wed], start: "10:00", end: "12:00"}]
          no_class: [2024-03-20]
          lead_time: 15m
          grace: 5m
          prewarm: 30m
      - id: night-lab
        title: Night lab
        enrolment: {users: [owl]}
        schedule:
          timezone: America/New_York
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Fri, start: "22:00", end: "01:00"}]
    research:
      - id: vision-lab
        title: Vision lab
        users: [rita]
        groups: [vision]
        expires: 2024-12-31
        gpu: {count: 1}
        max_gpu_servers: 1
      - id: old-grant
        title: Old grant
        users: [rita]
        expires: 2023-12-31
"""


@pytest.fixture
def catalog_file(write_yaml) -> Path:
    return write_yaml(CATALOG)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


class TestSummary:
    def test_given_a_valid_catalog_then_each_course_is_summarised_with_exit_0(
        self, capsys, catalog_file
    ):
        status, out, err = run(capsys, "check", str(catalog_file), "--from", "2024-03-18")

        assert (status, err) == (0, "")
        assert f"{catalog_file} is a valid catalog: 2 courses, 2 research allocations, " in out
        assert (
            "Classes are listed for the 7 days from Mon 18 Mar 2024 00:00 (Europe/Zurich)." in out
        )
        assert "  ml101: Machine Learning 101\n" in out
        assert "    Time zone:   Europe/Zurich\n" in out
        assert "    GPU share:   1/4 of a GPU, 6 GiB\n" in out
        assert "    Seats:       40 GPU servers at most, 4 reserved during class\n" in out
        assert "    Timing:      lead time 15 min, grace 5 min, pre-warm 30 min\n" in out
        assert "no class on Wed 20 Mar 2024" in out

    def test_given_a_week_then_every_class_shows_when_students_may_start_and_servers_stop(
        self, capsys, catalog_file
    ):
        _, out, _ = run(capsys, "check", str(catalog_file), "--from", "2024-03-18")

        classes = [line.strip() for line in out.splitlines() if "students may start" in line]
        assert classes == [
            # Wed 20 Mar has no class.
            "Mon 18 Mar 2024 10:00-12:00 (students may start from 09:45, "
            "servers reclaimed at 12:05)",
            # The night lab runs past midnight, in New York time.
            "Fri 22 Mar 2024 22:00-01:00 (+1 day) (students may start from 21:50, "
            "servers reclaimed at 01:10)",
        ]

    def test_given_a_week_across_the_clock_change_then_classes_keep_their_local_time(
        self, capsys, catalog_file
    ):
        _, out, _ = run(capsys, "check", str(catalog_file), "--from", "2024-03-30T12:00")

        assert "Mon 01 Apr 2024 10:00-12:00 (students may start from 09:45" in out
        assert "Wed 03 Apr 2024 10:00-12:00" in out

    def test_given_an_offset_or_z_then_the_moment_is_that_instant(self, capsys, catalog_file):
        _, out, _ = run(capsys, "check", str(catalog_file), "--from", "2024-03-18T09:00Z")

        assert "7 days from Mon 18 Mar 2024 10:00 (Europe/Zurich)" in out

    def test_given_a_week_without_classes_then_the_next_class_is_named(self, write_yaml, capsys):
        path = write_yaml(
            """\
            courses:
              - id: autumn
                title: Autumn seminar
                schedule:
                  term: {first_day: 2024-09-16, last_day: 2024-12-20}
                  windows: [{day: Wed, start: "14:00", end: "16:00"}]
            """
        )

        _, out, _ = run(capsys, "check", str(path), "--from", "2024-08-01")

        assert "Classes:     none in these 7 days; the next is Wed 18 Sep 2024 14:00-16:00" in out
        assert "GPU share:   none (CPU only)" in out

    def test_given_a_moment_after_term_then_the_summary_says_the_term_ended(
        self, capsys, catalog_file
    ):
        _, out, _ = run(capsys, "check", str(catalog_file), "--from", "2024-07-01")

        assert "Classes:     none; the term ended on Sat 01 Jun 2024" in out

    def test_given_research_and_standing_profiles_then_expiry_and_audience_are_shown(
        self, capsys, catalog_file
    ):
        _, out, _ = run(capsys, "check", str(catalog_file), "--from", "2024-03-18")

        research = out.split("Research allocations")[1].split("Standing profiles")[0]
        standing = out.split("Standing profiles")[1]
        assert "vision-lab: Vision lab" in research
        assert "Granted to:  users rita; groups vision" in research
        assert "GPU share:   1 whole GPU" in research
        assert "Valid:       until Tue 31 Dec 2024 (its last day)" in research
        assert "Valid:       expired on Sun 31 Dec 2023" in research
        assert "cpu: CPU only (the default)\n    Open to:     everyone" in standing
        assert "Open to:     groups club, staff, and admins" in standing

    def test_given_a_folder_then_each_course_names_its_file(self, write_yaml, capsys, tmp_path):
        course_file = write_yaml(CATALOG, name="courses.yaml", folder="catalog")

        status, out, _ = run(capsys, "check", str(tmp_path / "catalog"), "--from", "2024-03-18")

        assert status == 0
        assert f"    File:        {course_file}\n" in out


class TestErrors:
    def test_given_a_broken_catalog_then_each_problem_is_printed_with_file_and_line_and_exit_1(
        self, write_yaml, capsys
    ):
        path = write_yaml(
            """\
            courses:
              - id: ml101
                title: Machine Learning
                reserved_seats: 2
                gpu:
                  fraction: 1.5
                schedule:
                  term: {first_day: 2024-02-19, last_day: 2024-06-01}
                  windows: [{day: Funday, start: "10:00", end: "12:00"}]
            """
        )

        status, out, err = run(capsys, "check", str(path))

        assert status == 1
        assert out == ""
        lines = err.splitlines()
        assert lines[0].startswith(f"{path}:6: courses[0].gpu.fraction: expected a fraction")
        assert lines[1].startswith(f"{path}:9: courses[0].schedule.windows[0].day: expected a day")
        assert lines[-1] == "2 errors: fix the catalog and run gpuspawner check again."

    def test_given_a_missing_file_then_the_error_says_so(self, capsys, tmp_path):
        status, _, err = run(capsys, "check", str(tmp_path / "nope.yaml"))

        assert status == 1
        assert "nope.yaml: does not exist; give a catalog file or folder" in err
        assert err.splitlines()[-1] == "1 error: fix the catalog and run gpuspawner check again."


class TestUserView:
    def test_given_a_student_during_class_then_the_course_is_available(self, capsys, catalog_file):
        status, out, _ = run(
            capsys, "check", str(catalog_file), "--user", "alice", "--at", "2024-03-18T10:30"
        )

        assert status == 0
        assert out.startswith("Profiles for alice at Mon 18 Mar 2024 10:30 (Europe/Zurich):")
        assert (
            "  [available] ml101: Machine Learning 101 (course, student)\n"
            "              Open until 12:00\n"
            "              GPU share: 1/4 of a GPU, 6 GiB\n"
        ) in out
        assert "[available] cpu: CPU only (standing, everyone, default)" in out
        assert "gpu-club" not in out

    def test_given_a_student_after_class_then_the_course_says_when_it_opens(
        self, capsys, catalog_file
    ):
        _, out, _ = run(
            capsys,
            "check",
            str(catalog_file),
            "--user",
            "bob",
            "--groups",
            "ml101-students,club",
            "--at",
            "2024-03-18T13:00",
        )

        assert out.startswith("Profiles for bob (groups club, ml101-students) at Mon 18 Mar 2024")
        # Wednesday is a day without class, so the next opening is the following Monday.
        assert "  [not now]   ml101: Machine Learning 101 (course, student)\n" in out
        assert "              Opens Mon 25 Mar 09:45\n" in out
        assert "[available] gpu-club: GPU club (standing, everyone)" in out

    def test_given_an_admin_then_every_course_is_listed(self, capsys, catalog_file):
        _, out, _ = run(
            capsys,
            "check",
            str(catalog_file),
            "--user",
            "root",
            "--admin",
            "--at",
            "2024-03-23T16:00",
        )

        assert "Profiles for root (admin) at Sat 23 Mar 2024 16:00" in out
        assert "ml101: Machine Learning 101 (course, admin)" in out
        assert "night-lab: Night lab (course, admin)" in out
        assert "gpu-club: GPU club (standing, admin)" in out

    def test_given_a_researcher_then_active_and_expired_grants_are_explained(
        self, capsys, catalog_file
    ):
        _, out, _ = run(
            capsys, "check", str(catalog_file), "--user", "rita", "--at", "2024-03-18T10:30"
        )

        assert "[available] vision-lab: Vision lab (research, grantee)" in out
        assert "[not now]   old-grant: Old grant (research, grantee)" in out
        assert "Expired on Sun 31 Dec 2023; ask your research computing team to renew it" in out

    def test_given_a_user_in_a_catalog_without_profiles_for_them_then_it_says_so(
        self, write_yaml, capsys
    ):
        path = write_yaml(
            """\
            research:
              - id: vision-lab
                title: Vision lab
                users: [rita]
                expires: 2024-12-31
            """
        )

        status, out, _ = run(capsys, "check", str(path), "--user", "alice", "--at", "2024-03-18")

        assert status == 0
        assert "No profiles: alice is not enrolled in any course or allocation." in out


class TestUsage:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["--groups", "a"], "--groups describes a user; give --user NAME with it"),
            (["--admin"], "--admin describes a user"),
            (["--at", "2024-03-18"], "--at describes a user"),
            (["--user", "alice", "--from", "2024-03-18"], "with --user, use --at"),
            (["--from", "next monday"], "expected a date or date and time such as 2024-03-18"),
        ],
    )
    def test_given_options_that_do_not_fit_together_then_usage_exits_2(
        self, capsys, catalog_file, argv, message
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["check", str(catalog_file), *argv])

        assert exit_.value.code == 2
        assert message in capsys.readouterr().err

    def test_given_no_command_then_help_is_shown_with_exit_2(self, capsys):
        assert main([]) == 2
        assert "check" in capsys.readouterr().err


def test_given_python_dash_m_then_the_same_command_runs(catalog_file):
    result = subprocess.run(
        [sys.executable, "-m", "gpuspawner", "check", str(catalog_file), "--from", "2024-03-18"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "ml101: Machine Learning 101" in result.stdout
