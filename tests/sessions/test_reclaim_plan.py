"""GPU-aware reclaim, decided from the catalog, the hub's models and what the service saw."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuspawner.policy import CatalogError, load_catalog
from gpuspawner.sessions.plan import ActionKind, class_start_of, plan_actions
from gpuspawner.sessions.reclaim import ReclaimReason, observe, server_key
from gpuspawner.sessions.service import KeepRefused, SessionsService, user_warnings

from .reclaim_scenario import RECLAIM_CATALOG_YAML, gpu_server
from .scenario import ML101_CLASS_START, hub_user, utc


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(RECLAIM_CATALOG_YAML)
    return load_catalog(path)


def watch_of(watches, user):
    name = user["name"]
    return watches[server_key(name, "", user["servers"][""])]


def see(catalog, watches, users, now, utilisation):
    """One round's observation: ``utilisation`` by username (their default server)."""
    levels = {f"server:{name}/": level for name, level in utilisation.items()}
    observe(watches, users, levels, catalog, now, lambda server: class_start_of(catalog, server))


def plan(catalog, users, now, watches, tried=None):
    return plan_actions(catalog, users, {}, now, None, tried or set(), watches)


def summary(actions):
    return [(a.kind, a.user, a.reason) for a in actions]


# -- idle ------------------------------------------------------------------------------


def test_an_idle_course_server_is_warned_then_reclaimed_after_the_warning_period(catalog):
    # Given alice's ml101 server (1/4 GPU), whose GPU was last busy at 09:05 UTC,
    alice = hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55)))
    watches: dict = {}
    see(catalog, watches, [alice], utc(3, 9, 0), {"alice": 90.0})
    see(catalog, watches, [alice], utc(3, 9, 5), {"alice": 40.0})
    see(catalog, watches, [alice], utc(3, 9, 10), {"alice": 0.0})

    # when 30 min idle (09:35) comes near, she is warned 10 min ahead, not before;
    assert plan(catalog, [alice], utc(3, 9, 24), watches) == []
    actions = plan(catalog, [alice], utc(3, 9, 26), watches)
    assert summary(actions) == [(ActionKind.WARN, "alice", ReclaimReason.IDLE)]
    assert "will be stopped at 10:36, in 10 min" in actions[0].detail  # a full warning
    assert "its GPU has not been used for 30 min" in actions[0].detail

    # then, warned at 09:26, she keeps a full warning period: nothing at 09:35,
    watch_of(watches, alice).warned_at[ReclaimReason.IDLE] = utc(3, 9, 26)
    see(catalog, watches, [alice], utc(3, 9, 35), {"alice": 0.0})
    assert plan(catalog, [alice], utc(3, 9, 35), watches) == []
    # and her server is reclaimed at 09:36, with the reason.
    actions = plan(catalog, [alice], utc(3, 9, 36), watches)
    assert summary(actions) == [(ActionKind.RECLAIM, "alice", ReclaimReason.IDLE)]


def test_a_busy_server_is_never_warned_and_a_busy_gpu_withdraws_a_warning(catalog):
    # Given bob's server whose GPU is busy every round, and alice's, warned for idleness,
    bob = hub_user("bob", gpu_server("bob", "ml101", utc(3, 8, 55)))
    alice = hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55)))
    watches: dict = {}
    for minute in range(0, 60, 5):
        see(catalog, watches, [alice, bob], utc(3, 9, minute), {"alice": 0.0, "bob": 85.0})
    watch_of(watches, alice).warned_at[ReclaimReason.IDLE] = utc(3, 9, 25)

    # when alice's GPU is busy again before her reclaim,
    see(catalog, watches, [alice, bob], utc(3, 10, 0), {"alice": 60.0, "bob": 85.0})

    # then nobody is reclaimed, and her warning is withdrawn (a new one would be needed).
    assert plan(catalog, [alice, bob], utc(3, 10, 0), watches) == []
    assert watch_of(watches, alice).warned_at == {}
    assert user_warnings(catalog, alice, watches, utc(3, 10, 0)) == []


