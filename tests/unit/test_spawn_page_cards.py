"""The spawn page a student meets: the class that is open comes first and is chosen,
times name their zone and carry the moment for the browser to tell in its own zone, the
stop time is on the card, and a person without a course is told why they see only CPU
profiles."""

from __future__ import annotations

import re
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

from gpuspawner.accounting.budgets import BudgetStatus
from gpuspawner.local_times import told_html
from gpuspawner.policy import UserIdentity, evaluate, load_catalog
from gpuspawner.spawners.spawn_page import ProfileCard, render_profile_cards
from tests.support.hub_pages import cards

ZURICH = ZoneInfo("Europe/Zurich")

CATALOG = """\
standing:
  - id: cpu
    title: CPU only
    default: true
courses:
  - id: ml101
    title: Machine Learning 101
    instructors: [teacher]
    enrolment: {users: [ana]}
    gpu: {fraction: 1/4}
    schedule:
      timezone: Europe/Zurich
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows:
        - {days: [Mon, Wed], start: "10:15", end: "12:00"}
      grace: 10m
"""


def page_for(tmp_path: Path, user: str, now: datetime) -> str:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    entitlements = evaluate(catalog, UserIdentity(user, frozenset(), False), now)
    return render_profile_cards([ProfileCard.build(e, None, []) for e in entitlements])


def checked(page: str) -> str | None:
    match = re.search(r'value="([^"]+)"\s+checked', page)
    return match.group(1) if match else None


def times(page: str) -> list[tuple[str, str]]:
    """Each moment the page shows: its ``datetime`` and its text before scripts run."""
    return re.findall(r'<time datetime="([^"]+)" data-local-time>([^<]*)</time>', page)


def card_ids(page: str) -> list[str]:
    return re.findall(r'data-profile="([^"]+)"', page)


def test_in_class_the_students_course_comes_first_and_is_chosen_with_its_stop_time(tmp_path):
    # Given Ana's class runs now, on a Wednesday in November (Zurich is on CET)
    in_class = datetime(2026, 11, 18, 10, 30, tzinfo=ZURICH)

    # When she opens the spawn page
    page = page_for(tmp_path, "ana", in_class)

    # Then her course is the first card and is chosen, not the default CPU profile
    assert card_ids(page) == ["ml101", "cpu"]
    assert checked(page) == "ml101"
    # And its card says until when it is open and when a server started now stops, each
    # in a named zone, as a moment the browser tells again in its reader's zone
    text = " ".join(cards(page)["ml101"]["text"].split())
    assert "Open until 12:00 CET" in text
    assert re.search(r"A server started now stops at <time [^>]*>12:10 CET</time>\.", page)
    assert times(page) == [
        ("2026-11-18T11:00:00+00:00", "12:00 CET"),
        ("2026-11-18T11:10:00+00:00", "12:10 CET"),
    ]


def test_outside_class_the_default_is_chosen_and_the_opening_time_names_its_zone(tmp_path):
    # Given the same course on the Thursday after, no class that day
    thursday = datetime(2026, 11, 19, 15, 0, tzinfo=ZURICH)

    # When Ana opens the spawn page
    page = page_for(tmp_path, "ana", thursday)

    # Then CPU only, which she can start, comes first and is chosen
    assert card_ids(page) == ["cpu", "ml101"]
    assert checked(page) == "cpu"
    # And the closed course's opening names its zone, with no stop time
    text = " ".join(cards(page)["ml101"]["text"].split())
    assert "Opens Mon 10:05 CET" in text
    assert times(page) == [("2026-11-23T09:05:00+00:00", "Mon 10:05 CET")]
    assert "stops at" not in text


def test_a_person_without_a_course_is_told_why_only_cpu_is_offered(tmp_path):
    # Given Bob takes no course and holds no research allocation
    page = page_for(tmp_path, "bob", datetime(2026, 11, 18, 10, 30, tzinfo=ZURICH))

    # Then the page offers CPU only and says why, with what to do
    assert card_ids(page) == ["cpu"]
    assert 'data-note="no-course"' in page
    assert "ask its instructor to check your enrolment" in page


def test_an_instructors_course_is_not_chosen_for_them_outside_class(tmp_path):
    # Given the instructor, who may start the course at any time of the term
    page = page_for(tmp_path, "teacher", datetime(2026, 11, 19, 15, 0, tzinfo=ZURICH))

    # Then the catalog's default stays chosen
    assert checked(page) == "cpu"
    assert 'data-note="no-course"' not in page


TRY_OUT = """\
settings:
  timezone: Europe/Zurich
  experimental_zone: {wipe_at: "03:00", warning: 2h}
standing:
  - id: try-out
    title: Try-out area
    zone: experimental
    storage:
      - {name: scratch, source: experimental, mount: /scratch}
"""


def test_the_daily_wipe_is_a_clock_time_naming_its_zone_for_the_readers_own(tmp_path):
    # Given a try-out profile in the experimental zone, wiped every day at 03:00 Zurich time
    (tmp_path / "catalog.yaml").write_text(TRY_OUT)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    now = datetime(2026, 11, 18, 9, 30, tzinfo=ZURICH)
    (entitlement,) = evaluate(catalog, UserIdentity("ana", frozenset(), False), now)
    # When its card is built
    card = ProfileCard.build(
        entitlement,
        None,
        [],
        local=True,
        experimental_zone=catalog.settings.experimental_zone,
        timezone="Europe/Zurich",
        now=now,
    )
    # Then the wipe's time names its zone ("03:00 CET", where it said "03:00
    # (Europe/Zurich)") and is a clock time the page tells in the reader's zone
    assert card.wipe == (
        "Experimental zone: ~/scratch is wiped every day at "
        '<time datetime="2026-11-18T02:00:00+00:00" data-local-time="clock">03:00 CET</time>'
        ", after a warning. Keep what matters in your home or a production profile."
    )
    assert 'data-local-time="clock">03:00 CET</time>' in render_profile_cards([card])


def test_the_budget_renews_at_a_moment_naming_its_zone_for_the_readers_own():
    # Given ana has 4.5 of her 6 GPU-hours of ML101 left, renewed Monday 00:00 Zurich time
    budget = BudgetStatus(
        scope="course",
        title="Machine Learning 101",
        budget=Fraction(6),
        used=Fraction(3, 2),
        begins=datetime(2026, 11, 16, tzinfo=ZURICH),
        ends=datetime(2026, 11, 23, tzinfo=ZURICH),
        zone=ZURICH,
    )
    # Then the spawn card's line tells the renewal as a moment with its zone's short name,
    # where it said "(renews Monday 00:00, Europe/Zurich)"
    assert told_html(budget.told(), budget.zone) == (
        "4.5 of your 6 GPU-hours left this week (renews "
        '<time datetime="2026-11-22T23:00:00+00:00" data-local-time>Mon 00:00 CET</time>)'
    )


def test_a_research_budget_ends_on_a_date_told_in_words():
    # Given a research allocation whose budget runs to the end of 30 June 2027
    budget = BudgetStatus(
        scope="research",
        title="Vision <lab>",
        budget=Fraction(500),
        used=Fraction(3),
        begins=None,
        ends=datetime(2027, 7, 1, tzinfo=ZURICH),
        zone=ZURICH,
    )
    # Then its line names the day, with no moment to tell again, its title escaped
    assert told_html(budget.told(), budget.zone) == (
        "497.0 of 500 GPU-hours left in Vision &lt;lab&gt; (until Wed 30 Jun 2027)"
    )
