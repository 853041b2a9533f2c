"""What the sessions service decides to do, from the catalog and the hub's user models."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuspawner.policy.prewarm import verify_prewarm_token
from gpuspawner.sessions.plan import ActionKind, plan_actions, session_of_server

from .scenario import ML101_CLASS_START, SECRET, hub_server, hub_user, utc

LAB_GROUP = {"ml101-lab": ["erin", "alice"]}


def plan(catalog, users, now, *, tried=None, groups=LAB_GROUP, secret=SECRET):
    return plan_actions(catalog, users, groups, now, secret, tried if tried is not None else set())


def kinds(actions):
    return [(a.kind, a.user, a.server, a.course) for a in actions]


def class_roster(started_servers=()):
    """ml101's students and instructor as hub users; ``dave`` never logged in."""
    servers = dict(started_servers)
    return [
        hub_user("alice", *servers.get("alice", ())),
        hub_user("bob", hub_server("bob", profile="cpu", started=utc(3, 8, 0))),
        hub_user(
            "carol", hub_server("carol", profile=None, started=utc(3, 8, 29), pending="spawn")
        ),
        hub_user("erin"),
        hub_user("prof"),
        hub_user("root", admin=True),
    ]


# -- pre-warming ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "now",
    [utc(3, 8, 30), utc(3, 8, 40), utc(3, 8, 55), utc(3, 8, 59, 59)],
    ids=["period-begins", "before-lead-time", "in-lead-time", "last-second"],
)
def test_prewarm_starts_only_students_without_a_server(catalog, now):
    # Given ml101's pre-warming period (from 30 min before the 10:00 class),
    # where bob runs a CPU server and carol's server is starting,
    # when the service plans,
    actions = plan(catalog, class_roster(), now)

    # then alice and erin (enrolled through the ml101-lab group) get a server started,
    # and dave, who has no hub account yet, is reported and skipped.
    assert kinds(actions) == [
        (ActionKind.PREWARM, "alice", "", "ml101"),
        (ActionKind.UNKNOWN_USER, "dave", "", "ml101"),
        (ActionKind.PREWARM, "erin", "", "ml101"),
    ]
    for action in actions:
        if action.kind is ActionKind.PREWARM:
            # The spawner accepts the token for exactly this person, server, course and class.
            assert action.options["profile"] == "ml101"
            token = action.options["prewarm_token"]
            assert verify_prewarm_token(token, SECRET, action.user, "", "ml101", ML101_CLASS_START)
            assert not verify_prewarm_token(token, SECRET, "bob", "", "ml101", ML101_CLASS_START)
            assert not verify_prewarm_token(
                token, SECRET, action.user, "", "ml101", ML101_CLASS_START + timedelta(days=7)
            )


@pytest.mark.parametrize(
    "now",
    [utc(2, 8, 40), utc(3, 8, 29, 59), utc(3, 9, 0), utc(3, 10, 0), utc(10, 8, 20)],
    ids=["sunday", "just-before-period", "class-started", "during-class", "next-week-early"],
)
def test_nothing_is_prewarmed_outside_the_period(catalog, now):
    assert plan(catalog, class_roster(), now) == []


def test_enrolled_instructors_and_admins_are_not_prewarmed(catalog):
    # Their servers are never reclaimed, so a pre-warmed one would hold a GPU for good.
    groups = {"ml101-lab": ["prof", "root"]}
    users = [hub_user("prof"), hub_user("root", admin=True)]
    assert plan(catalog, users, utc(3, 8, 40), groups=groups, tried=everyone_else()) == []


def everyone_else():
    return {
        ("prewarm", name, "ml101", ML101_CLASS_START) for name in "alice bob carol dave".split()
    }


def test_nothing_is_prewarmed_without_the_shared_secret(catalog):
    assert plan(catalog, class_roster(), utc(3, 8, 40), secret=None) == []


def test_a_prewarm_already_tried_for_this_class_is_not_repeated(catalog):
    # Given the hub refused alice's pre-warm and dave was reported, for this class,
    tried = {
        ("prewarm", "alice", "ml101", ML101_CLASS_START),
        ("prewarm", "dave", "ml101", ML101_CLASS_START),
    }
    # when the next round plans, only erin remains;
    actions = plan(catalog, class_roster(), utc(3, 8, 41), tried=tried)
    assert kinds(actions) == [(ActionKind.PREWARM, "erin", "", "ml101")]
    # and next week's class is a new attempt for everyone.
    actions = plan(catalog, class_roster(), utc(10, 8, 41), tried=tried)
    assert {a.user for a in actions} == {"alice", "dave", "erin"}