def test_no_reading_for_a_server_never_counts_as_idle(catalog):
    # Given alice's server, with no GPU reading for its device (no telemetry),
    alice = hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55)))
    watches: dict = {}
    for minute in range(0, 60, 5):
        see(catalog, watches, [alice], utc(3, 9, minute), {})
    # then an hour later nothing is planned.
    assert plan(catalog, [alice], utc(3, 10, 0), watches) == []


def test_utilisation_at_the_idle_threshold_counts_as_idle(catalog):
    # Given the default threshold (5 %): a device at 5 % is idle, at 6 % busy.
    alice = hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55)))
    bob = hub_user("bob", gpu_server("bob", "ml101", utc(3, 8, 55)))
    watches: dict = {}
    for minute in range(0, 60, 5):
        see(catalog, watches, [alice, bob], utc(3, 9, minute), {"alice": 5.0, "bob": 6.0})
    assert summary(plan(catalog, [alice, bob], utc(3, 9, 55), watches)) == [
        (ActionKind.WARN, "alice", ReclaimReason.IDLE)
    ]


def test_instructors_and_admins_are_reclaimed_for_idleness_only_on_a_standing_profile(catalog):
    # Given the instructor's idle ml101 server and idle gpu-anytime server "sandbox" (a
    # standing profile with idle_after: 1h), and an admin's idle ml101 server, all idle
    # since 08:00 UTC,
    prof = hub_user(
        "prof",
        gpu_server("prof", "ml101", utc(3, 8, 0)),
        gpu_server("prof", "gpu-anytime", utc(3, 8, 0), name="sandbox"),
    )
    root = hub_user("root", gpu_server("root", "ml101", utc(3, 8, 0)), admin=True)
    watches: dict = {}
    levels = {"server:prof/": 0.0, "server:prof/sandbox": 0.0, "server:root/": 0.0}
    for minute in range(0, 60, 10):
        observe(watches, [prof, root], levels, catalog, utc(3, 8, minute), lambda s: None)

    # when it is 08:56 (idle 56 min: the standing profile warns 5 min before 1 h),
    actions = plan_actions(catalog, [prof, root], {}, utc(3, 8, 56), None, set(), watches)

    # then only the standing server is warned; staff's course servers never are.
    assert [(a.kind, a.user, a.server, a.reason) for a in actions] == [
        (ActionKind.WARN, "prof", "sandbox", ReclaimReason.IDLE)
    ]


# -- expired research grants -----------------------------------------------------------


def test_a_research_server_is_reclaimed_once_its_grant_has_expired(catalog):
    # Given rita's and root's (an admin) protein-lab servers; the grant's last day was
    # Sunday 2 March, so it ended at midnight in Zurich (Sunday 23:00 UTC),
    rita = hub_user("rita", gpu_server("rita", "protein-lab", utc(2, 20, 0)))
    root = hub_user("root", gpu_server("root", "protein-lab", utc(2, 20, 0)), admin=True)
    watches: dict = {}
    # when the service sees them at 22:45 UTC Sunday, both are warned (15 min left);
    see(catalog, watches, [rita, root], utc(2, 22, 45), {})
    assert summary(plan(catalog, [rita, root], utc(2, 22, 45), watches)) == []
    see(catalog, watches, [rita, root], utc(2, 22, 51), {})
    actions = plan(catalog, [rita, root], utc(2, 22, 51), watches)
    assert summary(actions) == [
        (ActionKind.WARN, "rita", ReclaimReason.GRANT_EXPIRED),
        (ActionKind.WARN, "root", ReclaimReason.GRANT_EXPIRED),
    ]
    assert (
        "the research allocation Protein folding lab expired at the end of Sun 02 Mar 2025"
        in actions[0].detail
    )
    for user in (rita, root):
        watch_of(watches, user).warned_at[ReclaimReason.GRANT_EXPIRED] = utc(2, 22, 51)

    # then at 23:00 UTC both are reclaimed, and neither may keep theirs.
    see(catalog, watches, [rita, root], utc(2, 23, 1), {})
    assert summary(plan(catalog, [rita, root], utc(2, 23, 1), watches)) == [
        (ActionKind.RECLAIM, "rita", ReclaimReason.GRANT_EXPIRED),
        (ActionKind.RECLAIM, "root", ReclaimReason.GRANT_EXPIRED),
    ]
    (warning,) = user_warnings(catalog, rita, watches, utc(2, 22, 55))
    assert not warning.can_keep


