"""The job service's admission in tests: a catalog written to a folder, its users known,
and ``FlavorAdmission`` admitting jobs by it as servers are admitted."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import GPUDevice, UserIdentity, load_catalog
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

# Alice's research allocation, which ends on 25 November 2026, and its one flavor.
EXPIRING_LAB_CATALOG = """
research:
  - id: lab
    title: Vision lab
    users: [alice]
    expires: 2026-11-25
flavors:
  - id: lab-cpu
    title: Lab CPU
    access: {research: [lab]}
"""


def catalog_capacity(
    folder: Path,
    catalog: str,
    users: Iterable[str],
    *,
    devices: Iterable[GPUDevice] = (),
    target: str = "local",
    clock: Callable[[], datetime] | None = None,
) -> FlavorAdmission:
    """Write ``catalog`` to ``folder/catalog.yaml``, remember ``users`` and admit jobs by
    that catalog (for ``target``: "local" or "kubernetes") on ``devices``."""
    (folder / "catalog.yaml").write_text(catalog)
    identities = IdentityBook(folder / "identities.json")
    for name in users:
        identities.remember(UserIdentity(name))
    return FlavorAdmission(
        admission=GPUAdmission(
            fallback_catalog=load_catalog(folder / "catalog.yaml"), target=target
        ),
        devices=list(devices),
        identities=identities,
        clock=clock,
    )
