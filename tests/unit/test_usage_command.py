"""``gpuspawner usage`` and ``gpuspawner check``: what an admin sees of budgets and reports
when something is missing or wrong."""

from __future__ import annotations

import pytest

from gpuspawner.cli import main

CATALOG = """\
settings:
  timezone: Europe/Zurich
  terms:
    - {name: autumn-2026, first_day: 2026-09-14, last_day: 2026-12-18}
courses:
  - id: cs101
    title: CS101
    gpu: {fraction: 1/4}
    budget: {gpu_hours_per_student_per_week: 2.5}
    schedule:
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
"""


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'usage.sqlite'}"


def test_without_a_database_the_admin_is_told_where_to_find_its_url(capsys, monkeypatch):
    monkeypatch.delenv("GPUSPAWNER_USAGE_DB", raising=False)
    assert main(["usage", "--from", "2026-09-14", "--to", "2026-09-20"]) == 2
    assert "--db URL, or set $GPUSPAWNER_USAGE_DB" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments, sentence",
    [
        (
            ["--term", "spring-2027"],
            "There is no term or course 'spring-2027' in the catalog; "
            "use one of: autumn-2026, cs101.",
        ),
        (
            ["--from", "2026-09-20", "--to", "2026-09-14"],
            "--from 2026-09-20 comes after --to 2026-09-14.",
        ),
        (["--from", "2026-09-20"], "Give the range as --from DATE --to DATE, or --term NAME."),
        (
            ["--term", "cs101", "--from", "2026-09-14"],
            "Give either --term or --from/--to, not both.",
        ),
    ],
)
def test_a_wrong_range_is_answered_with_a_sentence(write_yaml, db, capsys, arguments, sentence):
    catalog = write_yaml(CATALOG)
    assert main(["usage", "--db", db, "--catalog", str(catalog), *arguments]) == 2
    assert capsys.readouterr().err.strip() == sentence


def test_an_empty_record_gives_a_report_with_only_its_header(write_yaml, db, capsys):
    catalog = write_yaml(CATALOG)
    status = main(
        ["usage", "--db", db, "--catalog", str(catalog), "--term", "cs101", "--by", "course"]
    )
    assert status == 0
    assert capsys.readouterr().out == (
        "course,from,to,server_gpu_hours,job_gpu_hours,gpu_hours,gpu_hours_exact,intervals,running,"
        "observed_hours,used_gpu_hours,mean_utilization_pct,device_wide_pct\n"
    )


def test_check_shows_a_course_budget_with_its_week(write_yaml, capsys):
    assert main(["check", str(write_yaml(CATALOG)), "--from", "2026-09-14T08:00"]) == 0
    assert (
        "Budget:      2.5 GPU-hours per student per week, from Monday 00:00 (Europe/Zurich)"
        in capsys.readouterr().out
    )
