"""Scenarios: what each person sees on the start page, and the sentence under each profile."""

from __future__ import annotations

from datetime import datetime

import pytest

from gpuspawner.policy import Phase, ProfileKind, Role, UserIdentity, evaluate
from gpuspawner.policy.entitlements import entitlement_for

from .conftest import at

CATALOG = """\
    settings:
      timezone: Europe/Zurich
    standing:
      - id: cpu
        title: CPU only
        default: true
      - id: gpu-club
        title: GPU club
        groups: [club]
        gpu: {fraction: 1/8}
    courses:
      - id: ml101
        title: Machine Learning 101
        instructors: [prof]
        enrolment: {users: [alice], groups: [ml101-students]}
        gpu: {fraction: 1/4}
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{days: [Mon, Wed], start: "10:00", end: "12:00"}]
      - id: autumn
        title: Autumn seminar
        enrolment: {users: [alice]}
        schedule:
          term: {first_day: 2024-09-16, last_day: 2024-12-20}
          windows: [{day: Wed, start: "14:00", end: "16:00"}]
    research:
      - id: vision-lab
        title: Vision lab
        users: [rita]
        groups: [vision]
        expires: 2024-12-31
        gpu: {count: 1}
      - id: summer-grant
        title: Summer grant
        users: [rita]
        starts: 2024-07-01
        expires: 2024-09-30
"""

ALICE = UserIdentity("alice")
BOB = UserIdentity("bob", frozenset({"ml101-students"}))
PROF = UserIdentity("prof")
RITA = UserIdentity("rita")
ROOT = UserIdentity("root", admin=True)


@pytest.fixture
def catalog(catalog_from):
    return catalog_from(CATALOG)


def seen(catalog, user, moment):
    return {e.profile.id: e for e in evaluate(catalog, user, at(moment))}


class TestStudents:
    def test_given_class_is_on_then_the_student_may_start_until_it_ends(self, catalog):
        ml101 = seen(catalog, ALICE, "2024-03-18 10:30")["ml101"]

        assert ml101.available
        assert ml101.status == "Open until 12:00"
        assert ml101.role is Role.STUDENT
        assert ml101.phase is Phase.OPEN
        assert ml101.session_end == at("2024-03-18 12:10")

    def test_given_the_lead_time_then_the_student_may_start_before_class(self, catalog):
        ml101 = seen(catalog, ALICE, "2024-03-18 09:52")["ml101"]

        assert ml101.available
        assert ml101.status == "Open now for the 10:00 class until 12:00"
        assert ml101.phase is Phase.OPENING

    def test_given_after_class_then_the_student_is_told_when_it_opens_again(self, catalog):
        ml101 = seen(catalog, ALICE, "2024-03-18 13:00")["ml101"]

        assert not ml101.available
        assert ml101.status == "Opens Wed 09:50"
        assert ml101.opens_at == at("2024-03-20 09:50")
        assert ml101.class_start == at("2024-03-20 10:00")

    def test_given_the_evening_before_class_then_it_opens_tomorrow(self, catalog):
        ml101 = seen(catalog, ALICE, "2024-03-19 20:00")["ml101"]

        assert ml101.status == "Opens tomorrow 09:50"

    def test_given_grace_then_running_servers_continue_but_no_new_ones_start(self, catalog):
        ml101 = seen(catalog, ALICE, "2024-03-18 12:05")["ml101"]

        assert not ml101.available
        assert ml101.phase is Phase.GRACE
        assert ml101.status == "Class ended at 12:00; opens again Wed 09:50"

    def test_given_a_group_member_then_the_course_is_offered_through_the_group(self, catalog):
        ml101 = seen(catalog, BOB, "2024-03-18 10:30")["ml101"]

        assert ml101.available and ml101.role is Role.STUDENT

    def test_given_someone_not_enrolled_then_the_course_is_not_shown(self, catalog):
        visible = seen(catalog, UserIdentity("mallory"), "2024-03-18 10:30")

        assert list(visible) == ["cpu"]

    def test_given_before_term_then_the_first_class_is_announced(self, catalog):
        autumn = seen(catalog, ALICE, "2024-08-01 12:00")["autumn"]

        assert not autumn.available
        assert autumn.status == "Opens Wed 18 Sep 13:50, the first class of the term"

    def test_given_after_term_then_no_more_classes(self, catalog):
        ml101 = seen(catalog, ALICE, "2024-06-03 10:30")["ml101"]

        assert not ml101.available
        assert ml101.status == "The term ended on Sat 01 Jun 2024; no more classes"