def test_the_action_key_is_what_marks_a_prewarm_as_tried(catalog):
    first = plan(catalog, class_roster(), utc(3, 8, 40))
    tried = {action.key for action in first}
    assert plan(catalog, class_roster(), utc(3, 8, 45), tried=tried) == []


# -- reclaiming and warning -----------------------------------------------------------


DURING_MONDAY_CLASS = utc(3, 9, 5)


def student_in_class(name="alice", started=DURING_MONDAY_CLASS, profile="ml101", server=""):
    return hub_user(name, hub_server(name, server, profile=profile, started=started))


def test_a_student_server_is_reclaimed_at_class_end_plus_grace(catalog):
    # Given alice started her ml101 server during class (10:05 local),
    users = [student_in_class(), student_in_class("bob", server="project")]
    # when class (ends 11:00 UTC) and grace (15 min) are over,
    actions = plan(catalog, users, utc(3, 11, 15))
    # then both her default server and bob's named one are stopped.
    assert kinds(actions) == [
        (ActionKind.RECLAIM, "alice", "", "ml101"),
        (ActionKind.RECLAIM, "bob", "project", "ml101"),
    ]
    assert "ended at 12:00" in actions[0].detail


@pytest.mark.parametrize("now", [utc(3, 10, 30), utc(3, 11, 0), utc(3, 11, 4, 59)])
def test_no_reclaim_during_class_or_grace(catalog, now):
    assert plan(catalog, [student_in_class()], now) == []


def test_instructor_and_admin_servers_are_never_reclaimed(catalog):
    users = [
        hub_user(
            "prof",
            hub_server("prof", profile="ml101", started=utc(3, 9, 5)),
            # started on Sunday, outside any class: still theirs to keep
            hub_server("prof", "prep", profile="ml101", started=utc(2, 15, 0)),
        ),
        hub_user("root", hub_server("root", profile="ml101", started=utc(3, 9, 5)), admin=True),
    ]
    assert plan(catalog, users, utc(3, 12, 0)) == []
    assert plan(catalog, users, utc(5, 12, 0)) == []


def test_servers_of_other_profiles_are_left_alone(catalog):
    users = [
        student_in_class(profile="cpu"),
        student_in_class("bob", profile=None),
        student_in_class("carol", profile="no-such-course"),
        hub_user(
            "dave",
            {
                **hub_server("dave", profile=None, started=utc(3, 9, 0)),
                "user_options": {"profile": ["ml101"]},
            },
        ),
    ]
    assert plan(catalog, users, utc(3, 12, 0)) == []


def test_a_server_from_an_earlier_session_is_reclaimed_while_the_next_is_open(catalog):
    # Given frank started vision during Tuesday's first session (09:00-11:00 UTC),
    # and gina during the second (opens 11:20 UTC),
    users = [
        student_in_class("frank", started=utc(4, 9, 10), profile="vision"),
        student_in_class("gina", started=utc(4, 11, 21), profile="vision"),
    ]
    # when the second session is open,
    actions = plan(catalog, users, utc(4, 11, 25))
    # then frank's server, which belongs to the first, is stopped; gina's is not.
    assert kinds(actions) == [(ActionKind.RECLAIM, "frank", "", "vision")]


def test_a_prewarmed_server_is_kept_before_its_class(catalog):
    # A server pre-warmed at 08:35 UTC (before the lead time, the phase is still closed)
    # belongs to the coming class and lives until 11:15.
    users = [student_in_class(started=utc(3, 8, 35))]
    assert [a for a in plan(catalog, users, utc(3, 8, 40)) if a.user == "alice"] == []
    assert plan(catalog, users, utc(3, 10, 0)) == []
    assert kinds(plan(catalog, users, utc(3, 11, 15))) == [
        (ActionKind.RECLAIM, "alice", "", "ml101")
    ]


