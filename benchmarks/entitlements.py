"""Entitlements: ``evaluate(catalog, user, now)`` on a 200-course, 20,000-enrolment catalog.

Measures, for a student in 4 courses, an instructor of 3 and an admin who sees
all 200, one evaluation per instant over a week (lead times, classes, grace and
closed hours all included), against the KubeSpawner ``profile_list`` callable
an admin writes today (:mod:`benchmarks.kubespawner_config`). Also measures
loading the catalog, against ``yaml.safe_load`` of the same file.

Target from the issue: under 5 ms per evaluation for one user, judged on the
median (the p95 is printed beside it; on a shared machine it also catches other
processes and garbage collection). PASS/FAIL is informational: it does not
change the exit status.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from gpuspawner.policy import Catalog, Phase, ProfileKind, UserIdentity, evaluate, load_catalog

from .kubespawner_config import load_course_config, visible_profiles
from .report import Row, Section, duration
from .synthetic_catalog import WEEK_START, SyntheticCatalog, hub_user, synthetic_catalog
from .timing import time_calls, time_once

TARGET_SECONDS = 0.005
BUDGET_PER_CASE = 1.0  # seconds of recorded calls per case (at least one round is recorded)
LOAD_REPEATS = 2


def ours(catalog: Catalog, user: UserIdentity, now: datetime) -> tuple[list[str], set[str]]:
    """Visible profile ids in page order, and the open ones, as the hub decides."""
    entitlements = evaluate(catalog, user, now)
    return [e.profile.id for e in entitlements], {e.profile.id for e in entitlements if e.available}


def anchor(config: dict, user: UserIdentity, now: datetime) -> tuple[list[str], set[str]]:
    """The same, as the KubeSpawner ``profile_list`` callable decides."""
    profiles = visible_profiles(config, hub_user(user), now)
    return [p["slug"] for p in profiles], {p["slug"] for p in profiles if p["available"]}


def cross_check(bench: SyntheticCatalog, config: dict) -> int:
    """Assert that the anchor computes what the hub computes; returns the number of checks."""
    checks = 0
    every_fourth = bench.instants[::4]
    spread = bench.instants[:: max(1, len(bench.instants) // 24)]
    cases = [(bench.student, bench.instants), (bench.instructor, bench.instants)]
    cases += [(bench.admin, every_fourth)] + [(user, spread) for user in bench.sample_users]
    for user, instants in cases:
        for now in instants:
            expected, got = ours(bench.catalog, user, now), anchor(config, user, now)
            assert expected == got, (
                f"the anchor disagrees with evaluate() for {user.name} at {now:%a %H:%M} UTC: "
                f"hub {expected}, anchor {got}"
            )
            checks += 1
    return checks


def phase_coverage(bench: SyntheticCatalog) -> str:
    """How often the student's course entitlements fell in each phase over the instants."""
    phases: Counter[Phase] = Counter()
    for now in bench.instants:
        for entitlement in evaluate(bench.catalog, bench.student, now):
            if entitlement.profile.kind is ProfileKind.COURSE and entitlement.phase:
                phases[entitlement.phase] += 1
    return ", ".join(f"{phase.value} {phases[phase]}" for phase in Phase)


def run() -> Section:
    bench = synthetic_catalog()
    catalog, instants = bench.catalog, bench.instants
    config = load_course_config(str(bench.path))
    section = Section(
        "entitlements: evaluate() for one user at one instant",
        "KubeSpawner profile_list callable scanning every course and enrolment list "
        "(benchmarks/kubespawner_config.py)",
    )
    section.rows.append(
        Row(
            "load catalog (200 courses, 20,000 enrolments)",
            time_once(lambda: load_catalog(bench.path), LOAD_REPEATS),
            time_once(lambda: load_course_config(str(bench.path)), LOAD_REPEATS),
        )
    )
    checks = cross_check(bench, config)
    people = [
        ("student, 4 courses (6 profiles)", bench.student),
        ("instructor of 3 courses", bench.instructor),
        ("admin, all 200 courses", bench.admin),
    ]
    verdicts = []
    for label, user in people:
        user_object = hub_user(user)
        row = Row(
            f"evaluate: {label}",
            time_calls(
                lambda now, user=user: evaluate(catalog, user, now), instants, BUDGET_PER_CASE
            ),
            time_calls(
                lambda now, u=user_object: visible_profiles(config, u, now),
                instants,
                BUDGET_PER_CASE,
            ),
        )
        section.rows.append(row)
        verdict = "PASS" if row.ours.median < TARGET_SECONDS else "FAIL"
        verdicts.append(
            f"target < {duration(TARGET_SECONDS)} per evaluation, {label}: "
            f"median {duration(row.ours.median)}, p95 {duration(row.ours.p95)} -> {verdict}"
        )
    section.notes += [
        f"{len(catalog.courses)} courses, "
        f"{sum(len(c.enrolment.users) for c in catalog.courses)} enrolments by name, "
        f"{sum(1 for c in catalog.courses if c.enrolment.groups)} courses enrolling groups, "
        f"{len(catalog.research)} research allocations, {len(catalog.standing)} standing profiles; "
        f"YAML {bench.path.stat().st_size // 1024} KiB",
        f"{len(instants)} instants over the week from {WEEK_START:%Y-%m-%d %H:%M} UTC; "
        f"student's course phases seen: {phase_coverage(bench)}",
        f"cross-check: the anchor's visible and open profile ids equal evaluate()'s in "
        f"{checks} (user, instant) cases ({len(bench.sample_users) + 3} users)",
        *verdicts,
    ]
    return section


if __name__ == "__main__":
    from .report import render

    print(render(run()))