class TestInstructorsAndAdmins:
    def test_given_an_instructor_then_the_course_is_open_anytime_during_term(self, catalog):
        ml101 = seen(catalog, PROF, "2024-03-23 16:00")["ml101"]  # a Saturday

        assert ml101.available
        assert ml101.role is Role.INSTRUCTOR
        assert ml101.status == "Instructor access during the term; students from Mon 09:50"
        assert ml101.session_end is None

    def test_given_an_instructor_during_class_then_the_status_says_until_when(self, catalog):
        ml101 = seen(catalog, PROF, "2024-03-18 10:30")["ml101"]

        assert ml101.status == "Instructor access during the term; class until 12:00"

    def test_given_an_instructor_after_term_then_the_course_is_closed(self, catalog):
        ml101 = seen(catalog, PROF, "2024-07-01 10:30")["ml101"]

        assert not ml101.available

    def test_given_an_admin_then_every_course_is_shown_with_admin_access(self, catalog):
        visible = seen(catalog, ROOT, "2024-03-23 16:00")

        assert {"ml101", "autumn", "cpu", "gpu-club"} <= set(visible)
        assert visible["ml101"].role is Role.ADMIN
        assert visible["ml101"].available
        assert not visible["autumn"].available  # its term has not started


class TestResearchAllocations:
    def test_given_an_active_allocation_then_it_is_granted_until_its_expiry(self, catalog):
        grant = seen(catalog, RITA, "2024-03-18 10:30")["vision-lab"]

        assert grant.available
        assert grant.role is Role.GRANTEE
        assert grant.profile.kind is ProfileKind.RESEARCH
        assert grant.status == "Granted until Tue 31 Dec 2024"

    def test_given_the_expiry_day_then_the_allocation_still_works(self, catalog):
        assert seen(catalog, RITA, "2024-12-31 23:00")["vision-lab"].available

    def test_given_an_expired_allocation_then_the_status_says_expired_and_when(self, catalog):
        grant = seen(catalog, RITA, "2025-01-01 08:00")["vision-lab"]

        assert not grant.available
        assert grant.status.startswith("Expired on Tue 31 Dec 2024")
        assert "ask your research computing team to renew it" in grant.status

    def test_given_an_allocation_not_started_then_it_says_when_it_starts(self, catalog):
        grant = seen(catalog, RITA, "2024-03-18 10:30")["summer-grant"]

        assert not grant.available
        assert grant.status == "Starts on Mon 01 Jul 2024"
        assert grant.opens_at == at("2024-07-01 00:00")

    def test_given_a_group_grant_then_group_members_see_it(self, catalog):
        visible = seen(catalog, UserIdentity("vic", frozenset({"vision"})), "2024-03-18 10:30")

        assert visible["vision-lab"].available
        assert "summer-grant" not in visible


class TestStandingProfiles:
    def test_given_a_group_restricted_profile_then_outsiders_do_not_see_it(self, catalog):
        assert "gpu-club" not in seen(catalog, ALICE, "2024-03-18 10:30")

    def test_given_a_member_of_the_group_then_the_profile_is_always_available(self, catalog):
        club = seen(catalog, UserIdentity("carl", frozenset({"club"})), "2024-03-23 03:00")

        assert club["gpu-club"].available
        assert club["gpu-club"].status == "Always available"
        assert club["gpu-club"].role is Role.EVERYONE

    def test_given_an_admin_then_restricted_profiles_are_shown_as_admin_access(self, catalog):
        assert seen(catalog, ROOT, "2024-03-18 10:30")["gpu-club"].role is Role.ADMIN

    def test_given_the_default_profile_then_it_is_marked_default(self, catalog):
        assert seen(catalog, ALICE, "2024-03-18 10:30")["cpu"].profile.default


def test_given_a_user_with_everything_then_courses_come_first_then_research_then_standing(
    catalog,
):
    user = UserIdentity("alice", frozenset({"vision", "club"}))

    kinds = [e.profile.kind for e in evaluate(catalog, user, at("2024-03-18 10:30"))]

    assert kinds == sorted(
        kinds, key=[ProfileKind.COURSE, ProfileKind.RESEARCH, ProfileKind.STANDING].index
    )


@pytest.mark.parametrize("profile_id", ["no-such-profile", "autumn", None, ["ml101"], 7])
def test_given_a_profile_the_user_cannot_see_then_entitlement_for_is_none(catalog, profile_id):
    assert entitlement_for(catalog, BOB, profile_id, at("2024-03-18 10:30")) is None


def test_given_a_naive_datetime_then_evaluate_refuses_it(catalog):
    with pytest.raises(ValueError, match="aware"):
        evaluate(catalog, ALICE, datetime(2024, 3, 18, 10, 30))


@pytest.mark.parametrize("user", [ALICE, BOB, PROF, RITA, ROOT], ids=lambda u: u.name)
def test_given_pages_drawn_one_after_another_then_each_says_what_a_fresh_catalog_says(
    catalog, catalog_from, user
):
    # Given one catalog evaluated again and again through a week (lead time, class, grace,
    # closed, midnight, the term's end), as spawn pages are drawn one after another,
    moments = [
        "2024-03-17 23:50",
        "2024-03-18 00:10",
        "2024-03-18 09:55",
        "2024-03-18 10:30",
        "2024-03-18 12:05",
        "2024-03-18 12:30",
        "2024-03-18 10:30",
        "2024-03-20 11:00",
        "2024-06-01 11:00",
        "2024-06-02 09:00",
        "2024-03-18 10:30",
    ]
    for moment in moments:
        # when it is evaluated at each instant, then it says what a catalog never evaluated
        # before says at that instant.
        assert evaluate(catalog, user, at(moment)) == evaluate(
            catalog_from(CATALOG), user, at(moment)
        ), moment
