"""GPUSpawner on the real control plane with a weekly GPU-hour budget: the student's server
is recorded from the moment its spawner has started it until it stops, the spawn card shows what
is left, and the next start past the budget is refused with a sentence before any pod."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from jupyterhub.spawner import SpawnException

from gpuspawner.accounting.intervals import week_of
from gpuspawner.accounting.store import UsageStore, close_shared_usage_store
from gpuspawner.spawners.course_profiles import CourseProfilesMixin
from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_spawners import make_gpu_spawner

pytestmark = pytest.mark.usefixtures("kubespawner_env")

TODAY = datetime.now(UTC)
# Tuesday 10:00 UTC of this week: two hours later is still the same week.
TUESDAY = week_of(TODAY, UTC)[0] + timedelta(days=1, hours=10)


def write_budget_catalog(path: Path, budget: str = "0.5") -> Path:
    path.write_text(
        f"""\
courses:
  - id: cs101
    title: CS101
    enrolment: {{users: [ana, ben, cai]}}
    gpu: {{fraction: 1/4}}
    budget: {{gpu_hours_per_student_per_week: {budget}}}
    schedule:
      timezone: UTC
      term: {{first_day: {(TODAY - timedelta(days=30)).date()}, last_day: {(TODAY + timedelta(days=30)).date()}}}
      windows: [{{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "00:00", end: "23:59"}}]
"""
    )
    return path


@pytest.fixture
def usage_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'usage.sqlite'}"
    yield url
    close_shared_usage_store(url)


def student_spawner(
    catalog: Path, usage_url: str, clock: list[datetime], name: str = "ana"
) -> GPUSpawner:
    spawner = make_gpu_spawner(name, catalog, profile="cs101")
    spawner.admission.usage_db_url = usage_url
    spawner.now = lambda: clock[0]  # the hub's clock, moved by the test
    return spawner


async def test_a_student_past_the_weekly_budget_is_refused_by_the_spawner(
    k8s_controls, tmp_path, usage_url
):
    # Given a GPU shared four ways and CS101's budget of 0.5 GPU-hours a week
    GPUSpawner._inventories.clear()
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    catalog = write_budget_catalog(tmp_path / "catalog.yaml")
    clock = [TUESDAY]

    # When Ana's quarter-GPU server runs for two hours (JupyterHub: started, then stopped)
    first = student_spawner(catalog, usage_url, clock)
    await first.start()
    first.start_polling()
    first.stop_polling()
    clock[0] += timedelta(hours=2)
    await first.stop()

    # Then the usage record holds exactly those two hours of a quarter GPU
    (interval,) = UsageStore(usage_url).intervals()
    assert (interval.owner, interval.course, interval.share) == ("ana", "cs101", 0.25)
    assert interval.gpu_hours(now=clock[0]) == 0.5

    # and her spawn card says nothing is left, and when it renews
    again = student_spawner(catalog, usage_url, clock)
    (card,) = [c for c in again.profile_cards() if c.id == "cs101"]
    assert card.budget == "0.0 of your 0.5 GPU-hours left this week (renews Monday 00:00, UTC)"
    assert card.budget_exhausted

    # And her next start is refused with a sentence, before any pod is created
    with pytest.raises(SpawnException) as refused:
        await again.start()
    assert refused.value.status_code == 403
    assert refused.value.message == (
        "You have used 0.5 of your 0.5 GPU-hours for CS101 this week; the budget renews on "
        "Monday 00:00 (UTC). Ask your instructor if you need more, or start a profile "
        "without a GPU."
    )
    assert k8s_controls.get("pods", again.pod_name, "default") is None
    assert again.capacity_pool.allocations == {}
    GPUSpawner._inventories.clear()


async def test_a_server_that_ended_while_the_hub_was_down_is_closed_when_it_restarts(
    k8s_controls, tmp_path, usage_url
):
    # Given Ana's and Ben's quarter-GPU servers up and recorded at 10:00
    GPUSpawner._inventories.clear()
    CourseProfilesMixin._usage_reconciled.clear()
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    catalog = write_budget_catalog(tmp_path / "catalog.yaml", budget="100")
    clock = [TUESDAY]
    running = {}
    for name in ("ana", "ben"):
        spawner = student_spawner(catalog, usage_url, clock, name)
        await spawner.start()
        spawner.start_polling()
        spawner.stop_polling()
        running[name] = spawner.get_state()

    # When the hub goes down, Ana's server ends meanwhile, and the hub restarts at 11:00
    ana_pod = make_gpu_spawner("ana", catalog).pod_name
    k8s_controls.complete_container("default", ana_pod)
    GPUSpawner._inventories.clear()
    CourseProfilesMixin._usage_reconciled.clear()
    clock[0] = TUESDAY + timedelta(hours=1)
    ben = student_spawner(catalog, usage_url, clock, "ben")
    ben.load_state(running["ben"])
    # and Cai is the first to start a server on the restarted hub
    cai = student_spawner(catalog, usage_url, clock, "cai")
    await cai.start()

    # Then Ana's interval is closed at the restart, Ben's still runs, and Cai's has not begun
    intervals = {i.owner: i for i in UsageStore(usage_url).intervals()}
    assert intervals["ana"].ended == TUESDAY + timedelta(hours=1)
    assert intervals["ana"].gpu_hours(now=clock[0]) == Fraction(1, 4)
    assert intervals["ben"].ended is None
    assert "cai" not in intervals  # until JupyterHub has it started (start_polling)
    await asyncio.gather(ben.stop(), cai.stop())
    GPUSpawner._inventories.clear()
