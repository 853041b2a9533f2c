"""The usage record on SQLite and on a real PostgreSQL server: each interval opened once,
closed once, and found by the ranges that overlap it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

from gpuspawner.accounting.intervals import UsageInterval
from gpuspawner.accounting.store import UsageStore

T0 = datetime(2026, 9, 14, 8, 0, 0, 123456, tzinfo=UTC)


def interval(key: str, kind: str = "server", **fields) -> UsageInterval:
    return UsageInterval(
        key=key,
        kind=kind,
        owner=fields.pop("owner", "ana"),
        name="",
        profile="cs101",
        share=fields.pop("share", Fraction(1, 7)),
        started=fields.pop("started", T0),
        **fields,
    )


def test_an_interval_is_opened_once_and_closed_once(usage_url):
    store = UsageStore(usage_url)
    # Given ana's 1/7 server recorded at 08:00:00.123456
    assert store.open(interval("server:ana/", course="cs101", groups=("b", "a")), ["sim-0"])

    # When a restarted hub sees it up again, and it is stopped twice (stop, then clear)
    assert not store.open(interval("server:ana/", started=T0 + timedelta(hours=1)))
    assert store.close_interval("server:ana/", T0 + timedelta(hours=7))
    assert not store.close_interval("server:ana/", T0 + timedelta(hours=8))

    # Then it is one interval of exactly seven hours of a seventh of a GPU
    (found,) = store.intervals()
    assert (found.started, found.ended) == (T0, T0 + timedelta(hours=7))
    assert found.gpu_hours(now=T0) == 1
    assert found.groups == ("a", "b") and found.course == "cs101"
    store.close()


def test_dangling_intervals_of_one_kind_are_closed_and_the_running_kept(usage_url):
    store = UsageStore(usage_url)
    for key, kind in (("server:ana/", "server"), ("server:ben/", "server"), ("job:1", "job")):
        store.open(interval(key, kind))

    # When the restarted hub finds only ben's server running
    gone = store.close_dangling(["server:ben/"], T0 + timedelta(hours=2), kinds=("server",))

    # Then ana's is closed then; ben's server and the job service's job are left alone
    assert gone == ["server:ana/"]
    assert sorted(store.open_keys()) == ["job:1", "server:ben/"]
    store.close()


def test_a_range_finds_the_intervals_that_overlap_it(usage_url):
    store = UsageStore(usage_url)
    store.open(interval("server:ana/", course="cs101"))
    store.close_interval("server:ana/", T0 + timedelta(hours=1))
    store.open(
        interval("server:ben/", owner="ben", course="cs102", started=T0 + timedelta(hours=3))
    )

    def keys(begin, finish, **filters):
        return [i.key for i in store.intervals(begin, finish, **filters)]

    # ana's ended at 09:00; ben's runs from 11:00 on
    assert keys(T0 + timedelta(hours=1), None) == ["server:ben/"]
    assert keys(None, T0 + timedelta(hours=3)) == ["server:ana/"]
    assert keys(T0, T0 + timedelta(days=30)) == ["server:ana/", "server:ben/"]
    assert keys(None, None, courses=["cs102"]) == ["server:ben/"]
    assert keys(None, None, owner="ana") == ["server:ana/"]
    store.close()


def test_a_fresh_start_closes_an_interval_left_open_for_the_same_server(usage_url):
    store = UsageStore(usage_url)
    # Given ana's server whose end was never recorded
    store.open(interval("server:ana/"))

    # When her server starts anew at 12:00 with half a GPU
    later = T0 + timedelta(hours=4)
    assert store.open(interval("server:ana/", share=Fraction(1, 2), started=later), fresh=True)

    # Then the stale interval ends there, and the new one runs with its own share
    old, new = store.intervals()
    assert (old.ended, new.ended, new.share) == (later, None, Fraction(1, 2))
    store.close()
