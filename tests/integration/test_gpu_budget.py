"""A weekly GPU-hour budget on a real JupyterHub with LocalGPUSpawner: the student who has
used hers is refused through the hub's REST API with the sentence, and the spawn page says
so on her card; a classmate who has not starts, and her server is recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from gpuspawner.accounting.intervals import UsageInterval, week_of
from gpuspawner.accounting.store import UsageStore

from ..support.course_catalogs import catalog, course, minute, now, spawner_config, write_catalog
from ..support.hub_pages import cards

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'


def test_a_student_over_her_weekly_budget_is_refused_by_the_hub_with_a_sentence(
    start_hub, browserless_user, tmp_path
):
    # Given ML101 in class now, with 6 GPU-hours per student and week
    t = minute(now())
    catalog_dir = tmp_path / "catalog"
    text = course(
        "ml101",
        start=t - timedelta(minutes=5),
        end=t + timedelta(minutes=90),
        students=["ana", "ben"],
        gpu="{fraction: 1/4}",
    ).replace(
        "    max_gpu_servers:",
        "    budget: {gpu_hours_per_student_per_week: 6}\n    max_gpu_servers:",
    )
    write_catalog(catalog_dir, catalog(text))
    # and a usage record in which ana already held a quarter GPU for 24 hours this week
    url = f"sqlite:///{tmp_path / 'gpu-usage.sqlite'}"
    store = UsageStore(url)
    week_start, _ = week_of(datetime.now(UTC), UTC)
    earlier = week_start - timedelta(hours=12)  # from last week on: only this week's part counts
    store.open(
        UsageInterval(
            key="server:ana/",
            kind="server",
            owner="ana",
            name="",
            profile="ml101",
            share=Fraction(1, 4),
            started=earlier,
            course="ml101",
        )
    )
    store.close_interval("server:ana/", week_start + timedelta(hours=24))
    store.close()
    hub = start_hub(
        spawner_config(catalog_dir, ONE_GPU, f"c.GPUAdmission.usage_db_url = {url!r}\n")
    )
    ana, ben = browserless_user(hub, "ana"), browserless_user(hub, "ben")

    # When ana opens the spawn page and starts ML101 through the REST API
    ana.login()
    card = cards(ana.get_spawn_page().text)["ml101"]
    answer = ana.spawn_via_api({"profile": "ml101"})

    # Then her card says nothing is left, and the start is refused with the sentence
    # (the renewal a moment naming its zone, which the page tells in the reader's zone)
    assert "0.0 of your 6 GPU-hours left this week (renews Mon 00:00 UTC )" in " ".join(
        card["text"].split()
    )
    assert answer.status_code == 403
    assert answer.json()["message"] == (
        "You have used 6.0 of your 6 GPU-hours for ML101 this week; the budget renews on "
        "Monday 00:00 (UTC). Ask your instructor if you need more, or start a profile "
        "without a GPU."
    )

    # And ben, who has used nothing, starts, and his server is in the usage record
    ben.login()
    assert ben.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    ben.wait_ready()
    owners = {i.owner: i for i in UsageStore(url).intervals()}
    assert owners["ben"].ended is None and owners["ben"].share == Fraction(1, 4)