def test_a_server_first_seen_after_the_grant_expired_still_gets_a_full_warning(catalog):
    # Given rita's server, first seen on Monday morning, long after the grant ended,
    rita = hub_user("rita", gpu_server("rita", "protein-lab", utc(2, 20, 0)))
    watches: dict = {}
    see(catalog, watches, [rita], utc(3, 8, 0), {})
    # when warned at 08:00, it is stopped 10 min later, not at once.
    assert summary(plan(catalog, [rita], utc(3, 8, 0), watches)) == [
        (ActionKind.WARN, "rita", ReclaimReason.GRANT_EXPIRED)
    ]
    watch_of(watches, rita).warned_at[ReclaimReason.GRANT_EXPIRED] = utc(3, 8, 0)
    assert plan(catalog, [rita], utc(3, 8, 9), watches) == []
    assert summary(plan(catalog, [rita], utc(3, 8, 10), watches)) == [
        (ActionKind.RECLAIM, "rita", ReclaimReason.GRANT_EXPIRED)
    ]


# -- pre-warmed servers nobody opened --------------------------------------------------


def test_a_prewarmed_server_nobody_opened_is_reclaimed_after_class_start(catalog):
    # Given carol's and alice's servers, pre-warmed at 08:30 UTC for the 09:00 class,
    # carol never opened hers; alice opened hers at 08:58,
    carol = hub_user(
        "carol", gpu_server("carol", "ml101", utc(3, 8, 30), prewarmed_for=ML101_CLASS_START)
    )
    alice_server = gpu_server("alice", "ml101", utc(3, 8, 30), prewarmed_for=ML101_CLASS_START)
    alice = hub_user("alice", alice_server)
    watches: dict = {}
    see(catalog, watches, [carol, alice], utc(3, 8, 31), {})
    alice_server["last_activity"] = "2025-03-03T08:58:00Z"

    # when 15 min after class start (09:15) nears, carol alone is warned at 09:05,
    see(catalog, watches, [carol, alice], utc(3, 9, 5), {})
    actions = plan(catalog, [carol, alice], utc(3, 9, 5), watches)
    assert summary(actions) == [(ActionKind.WARN, "carol", ReclaimReason.UNOPENED_PREWARM)]
    assert "it was started for the class at 10:00 and nobody has opened it" in actions[0].detail
    watch_of(watches, carol).warned_at[ReclaimReason.UNOPENED_PREWARM] = utc(3, 9, 5)

    # then her server is reclaimed at 09:15.
    see(catalog, watches, [carol, alice], utc(3, 9, 15), {})
    assert summary(plan(catalog, [carol, alice], utc(3, 9, 15), watches)) == [
        (ActionKind.RECLAIM, "carol", ReclaimReason.UNOPENED_PREWARM)
    ]


def test_a_server_the_student_started_is_not_an_unopened_prewarm(catalog):
    # Given bob's server, started by bob (no pre-warm token) and idle since,
    bob = hub_user("bob", gpu_server("bob", "ml101", utc(3, 8, 55)))
    watches: dict = {}
    see(catalog, watches, [bob], utc(3, 8, 56), {})
    see(catalog, watches, [bob], utc(3, 9, 10), {})
    assert plan(catalog, [bob], utc(3, 9, 10), watches) == []


