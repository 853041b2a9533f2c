"""Catalogs for integration tests, written relative to the real clock.

A real hub runs on the real clock, so each scenario writes class windows around
"now" (UTC): a window that is open, one in its lead time, one that ended.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path


def window(start: datetime, end: datetime) -> str:
    """A one-line weekly window (UTC) covering ``start``..``end``; one that crosses midnight
    says so (``overnight: true``), as the catalog asks."""
    overnight = ", overnight: true" if end.time() < start.time() else ""
    return f'{{day: {start:%a}, start: "{start:%H:%M}", end: "{end:%H:%M}"{overnight}}}'


def minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def course(
    course_id: str,
    *,
    start: datetime,
    end: datetime,
    students: list[str],
    gpu: str = "{fraction: 1/2, memory: 8GiB}",
    seats: int = 10,
    lead: str = "10m",
    grace: str = "10m",
    prewarm: str | None = None,
    instructors: tuple[str, ...] = ("teacher",),
    title: str | None = None,
) -> str:
    """One course block for the ``courses:`` list."""
    prewarm_line = f"\n      prewarm: {prewarm}" if prewarm else ""
    first_day = (start - timedelta(days=1)).date()
    return f"""\
  - id: {course_id}
    title: {title or course_id.upper()}
    instructors: [{", ".join(instructors)}]
    enrolment: {{users: [{", ".join(students)}]}}
    gpu: {gpu}
    max_gpu_servers: {seats}
    schedule:
      timezone: UTC
      term: {{first_day: {first_day}, last_day: {first_day + timedelta(days=60)}}}
      windows:
        - {window(start, end)}
      lead_time: {lead}
      grace: {grace}{prewarm_line}
"""


def catalog(*courses: str, research: str = "") -> str:
    """A whole catalog: the CPU default, the given courses, optional research section."""
    text = """\
standing:
  - id: cpu
    title: CPU only
    default: true
courses:
""" + "".join(courses)
    if research:
        text += "research:\n" + research
    return text


def now() -> datetime:
    return datetime.now(UTC)


def write_catalog(folder: Path, text: str) -> Path:
    """Write (or rewrite) the catalog file; the spawner reloads it when it changes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "catalog.yaml"
    path.write_text(text)
    return path


def spawner_config(catalog_dir: Path, gpus: str, extra: str = "") -> str:
    """Hub configuration for SimpleLocalGPUSpawner with simulated GPUs."""
    return f"""
import sys
from pathlib import Path
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "gpuspawner.local.SimpleLocalGPUSpawner"
c.GPUAdmission.catalog_path = {str(catalog_dir)!r}
c.GPUAdmission.gpu_inventory = "simulated"
c.GPUAdmission.simulated_gpus = {gpus}
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
# A refusal must never count as a failure: with a limit of 2, two counted refusals
# would make the hub exit, and every later request in the test would fail.
c.Spawner.consecutive_failure_limit = 2
{extra}
"""


def open_class_catalog(folder: Path, *, title: str, gpu: str) -> Path:
    """A catalog of one course, ml101 (``title``, share ``gpu``, the group ``students``
    enrolled, ``teacher`` its instructor), whose class is on now (UTC, from ten minutes
    ago for two hours), written to ``folder/catalog.yaml``."""
    start = minute(now()) - timedelta(minutes=10)
    end = start + timedelta(minutes=130)
    first_day = (start + timedelta(minutes=10) - timedelta(days=1)).date()
    return write_catalog(
        folder,
        f"""\
courses:
  - id: ml101
    title: {title}
    instructors: [teacher]
    enrolment: {{groups: [students]}}
    gpu: {gpu}
    schedule:
      timezone: UTC
      term: {{first_day: {first_day}, last_day: {first_day + timedelta(days=31)}}}
      windows:
        - {window(start, end)}
""",
    )
