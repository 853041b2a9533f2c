"""The home page's description of a running server, from its grant or, after a hub
restart, from its saved allocation alone."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

from gpuspawner.policy import Allocation, load_catalog
from gpuspawner.spawners.home_page import running_server

CATALOG = """\
settings: {timezone: Europe/Zurich}
standing:
  - {id: cpu, title: CPU only, default: true}
research:
  - {id: vision, title: Vision lab, users: [rita], expires: 2027-06-30, gpu: {count: 1}}
courses:
  - id: ml101
    title: Machine Learning 101
    enrolment: {users: [ana]}
    gpu: {fraction: 1/4}
    schedule:
      timezone: America/New_York
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows: [{days: [Mon], start: "10:15", end: "12:00"}]
"""


def allocation(fraction: str, devices: tuple[str, ...] = ("sim-0",)) -> Allocation:
    return Allocation("server:ana/", "ana", "ml101", "ml101", devices, Fraction(fraction), 0, 0)


def test_after_a_restart_a_course_server_is_told_from_its_saved_allocation(tmp_path):
    (tmp_path / "c.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "c.yaml")
    end = datetime(2026, 11, 23, 17, 10, tzinfo=UTC)

    running = running_server(
        catalog, "ml101", allocation=allocation("1/4"), share_description=None, session_end=end
    )

    # The course's own zone, not the catalog's, and a share in words
    assert (running.title, running.share, running.course) == (
        "Machine Learning 101",
        "1/4 of a GPU",
        True,
    )
    assert running.stops == "12:10 EST"
    assert running.stops_iso == "2026-11-23T17:10:00+00:00"


def test_research_and_standing_servers_have_no_course_to_change_and_no_stop(tmp_path):
    (tmp_path / "c.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "c.yaml")

    research = running_server(
        catalog,
        "vision",
        allocation=allocation("1", ("sim-0",)),
        share_description="1 whole RTX 4090",
        session_end=None,
    )
    cpu = running_server(catalog, "cpu", allocation=None, share_description=None, session_end=None)

    assert (research.title, research.share, research.course, research.stops) == (
        "Vision lab",
        "1 whole RTX 4090",
        False,
        "",
    )
    assert (cpu.title, cpu.share, cpu.course) == ("CPU only", "No GPU", False)


def test_a_profile_gone_from_the_catalog_is_told_by_its_id():
    running = running_server(
        None, "old-course", allocation=allocation("1/2"), share_description=None, session_end=None
    )
    assert (running.title, running.share) == ("old-course", "1/2 of a GPU")