# -- "I'm still using it" --------------------------------------------------------------


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def test_keep_once_postpones_an_idle_reclaim_once_and_only_once(catalog, tmp_path):
    from gpuspawner.sessions.audit import AuditLog

    # Given alice's idle ml101 server, warned at 09:26 for a reclaim at 09:36,
    alice = hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55)))
    clock = Clock(utc(3, 9, 26))
    audit_path = tmp_path / "audit.jsonl"
    service = SessionsService(None, None, AuditLog(audit_path), clock=clock)  # type: ignore[arg-type]
    see(catalog, service.watches, [alice], utc(3, 9, 5), {"alice": 0.0})
    watch_of(service.watches, alice).warned_at[ReclaimReason.IDLE] = utc(3, 9, 26)
    (warning,) = service.warnings_for(catalog, alice)
    assert warning.can_keep and warning.stop_at == utc(3, 9, 36)

    # when she answers "I'm still using it" at 09:30,
    clock.now = utc(3, 9, 30)
    service.keep(catalog, alice, "")

    # then the warning is gone and the idle clock restarts: no warning until 09:50,
    assert service.warnings_for(catalog, alice) == []
    see(catalog, service.watches, [alice], utc(3, 9, 36), {"alice": 0.0})
    assert plan(catalog, [alice], utc(3, 9, 36), service.watches) == []
    assert plan(catalog, [alice], utc(3, 9, 49), service.watches) == []
    actions = plan(catalog, [alice], utc(3, 9, 50), service.watches)
    assert summary(actions) == [(ActionKind.WARN, "alice", ReclaimReason.IDLE)]
    watch_of(service.watches, alice).warned_at[ReclaimReason.IDLE] = utc(3, 9, 50)

    # and the second time she may not keep it: the warning says so, keeping is refused,
    clock.now = utc(3, 9, 52)
    (warning,) = service.warnings_for(catalog, alice)
    assert not warning.can_keep
    with pytest.raises(KeepRefused) as refused:
        service.keep(catalog, alice, "")
    assert refused.value.status == 403
    assert refused.value.message.startswith("Your server cannot be kept")
    # and it is reclaimed at 10:00.
    assert summary(plan(catalog, [alice], utc(3, 10, 0), service.watches)) == [
        (ActionKind.RECLAIM, "alice", ReclaimReason.IDLE)
    ]
    assert '"action": "keep"' in audit_path.read_text()


def test_keeping_needs_a_warning_and_never_answers_an_expired_grant(catalog, tmp_path):
    from gpuspawner.sessions.audit import AuditLog

    alice = hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55)))
    rita = hub_user("rita", gpu_server("rita", "protein-lab", utc(2, 20, 0)))
    clock = Clock(utc(3, 9, 1))
    service = SessionsService(None, None, AuditLog(tmp_path / "a.jsonl"), clock=clock)  # type: ignore[arg-type]
    see(catalog, service.watches, [alice, rita], utc(3, 9, 0), {"alice": 50.0})
    watch_of(service.watches, rita).warned_at[ReclaimReason.GRANT_EXPIRED] = utc(3, 9, 0)

    # Nothing to keep for alice (busy), a 403 for rita (the grant is over), a 404 for a
    # server that does not exist.
    with pytest.raises(KeepRefused) as nothing:
        service.keep(catalog, alice, "")
    assert nothing.value.status == 409
    with pytest.raises(KeepRefused) as expired:
        service.keep(catalog, rita, "")
    assert expired.value.status == 403
    with pytest.raises(KeepRefused) as missing:
        service.keep(catalog, rita, "other")
    assert missing.value.status == 404


# -- the catalog -----------------------------------------------------------------------


def test_reclaim_policies_are_read_with_their_defaults(catalog):
    ml101 = catalog.courses_by_id["ml101"]
    assert ml101.reclaim.idle_after == timedelta(minutes=30)
    assert ml101.reclaim.unopened_after == timedelta(minutes=15)
    assert ml101.reclaim.keep_once is True and ml101.reclaim.idle_below == 5
    lab = catalog.research_by_id["protein-lab"]
    assert lab.reclaim.after_expiry is True and lab.reclaim.idle_after is None
    assert lab.reclaim.warning == timedelta(minutes=10)
    assert catalog.standing_by_id["cpu"].reclaim.idle_after is None


