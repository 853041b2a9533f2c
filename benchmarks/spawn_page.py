"""Spawn page: the HTML of the profile cards, for a student (6 profiles) and an admin (202).

Ours goes through the real spawner: ``LocalGPUSpawner.get_options_form()``, which
evaluates entitlements, counts GPU seats against the capacity pool (8 simulated
GPUs, partly allocated) and renders the cards. The anchor is KubeSpawner 7.1
with the ``profile_list`` callable of :mod:`benchmarks.kubespawner_config`,
through the same public JupyterHub call; KubeSpawner counts no seats.

A second pair times the rendering alone: ``ProfileCard.build`` +
``render_profile_cards`` from ready entitlements and seat counts, against
KubeSpawner's ``_render_options_form`` of the equivalent static ``profile_list``.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from datetime import datetime
from pathlib import Path

from gpuspawner.policy import CapacityPool, Entitlement, UserIdentity, evaluate, seats_left
from gpuspawner.spawners.spawn_page import ProfileCard, render_profile_cards

from .kubespawner_config import load_course_config, make_profile_list, visible_profiles
from .report import Row, Section
from .synthetic_catalog import SyntheticCatalog, hub_user, synthetic_catalog
from .timing import time_async_calls, time_calls

BUDGET_PER_CASE = 1.0
SIMULATED_GPUS = [{"model": "RTX 4090", "memory": "24GiB", "count": 8}]
ALLOCATED_SHARES = 12

# A kubeconfig that is never contacted: KubeSpawner loads one when it is created.
UNUSED_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: unused, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: unused, user: {token: unused}}]
contexts: [{name: unused, context: {cluster: unused, user: unused}}]
current-context: unused
"""


class Clock:
    """The instant both spawners see as "now"."""

    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def our_spawner(bench: SyntheticCatalog, user: UserIdentity, clock: Clock):
    from traitlets.config import Config

    from gpuspawner.spawners.local import LocalGPUSpawner

    config = Config()
    config.GPUAdmission.catalog_path = str(bench.path)
    config.GPUAdmission.gpu_inventory = "simulated"
    config.GPUAdmission.simulated_gpus = SIMULATED_GPUS
    spawner = LocalGPUSpawner(user=hub_user(user), config=config)
    spawner.now = clock
    return spawner


def kubespawner(user: UserIdentity, profile_list) -> tuple[object | None, str]:
    """KubeSpawner 7.1 as its own tests create it, or None and why not. Needs a running loop."""
    try:
        from kubernetes_asyncio.config import kube_config
        from kubespawner import KubeSpawner
        from kubespawner import __version__ as version
    except ImportError as error:
        return None, f"anchor unavailable: kubespawner cannot be imported ({error})"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kubeconfig"
        path.write_text(UNUSED_KUBECONFIG, encoding="utf-8")
        default, kube_config.KUBE_CONFIG_DEFAULT_LOCATION = (
            kube_config.KUBE_CONFIG_DEFAULT_LOCATION,
            str(path),
        )
        try:
            spawner = KubeSpawner(_mock=True, user=hub_user(user))
        except Exception as error:  # noqa: BLE001 - any failure only removes the anchor
            return None, f"anchor unavailable: KubeSpawner cannot be created ({error!r})"
        finally:
            kube_config.KUBE_CONFIG_DEFAULT_LOCATION = default
    spawner.profile_list = profile_list
    return spawner, f"KubeSpawner {version}"


def allocate_some(pool: CapacityPool, bench: SyntheticCatalog) -> list[str]:
    """Fill part of the pool with students' course servers; returns their keys."""
    keys = []
    courses = [c for c in bench.catalog.courses if c.share is not None and not c.share.is_whole]
    for number, course in enumerate(courses[:ALLOCATED_SHARES]):
        key = f"server:bench-holder-{number}/"
        pool.allocate(
            key,
            owner=f"bench-holder-{number}",
            profile_id=course.id,
            course_id=course.id,
            share=course.share,
        )
        keys.append(key)
    return keys


