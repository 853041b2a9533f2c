"""Scenario: a research grant's last day is the same day for the spawner and for Run as Job.

Grants are dated in the catalog's time zone (``settings.timezone``). In a zone far from UTC
(Pacific/Auckland, UTC+13 in December) a grant that expires on 31 December must be open at
23:30 local on that day and closed at 00:30 local on 1 January, for servers and jobs alike:
at both moments the UTC date is a different one.
"""

from __future__ import annotations

from datetime import UTC
from zoneinfo import ZoneInfo

import pytest

from gpuspawner.policy import UserIdentity, evaluate, flavor_entitlements

from .conftest import at

AUCKLAND = ZoneInfo("Pacific/Auckland")
CATALOG = """
settings: {timezone: Pacific/Auckland}
research:
  - id: kiwi-lab
    title: Kiwi lab
    users: [rhea]
    expires: 2026-12-31
    gpu: {count: 1}
flavors:
  - id: lab-gpu
    title: Lab GPU
    gpu: {count: 1}
    access: {research: [kiwi-lab]}
"""
RHEA = UserIdentity("rhea")


@pytest.mark.parametrize(
    ("moment", "open_"),
    [
        ("2026-12-31 23:30", True),  # 10:30 UTC on the 31st
        ("2027-01-01 00:30", False),  # 11:30 UTC on the 31st: still the 31st in UTC
        ("2026-12-31 00:30", True),  # 11:30 UTC on the 30th
    ],
)
def test_a_grant_is_open_for_servers_and_jobs_until_midnight_where_the_catalog_is(
    catalog_from, moment, open_
):
    # Given a grant that expires on 31 December, in a catalog kept in Auckland time
    catalog = catalog_from(CATALOG)
    now = at(moment, AUCKLAND).astimezone(UTC)  # as the hub and the service read the clock

    # When the spawner and the job service each ask whether Rhea may use it now
    (server,) = [e for e in evaluate(catalog, RHEA, now) if e.profile.id == "kiwi-lab"]
    (job,) = flavor_entitlements(catalog, RHEA, now)

    # Then they agree, and the answer follows the local calendar day
    assert (server.available, job.available) == (open_, open_)