def test_a_start_stamped_a_moment_before_opening_belongs_to_that_class(catalog):
    # The hub stamps `started` just before the spawner admits the start at 08:50:00.
    course = catalog.courses_by_id["vision"]
    session = session_of_server(course, utc(4, 8, 49, 59.5))
    assert session is not None and session.start == utc(4, 9, 0)


def test_a_server_started_outside_any_class_is_reclaimed(catalog):
    users = [student_in_class(started=utc(3, 7, 0))]
    actions = plan(catalog, users, utc(3, 7, 1))
    assert kinds(actions) == [(ActionKind.RECLAIM, "alice", "", "ml101")]
    assert "outside any class" in actions[0].detail


def test_a_server_already_stopping_is_left_to_stop(catalog):
    server = hub_server("alice", profile="ml101", started=utc(3, 9, 5), pending="stop")
    assert plan(catalog, [hub_user("alice", server)], utc(3, 12, 0)) == []


def test_warning_once_in_the_last_ten_minutes(catalog):
    users = [student_in_class()]
    # Given alice's server is reclaimed at 11:15 UTC (12:15 local),
    # nothing is said 11 minutes before,
    assert plan(catalog, users, utc(3, 11, 4)) == []
    # a warning is planned 9 minutes before,
    actions = plan(catalog, users, utc(3, 11, 6))
    assert kinds(actions) == [(ActionKind.WARN, "alice", "", "ml101")]
    assert "stopped at 12:15, in 9 min" in actions[0].detail
    # and once recorded, not again in this session,
    tried = {actions[0].key}
    assert plan(catalog, users, utc(3, 11, 10), tried=tried) == []
    # but the same server of a later session is warned again.
    next_week = [student_in_class(started=utc(10, 9, 5))]
    assert len(plan(catalog, next_week, utc(10, 11, 6), tried=tried)) == 1


def test_stops_come_before_starts(catalog):
    # Given frank's vision server started on Sunday, outside any class, is reclaimed in
    # the same round as ml101 pre-warms, the stop is done first (it frees a GPU).
    users = class_roster() + [student_in_class("frank", started=utc(2, 9, 0), profile="vision")]
    actions = plan(catalog, users, utc(3, 8, 40))
    assert actions[0].kind is ActionKind.RECLAIM
    assert {a.kind for a in actions[1:]} <= {ActionKind.PREWARM, ActionKind.UNKNOWN_USER}


def test_a_student_in_two_prewarming_courses_gets_one_start(catalog_path, tmp_path):
    from gpuspawner.policy import load_catalog

    text = catalog_path.read_text().replace(
        "  - id: vision\n",
        "  - id: ml101-tutorial\n"
        "    title: ML tutorial\n"
        "    enrolment: {users: [alice]}\n"
        "    schedule:\n"
        "      term: {first_day: 2025-02-17, last_day: 2025-06-01}\n"
        '      windows: [{day: Mon, start: "10:00", end: "11:00"}]\n'
        "      prewarm: 30m\n"
        "  - id: vision\n",
    )
    path = tmp_path / "two.yaml"
    path.write_text(text)
    actions = plan(load_catalog(path), [hub_user("alice")], utc(3, 8, 40), groups={})
    assert [(a.kind, a.course) for a in actions if a.user == "alice"] == [
        (ActionKind.PREWARM, "ml101")
    ]


def test_plan_needs_an_aware_time(catalog):
    with pytest.raises(ValueError):
        plan(catalog, [], utc(3, 8, 40).replace(tzinfo=None))


def test_a_student_without_an_account_is_noted_once_then_prewarmed_after_first_login(catalog):
    # Given dave, enrolled but never logged in, noted as skipped in the first round
    tried: set = set()
    first = plan(catalog, class_roster(), utc(3, 8, 30), tried=tried)
    noted = [a for a in first if a.kind is ActionKind.UNKNOWN_USER]
    assert [a.user for a in noted] == ["dave"]
    tried.update(a.key for a in first)

    # When the next round runs he is not reported again
    again = plan(catalog, class_roster(), utc(3, 8, 31), tried=tried)
    assert "dave" not in [a.user for a in again]

    # Then once he has logged in (his account exists) his server is pre-warmed
    later = plan(catalog, class_roster() + [hub_user("dave")], utc(3, 8, 35), tried=tried)
    assert (ActionKind.PREWARM, "dave", "", "ml101") in kinds(later)