def page_instants(bench: SyntheticCatalog) -> list[datetime]:
    """Two instants with one of the student's classes open, two others spread over the week."""
    open_now = [
        now
        for now in bench.instants
        if any(
            e.available and e.profile.course for e in evaluate(bench.catalog, bench.student, now)
        )
    ]
    return (
        open_now[:: max(1, len(open_now) // 2)][:2]
        + bench.instants[:: len(bench.instants) // 2][:2]
    )


def profile_ids(html: str, pattern: str) -> list[str]:
    return re.findall(pattern, html)


async def measure() -> Section:
    bench = synthetic_catalog()
    config = load_course_config(str(bench.path))
    instants = page_instants(bench)
    clock = Clock(instants[0])
    section = Section("spawn_page: the spawn form's HTML", "")
    pool = our_spawner(bench, bench.student, clock).capacity_pool  # shared by all spawners
    keys = allocate_some(pool, bench)
    try:
        for label, user in (("student", bench.student), ("admin", bench.admin)):
            theirs, section.anchor = kubespawner(user, make_profile_list(config, clock))
            ours = our_spawner(bench, user, clock)
            section.rows += await measure_user(
                label, user, ours, theirs, bench, pool, config, clock, instants
            )
    finally:
        for key in keys:
            pool.release(key)
    section.notes += [
        f"{len(instants)} instants; capacity pool: 8 simulated RTX 4090, "
        f"{ALLOCATED_SHARES} course servers already holding slices",
        "the anchor's form lists the same profile ids and opens the same ones (checked at "
        "every instant; our page puts open cards first); it shows no seats and no opening times",
    ]
    return section


async def measure_user(
    label: str,
    user: UserIdentity,
    ours,
    theirs,
    bench: SyntheticCatalog,
    pool: CapacityPool,
    config: dict,
    clock: Clock,
    instants: list[datetime],
) -> list[Row]:
    """The page, the rendering alone and the seat counts, for one user."""

    async def our_page(now: datetime) -> str:
        clock.now = now
        return await ours.get_options_form()

    async def their_page(now: datetime) -> str:
        clock.now = now
        return await theirs.get_options_form()

    if theirs is not None:
        for now in instants:
            ours_ids = profile_ids(await our_page(now), r'data-profile="([^"]+)"')
            their_ids = profile_ids(await their_page(now), r'id="profile-item-([^"]+)"')
            expected = in_page_order(their_ids, ours.profile_cards())
            assert ours_ids == expected, f"the two forms list different profiles at {now}"
            open_ids = {
                p["slug"] for p in visible_profiles(config, hub_user(user), now) if p["available"]
            }
            ours_open = {card.id for card in ours.profile_cards() if card.available}
            assert ours_open == open_ids, f"the two forms open different profiles at {now}"
    cards = len(evaluate(bench.catalog, user, instants[0]))
    ready = [ready_cards(bench, pool, user, now) for now in instants]
    pages = [(now, evaluate(bench.catalog, user, now)) for now in instants]
    static = [visible_profiles(config, hub_user(user), now) for now in instants]
    return [
        Row(
            f"page: {label}, {cards} profiles (evaluate + seats + cards + HTML)",
            await time_async_calls(our_page, instants, BUDGET_PER_CASE),
            await time_async_calls(their_page, instants, BUDGET_PER_CASE) if theirs else None,
        ),
        Row(
            f"cards + HTML only: {label}",
            time_calls(render_from, ready, BUDGET_PER_CASE),
            time_calls(theirs._render_options_form, static, BUDGET_PER_CASE) if theirs else None,
        ),
        Row(
            f"seats_left for every open profile: {label}",
            time_calls(lambda page: count_seats(bench, pool, page), pages, BUDGET_PER_CASE),
        ),
    ]


def in_page_order(ids: list[str], cards: list[ProfileCard]) -> list[str]:
    """The anchor's profile ids in the order of our page: the cards that can be started now
    first, a student's courses in class (with a seat) before them, otherwise the catalog's
    order (the anchor lists the catalog's order)."""
    by_id = {card.id: card for card in cards}

    def place(profile_id: str) -> tuple[bool, bool]:
        card = by_id.get(profile_id)
        if card is None:  # not on our page: the comparison reports it
            return (False, False)
        in_class = card.available and card.kind == "course" and card.role == "student"
        return (not card.available, not (in_class and not card.full))

    return sorted(ids, key=place)


def ready_cards(
    bench: SyntheticCatalog, pool: CapacityPool, user: UserIdentity, now: datetime
) -> tuple[list[tuple[Entitlement, int | None]], list]:
    """What the page needs before building cards: entitlements with their seat counts."""
    pairs = []
    for entitlement in evaluate(bench.catalog, user, now):
        seats = seats_left(bench.catalog, pool, entitlement, now) if entitlement.available else None
        pairs.append((entitlement, seats))
    return pairs, pool.devices


def render_from(ready: tuple[list[tuple[Entitlement, int | None]], list]) -> str:
    pairs, devices = ready
    return render_profile_cards([ProfileCard.build(e, seats, devices) for e, seats in pairs])


def count_seats(
    bench: SyntheticCatalog, pool: CapacityPool, page: tuple[datetime, list[Entitlement]]
) -> None:
    """The seat counts of one page, as ``profile_cards`` asks for them."""
    now, entitlements = page
    for entitlement in entitlements:
        if entitlement.available:
            seats_left(bench.catalog, pool, entitlement, now)


def run() -> Section:
    return asyncio.run(measure())


if __name__ == "__main__":
    from .report import render

    print(render(run()))
