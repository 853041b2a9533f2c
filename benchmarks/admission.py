"""Admission: a class of 40 students starting at once onto 10 GPUs at a quarter each.

The capacity-pool half of a class-start storm: ``admit()`` for every student
(entitlement re-check, per-user and per-course limits, reserved seats of other
open courses, best-fit placement), ``release()`` when they stop, and
``how_many_fit`` (the "seats left" count). The class is one more course in the
200-course catalog of :mod:`benchmarks.synthetic_catalog`, so the checks run
against a full-size catalog.

The anchor is what a KubeSpawner admin would put in a ``pre_spawn_hook``: the
``profile_list`` check of :mod:`benchmarks.kubespawner_config` for the chosen
profile, then first-fit into a dict of quarters used per GPU.
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import yaml

from gpuspawner.core.inventory import simulated_gpus
from gpuspawner.policy import (
    CapacityPool,
    Catalog,
    Refusal,
    UserIdentity,
    active_reservations,
    admit,
    load_catalog,
)

from .kubespawner_config import load_course_config, visible_profiles
from .report import Row, Section
from .synthetic_catalog import WEEK_START, synthetic_catalog
from .timing import Timing, time_calls

CLASS_SIZE = 40
GPU_COUNT = 10
QUARTERS_PER_GPU = 4
BUDGET = 1.5
COURSE_ID = "storm-lab"
GROUP = "storm-lab-students"

T = TypeVar("T")


def storm_course(start: datetime) -> dict:
    """The class that starts all at once, meeting on Mondays at ``start`` (Zurich time)."""
    return {
        "id": COURSE_ID,
        "title": "Deep Learning Lab",
        "instructors": ["storm-prof"],
        "enrolment": {"groups": [GROUP]},
        "gpu": {"fraction": "1/4"},
        "max_gpu_servers": CLASS_SIZE,
        "resources": {"cpu": 2, "memory": "8GiB"},
        "schedule": {
            "timezone": "UTC",
            "term": {"first_day": WEEK_START.date(), "last_day": WEEK_START.date() + timedelta(30)},
            "windows": [{"day": "Mon", "start": f"{start:%H:%M}", "end": f"{start.hour + 2}:00"}],
        },
    }


def quiet_hour(catalog: Catalog) -> datetime:
    """A Monday hour when no other course holds reserved seats, so all 40 students fit."""
    for hour in range(8, 20):
        moment = WEEK_START.replace(hour=hour)
        if not active_reservations(catalog, moment + timedelta(minutes=1)):
            return moment
    raise RuntimeError("every Monday hour has reserved seats; change the synthetic catalog seed")


def class_catalog(folder: Path) -> tuple[Catalog, dict, datetime]:
    """The synthetic catalog plus the class (a second file), its anchor config, and class time."""
    bench = synthetic_catalog()
    start = quiet_hour(bench.catalog)
    course = storm_course(start)
    (folder / "catalog.yaml").write_text(bench.path.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "storm.yaml").write_text(
        yaml.safe_dump({"courses": [course]}, sort_keys=False), encoding="utf-8"
    )
    config = load_course_config(str(bench.path))
    config["courses"].append(course)
    return load_catalog(folder), config, start + timedelta(minutes=1)


def students() -> list[UserIdentity]:
    return [UserIdentity(f"storm-{n:02d}", frozenset({GROUP, "year-3"})) for n in range(CLASS_SIZE)]


def key_of(user: UserIdentity) -> str:
    return f"server:{user.name}/"


def storm(catalog: Catalog, pool: CapacityPool, now: datetime) -> tuple[list[float], list[float]]:
    """Admit the whole class, then release it; the duration of every call."""
    admits, releases = [], []
    clock = time.perf_counter
    for user in students():
        start = clock()
        admit(catalog, pool, user, COURSE_ID, key=key_of(user), now=now)
        admits.append(clock() - start)
    for user in students():
        start = clock()
        pool.release(key_of(user))
        releases.append(clock() - start)
    return admits, releases


def naive_storm(config: dict, now: datetime) -> list[float]:
    """The anchor: a pre_spawn_hook checking the profile list, then first-fit by quarters."""
    used = dict.fromkeys(range(GPU_COUNT), 0)
    placed: dict[str, int] = {}
    samples = []
    clock = time.perf_counter
    for user in students():
        start = clock()
        who = SimpleNamespace(name=user.name, groups=[SimpleNamespace(name=g) for g in user.groups])
        who.admin = False
        offered = {p["slug"]: p for p in visible_profiles(config, who, now)}
        if not offered.get(COURSE_ID, {}).get("available"):
            raise RuntimeError(f"{user.name} may not start {COURSE_ID}")
        gpu = next(g for g, quarters in used.items() if quarters < QUARTERS_PER_GPU)
        used[gpu] += 1
        placed[user.name] = gpu
        samples.append(clock() - start)
    return samples


def repeat(run: Callable[[], T], budget: float) -> list[T]:
    """``run()`` once to warm up, then again and again for about ``budget`` seconds."""
    run()
    gc.collect()
    started = time.perf_counter()
    results = [run()]
    while time.perf_counter() - started < budget:
        results.append(run())
    return results


def run() -> Section:
    section = Section(
        "admission: a class of 40 starting at once on 10 GPUs at 1/4 each",
        "a pre_spawn_hook with the profile_list check and first-fit quarters per GPU",
    )
    devices = simulated_gpus([{"model": "RTX 4090", "memory": "24GiB", "count": GPU_COUNT}])
    with tempfile.TemporaryDirectory(prefix="gpuspawner-bench-") as name:
        catalog, config, now = class_catalog(Path(name))

    pool = CapacityPool(devices)
    storms = repeat(lambda: storm(catalog, pool, now), BUDGET)
    naive = repeat(lambda: naive_storm(config, now), BUDGET)
    admits = Timing(tuple(s for admits, _ in storms for s in admits))
    releases = Timing(tuple(s for _, releases in storms for s in releases))
    naive_admits = Timing(tuple(s for samples in naive for s in samples))
    section.rows += [
        Row("admit() one student (200 other courses in the catalog)", admits, naive_admits),
        Row("release() one server", releases),
        Row(
            "whole class: 40 admits",
            Timing(tuple(sum(a) for a, _ in storms)),
            Timing(tuple(sum(samples) for samples in naive)),
        ),
    ]

    # A full pool refuses the 41st student with a sentence; the refusal has a cost too.
    for user in students():
        admit(catalog, pool, user, COURSE_ID, key=key_of(user), now=now)
    late = UserIdentity("storm-late", frozenset({GROUP}))

    def refused(_: object) -> None:
        try:
            admit(catalog, pool, late, COURSE_ID, key=key_of(late), now=now)
        except Refusal:
            return
        raise AssertionError("the 41st student was admitted to a full class")

    section.rows.append(
        Row("admit() refused: class full (41st student)", time_calls(refused, [0], BUDGET))
    )
    share = catalog.courses_by_id[COURSE_ID].share
    assert share is not None
    reservations = active_reservations(catalog, now)
    for taken in (0, CLASS_SIZE // 2):
        for user in students():
            pool.release(key_of(user))
        for user in students()[:taken]:
            admit(catalog, pool, user, COURSE_ID, key=key_of(user), now=now)
        fit = pool.how_many_fit(share, reservations, course_id=COURSE_ID)
        assert fit == CLASS_SIZE - taken, f"expected {CLASS_SIZE - taken} seats, counted {fit}"
        section.rows.append(
            Row(
                f"how_many_fit 1/4 with {taken} of 40 taken ({fit} fit)",
                time_calls(
                    lambda _: pool.how_many_fit(share, reservations, course_id=COURSE_ID),
                    [0],
                    BUDGET / 2,
                ),
            )
        )
    section.notes += [
        f"{len(storms)} storms timed ({len(storms) * CLASS_SIZE} admits), class at "
        f"{now:%a %H:%M} UTC; every student admitted, 10 GPUs exactly full after 40",
        "the anchor checks entitlement like the profile_list callable but keeps no "
        "per-user or per-course limits, reserved seats, memory or refusal reasons",
    ]
    return section


if __name__ == "__main__":
    from .report import render

    print(render(run()))