def test_reclaim_mistakes_are_reported_with_file_and_line(tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(
        RECLAIM_CATALOG_YAML.replace(
            "    reclaim: {idle_after: 1h, warning: 5m}",
            "    reclaim: {idle_after: 0m, unopened_after: 5m}",
        ).replace(
            "    expires: 2025-03-02\n", "    expires: 2025-03-02\n    reclaim: {idle_below: 120}\n"
        )
    )
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    text = str(error.value)
    assert (
        f"{path}:10: standing[1].reclaim.idle_after: expected a duration longer than zero" in text
    )
    assert f"{path}:10: standing[1].reclaim.unopened_after: unknown field" in text
    assert (
        f"{path}:30: research[0].reclaim.idle_below: input should be less than or equal to 100"
        in text
    )


# -- which device a server holds -------------------------------------------------------


def test_on_kubernetes_the_pods_allocation_annotations_say_which_gpu_a_server_holds():
    from gpuspawner.core.allocation_record import (
        ALLOCATION_ANNOTATION,
        allocations_from_pods,
        encode_allocation,
    )
    from gpuspawner.core.telemetry import DeviceReading
    from gpuspawner.sessions.reclaim import utilisation_by_server

    from .reclaim_scenario import server_allocation

    # Given two running server pods on node gpu-a, holding its GPUs 0 and 1 (the DCGM
    # exporter's readings named by the same device ids), and an ended pod,
    def pod(user, device, phase="Running"):
        allocation = server_allocation(user, "ml101", "ml101", device)
        return {
            "metadata": {
                "name": f"jupyter-{user}",
                "annotations": {ALLOCATION_ANNOTATION: encode_allocation(allocation)},
            },
            "status": {"phase": phase},
        }

    allocations, problems = allocations_from_pods(
        [pod("alice", "gpu-a/0"), pod("bob", "gpu-a/1"), pod("carol", "gpu-a/0", "Succeeded")]
    )
    readings = [
        DeviceReading("gpu-a/0", 0, 0.0, 100, 24576, 40.0),
        DeviceReading("gpu-a/1", 1, 73.0, 9000, 24576, 66.0),
    ]
    # then each server's utilisation is its device's; the ended pod holds nothing.
    assert problems == []
    assert utilisation_by_server(readings, allocations) == {
        "server:alice/": 0.0,
        "server:bob/": 73.0,
    }


# -- the home page's part --------------------------------------------------------------


def test_the_home_page_shows_the_keep_form_only_where_keeping_is_allowed(catalog):
    from gpuspawner.sessions.reclaim_api import render_warnings
    from gpuspawner.sessions.service import ReclaimWarning

    def warning(server, reason, can_keep):
        return ReclaimWarning(
            server, "ml101", "ml101", reason, utc(3, 9, 30), can_keep, f"<b>{server}</b> stops."
        )

    html = render_warnings(
        [
            warning("", ReclaimReason.IDLE, True),
            warning("big", ReclaimReason.GRANT_EXPIRED, False),
        ],
        utc(3, 9, 22),
        "xsrf-token-1",
        "/services/course-sessions/reclaim",
    )
    # One alert per server, each with its reason and the time left,
    assert html.count('class="alert alert-warning') == 2
    assert 'data-reason="idle"' in html and 'data-seconds-left="480"' in html
    # the keep form (with the XSRF token) only for the server that may be kept,
    assert html.count("I'm still using it") == 1
    assert html.count('name="_xsrf" value="xsrf-token-1"') == 1
    assert '<input type="hidden" name="server" value="">' in html
    # and what the service says is text, never markup.
    assert "&lt;b&gt;big&lt;/b&gt; stops." in html and "<b>" not in html
