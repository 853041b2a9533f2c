"""One scene for the GPU map tests: who holds which slice, and who looks.

Two students of ML101 (ana, ben, taught by mila, named in the catalog), a student of
CS102 (cleo, taught by tom through the course's instructor group) and a job of
researcher rex, on two 24 GiB GPUs. The same slices are booked in an allocation ledger
(one machine) or recorded on pods (Kubernetes), as the spawners and the job service do.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.policy import Allocation, GPUDevice, GPUShare

CATALOG = """\
courses:
  - id: ml101
    title: Machine learning
    instructors: [mila]
    enrolment: {users: [ana, ben]}
    schedule: &term
      timezone: UTC
      term: {first_day: 2026-01-01, last_day: 2028-12-31}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
  - id: cs102
    title: Systems
    enrolment: {users: [cleo]}
    schedule: *term
"""

INSTRUCTOR_GROUPS = {"course-cs102-instructors": ["tom"]}
"""Hub groups to load: tom teaches CS102 through its instructor group."""

PEOPLE = ["root", "mila", "tom", "ana", "ben", "cleo", "rex"]
ADMIN = "root"

SIMULATED_GPUS = [{"model": "RTX 4090", "memory": "24GiB", "count": 2}]

# (allocation key, owner, course or None, profile, share)
SLICES = [
    ("server:ana/", "ana", "ml101", "ml101", Fraction(1, 4)),
    ("server:ben/", "ben", "ml101", "ml101", Fraction(1, 4)),
    ("server:cleo/", "cleo", "cs102", "cs102", Fraction(1, 4)),
    ("job:7f3a", "rex", None, "vision-lab", Fraction(1, 2)),
]

EXPECTED_NAMES = {
    "root": {"ana", "ben", "cleo", "rex"},
    "mila": {"ana", "ben"},
    "tom": {"cleo"},
    "ana": {"ana"},
    "rex": {"rex"},
}
"""The holders each person sees named (their own slice included, shown as "you")."""


def book(ledger_path: Path, devices: list[GPUDevice]) -> list[Allocation]:
    """Book every slice in the ledger at ``ledger_path``, held by this (test) process."""
    booked = []
    with AllocationLedger(ledger_path).transaction(devices) as pool:
        for key, owner, course, profile, share in SLICES:
            booked.append(
                pool.allocate(
                    key,
                    owner=owner,
                    profile_id=profile,
                    course_id=course,
                    share=GPUShare(fraction=share),
                )
            )
    return booked


def names_in(picture: dict) -> set[str]:
    """The holders named in a GPU map answer."""
    return {s["holder"] for gpu in picture["gpus"] for s in gpu["slices"] if s["holder"]}
