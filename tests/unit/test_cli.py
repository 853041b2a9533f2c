"""Scenarios: an instructor runs ``gpuspawner check`` on a catalog before handing it to the hub."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuspawner.cli import main
from gpuspawner.core import admission as grant
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import GPUDevice

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
          windows: [{day: Fri, start: "22:00", end: "01:00", overnight: true}]
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

    def test_given_an_empty_catalog_then_it_is_refused_with_exit_1(self, write_yaml, capsys):
        path = write_yaml("# the courses come later\n")

        status, out, err = run(capsys, "check", str(path))

        assert (status, out) == (1, "")
        assert err.startswith(f"{path}: holds no courses, standing profiles, research allocations")
        assert err.splitlines()[-1] == "1 error: fix the catalog and run gpuspawner check again."


def course_with(
    windows: str, *, extra: str = "description: ''", zone: str = "Europe/Zurich"
) -> str:
    """A one-course catalog; ``windows`` are the lines of its windows, from line 9."""
    lines = [
        "courses:",
        "  - id: ml101",
        "    title: Machine Learning 101",
        f"    {extra}",
        "    schedule:",
        f"      timezone: {zone}",
        "      term: {first_day: 2024-02-19, last_day: 2024-06-01}",
        "      windows:",
        *(f"        - {window}" for window in windows.splitlines()),
    ]
    return "\n".join(lines) + "\n"


BIG_SHARES = """\
    standing:
      - id: small
        title: Small share
        gpu: {memory: 12GiB}
      - id: big
        title: Big share
        gpu: {fraction: 1/2, memory: 40GiB}
    flavors:
      - id: huge
        title: Huge job
        gpu: {memory: 100GiB}
    """


def warnings_in(err: str) -> list[str]:
    return [line for line in err.splitlines() if ": warning: " in line]


class TestWarnings:
    def test_given_a_window_wholly_in_the_spring_gap_then_it_warns_with_line_and_exit_0(
        self, write_yaml, capsys
    ):
        path = write_yaml(
            course_with(
                '{day: Mon, start: "10:00", end: "12:00"}\n{day: Sun, start: "02:15", end: "02:45"}'
            )
        )

        status, out, err = run(capsys, "check", str(path), "--from", "2024-03-18")

        assert status == 0
        assert "ml101: Machine Learning 101" in out
        assert warnings_in(err) == [
            f"{path}:10: warning: courses[0].schedule.windows[1]: Sun 02:15-02:45 lies wholly in "
            "the daylight-saving gap of Europe/Zurich on Sun 31 Mar 2024 (clocks jump from "
            "02:00 to 03:00), so there is no class then; move the window out of 02:00-03:00, "
            "or add 2024-03-31 to no_class to make that plain"
        ]
        assert err.splitlines()[-1] == (
            "1 warning: the hub accepts this catalog, but check that this is what you mean."
        )

    def test_given_the_gap_day_outside_the_term_or_without_class_then_nothing_is_said(
        self, write_yaml, capsys
    ):
        window = '{day: Sun, start: "02:15", end: "02:45"}'
        before_the_change = write_yaml(
            course_with(window).replace("last_day: 2024-06-01", "last_day: 2024-03-30"),
            name="short-term.yaml",
        )
        no_class_then = write_yaml(
            course_with(window, extra="description: no class at Easter").replace(
                "    windows:", "    no_class: [2024-03-31]\n      windows:"
            ),
            name="no-class.yaml",
        )

        for path in (before_the_change, no_class_then):
            status, _, err = run(capsys, "check", str(path), "--from", "2024-03-18")
            assert (status, err) == (0, ""), path

    def test_given_a_window_starting_in_the_gap_then_it_notes_when_the_class_starts(
        self, write_yaml, capsys
    ):
        path = write_yaml(
            course_with('{day: Sun, start: "02:30", end: "04:00"}', zone="America/New_York")
        )

        status, _, err = run(capsys, "check", str(path), "--from", "2024-03-18")

        assert status == 0
        (warning,) = warnings_in(err)
        assert warning.startswith(f"{path}:9: warning: courses[0].schedule.windows[0]: ")
        assert (
            "Sun 02:30-04:00 starts in the daylight-saving gap of America/New_York on "
            "Sun 10 Mar 2024 (clocks jump from 02:00 to 03:00), so that class starts at 03:00"
        ) in warning

    def test_given_overlapping_windows_then_the_later_one_names_the_earlier(
        self, write_yaml, capsys
    ):
        path = write_yaml(
            course_with(
                '{days: [Mon, Wed], start: "10:00", end: "12:00"}\n'
                '{day: Wed, start: "12:00", end: "13:00"}\n'  # touching: fine
                '{day: Sun, start: "23:00", end: "01:00", overnight: true}\n'
                '{day: Mon, start: "00:30", end: "02:00"}\n'  # past midnight into Monday
                '{day: Wed, start: "11:00", end: "11:30"}'
            )
        )

        status, _, err = run(capsys, "check", str(path), "--from", "2024-03-18")

        assert status == 0
        merge = (
            "the hub merges overlapping windows into one class, so join them into one window "
            "or correct the times"
        )
        assert warnings_in(err) == [
            f"{path}:12: warning: courses[0].schedule.windows[3]: Mon 00:30-02:00 overlaps "
            f"Sun 23:00-01:00 (windows[2], line 11); {merge}",
            f"{path}:13: warning: courses[0].schedule.windows[4]: Wed 11:00-11:30 overlaps "
            f"Wed 10:00-12:00 (windows[0], line 9); {merge}",
        ]

    def test_given_zero_seats_then_it_warns_only_where_a_gpu_share_is_given(
        self, write_yaml, capsys
    ):
        path = write_yaml(
            """\
            settings:
              max_gpu_servers_per_user: 0
            research:
              - id: vision-lab
                title: Vision lab
                users: [rita]
                expires: 2024-12-31
                gpu: {count: 1}
                max_gpu_servers: 0
              - id: cpu-lab
                title: CPU lab
                users: [rita]
                expires: 2024-12-31
                max_gpu_servers: 0
            """
        )

        status, _, err = run(capsys, "check", str(path), "--from", "2024-03-18")

        assert status == 0
        assert warnings_in(err) == [
            f"{path}:2: warning: settings.max_gpu_servers_per_user: is 0, so only hub admins "
            "can start a profile with a GPU share; raise it to the number of GPU servers one "
            "person may run at once (1 is usual)",
            f"{path}:9: warning: research[0].max_gpu_servers: is 0, so nobody can start this "
            "research allocation with its GPU share; raise it to the number of GPU servers it "
            "may run at once, or remove it for no limit",
        ]

    def test_given_gpu_memory_then_shares_larger_than_the_largest_gpu_are_warned(
        self, write_yaml, capsys
    ):
        path = write_yaml(BIG_SHARES)

        _, _, without = run(capsys, "check", str(path))
        status, _, err = run(
            capsys, "check", str(path), "--gpu-memory", "24GiB", "--gpu-memory", "80GiB"
        )

        assert without == ""
        assert status == 0
        assert warnings_in(err) == [
            f"{path}:11: warning: flavors[0].gpu.memory: asks for 100 GiB of GPU memory, more "
            "than the 80 GiB of the largest GPU given with --gpu-memory, so it can never start; "
            "lower it, or check which GPUs the hub has"
        ]

    def test_given_gpu_memory_then_the_summary_names_the_sizes_compared_with(
        self, capsys, catalog_file
    ):
        _, out, _ = run(capsys, "check", str(catalog_file), "--gpu-memory", "80GiB")

        assert "GPU shares are compared with the GPUs given with --gpu-memory (80 GiB).\n" in out

    def test_given_the_hub_config_then_shares_are_compared_with_its_simulated_gpus(
        self, write_yaml, tmp_path, capsys
    ):
        # Given a catalog with a 40 GiB share, and the demo hub's config with two 24 GiB GPUs
        path = write_yaml(BIG_SHARES)
        config = tmp_path / "jupyterhub_config.py"
        config.write_text(
            "c = get_config()  # noqa\n"
            'c.GPUAdmission.simulated_gpus = [{"model": "H100", "memory": "80GiB"}]\n'
            "# the last setting wins, as when the hub runs the file\n"
            'c.GPUAdmission.simulated_gpus = [{"model": "RTX 4090", "memory": "24GiB", '
            '"count": 2}]\n'
        )
        # When the instructor checks it against the hub's config, without --gpu-memory
        status, out, err = run(capsys, "check", str(path), "--hub-config", str(config))
        # Then both shares larger than an RTX 4090 warn, naming the inventory used
        assert status == 0
        assert warnings_in(err) == [
            f"{path}:7: warning: standing[1].gpu.memory: asks for 40 GiB of GPU memory, more "
            f"than the 24 GiB of the largest of the simulated GPUs of "
            f"c.GPUAdmission.simulated_gpus in {config} (RTX 4090), so it can never start; "
            "lower it, or check which GPUs the hub has",
            f"{path}:11: warning: flavors[0].gpu.memory: asks for 100 GiB of GPU memory, more "
            f"than the 24 GiB of the largest of the simulated GPUs of "
            f"c.GPUAdmission.simulated_gpus in {config} (RTX 4090), so it can never start; "
            "lower it, or check which GPUs the hub has",
        ]
        assert (
            f"GPU shares are compared with the simulated GPUs of c.GPUAdmission.simulated_gpus "
            f"in {config}: GPU 0 (RTX 4090, 24 GiB, simulated), GPU 1 (RTX 4090, 24 GiB, "
            "simulated).\n"
        ) in out

    def test_given_a_hub_config_then_it_is_read_without_running_it(
        self, write_yaml, tmp_path, capsys
    ):
        # Given a hub config that does things as it loads (this one would fail)
        config = tmp_path / "jupyterhub_config.py"
        config.write_text(
            'raise SystemExit("the hub config ran")\n'
            'c.GPUAdmission.gpu_inventory = "simulated"\n'
            'c.GPUAdmission.simulated_gpus = [{"model": "L4", "memory": "24GiB"}]\n'
        )
        # When it is given to check, then only its GPU settings are read
        status, out, _ = run(
            capsys, "check", str(write_yaml(BIG_SHARES)), "--hub-config", str(config)
        )
        assert status == 0
        assert "GPU 0 (L4, 24 GiB, simulated)" in out

    def test_given_a_computed_gpu_setting_then_check_says_to_write_a_value(
        self, catalog_file, tmp_path, capsys
    ):
        config = tmp_path / "jupyterhub_config.py"
        config.write_text(
            "import os\n"
            'c.GPUAdmission.simulated_gpus = [{"model": os.environ["GPU"], "memory": "8GiB"}]\n'
        )

        status, _, err = run(capsys, "check", str(catalog_file), "--hub-config", str(config))

        assert status == 2
        assert err == (
            f"gpuspawner check: {config}:2: c.GPUAdmission.simulated_gpus is computed, not "
            "written as a value, so gpuspawner check cannot read it without running the file; "
            "write it as a literal, or give --gpu-memory SIZE instead\n"
        )

    def test_given_an_invalid_gpu_setting_then_check_says_so(self, catalog_file, tmp_path, capsys):
        config = tmp_path / "jupyterhub_config.py"
        config.write_text('c.GPUAdmission.gpu_inventory = "gpus"\n')

        status, _, err = run(capsys, "check", str(catalog_file), "--hub-config", str(config))

        assert status == 2
        assert f"{config}: c.GPUAdmission's GPU settings are not valid" in err
        assert "or give --gpu-memory SIZE instead" in err

    def test_given_no_gpu_flags_then_the_gpus_nvml_finds_here_are_used(
        self, write_yaml, capsys, monkeypatch
    ):
        # NVML stands in here (no GPU on this machine): it reports one H200, as on the hub
        # machine where this was tried; tests/gpu/ covers NVML itself on real hardware.
        h200 = GPUDevice(id="GPU-1", index=0, model="H200", memory_mib=143771)
        monkeypatch.setattr(GPUAdmission, "_inventory_cache", {})
        monkeypatch.setattr(grant, "discover_nvml_gpus", lambda: [h200])
        path = write_yaml(BIG_SHARES.replace("100GiB", "160GiB"))

        _, out, err = run(capsys, "check", str(path))

        assert warnings_in(err) == [
            f"{path}:11: warning: flavors[0].gpu.memory: asks for 160 GiB of GPU memory, more "
            "than the 140.4 GiB of the largest of the GPUs NVML finds on this machine (H200), "
            "so it can never start; lower it, or check which GPUs the hub has"
        ]
        assert (
            "GPU shares are compared with the GPUs NVML finds on this machine: GPU 0 (H200, "
            "140.4 GiB).\n"
        ) in out

    def test_given_no_gpu_flags_and_no_gpu_here_then_the_summary_says_nothing_was_compared(
        self, write_yaml, capsys, monkeypatch
    ):
        monkeypatch.setattr(GPUAdmission, "_inventory_cache", {})
        monkeypatch.setattr(grant, "discover_nvml_gpus", lambda: [])

        _, out, err = run(capsys, "check", str(write_yaml(BIG_SHARES)))

        assert warnings_in(err) == []
        assert (
            "GPU shares are not compared with any GPU: NVML finds none on this machine. Give "
            "--hub-config FILE (the hub's simulated GPUs) or --gpu-memory SIZE to compare them."
        ) in out

    def test_given_a_gpu_memory_without_a_unit_then_usage_exits_2(self, capsys, catalog_file):
        with pytest.raises(SystemExit) as exit_:
            main(["check", str(catalog_file), "--gpu-memory", "24"])

        assert exit_.value.code == 2
        assert "expected a size with a unit, such as 512MiB" in capsys.readouterr().err


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
