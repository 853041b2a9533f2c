"""Usage reports: GPU-hours per user, course, research allocation, group, profile or term.

Design notes: docs/design/accounting.md, "gpuspawner.accounting.report".
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from ..policy.budget_spec import format_gpu_hours
from ..policy.units import format_fraction
from .intervals import UsageInterval

GROUPINGS = ("user", "course", "allocation", "group", "profile", "term")
"""What a report's lines can be per (``--by``)."""

DECIMAL_PLACES = 6


@dataclass(frozen=True)
class NamedRange:
    """A span of time a report line can be per (a named term), ``[begin, finish)``."""

    name: str
    begin: datetime
    finish: datetime


@dataclass
class ReportLine:
    """The GPU-hours of one user, course, allocation, group, profile or term."""

    name: str
    server_gpu_hours: Fraction = Fraction(0)
    job_gpu_hours: Fraction = Fraction(0)
    intervals: int = 0
    running: int = 0
    """Intervals still open at the report's ``now`` (counted up to it)."""
    observed_seconds: float = 0.0
    busy_seconds: float = 0.0
    device_wide_seconds: float = 0.0

    @property
    def gpu_hours(self) -> Fraction:
        return self.server_gpu_hours + self.job_gpu_hours

    def add(self, interval: UsageInterval, hours: Fraction, running: bool) -> None:
        if interval.kind == "job":
            self.job_gpu_hours += hours
        else:
            self.server_gpu_hours += hours
        self.intervals += 1
        self.running += running
        if interval.use is not None:
            self.observed_seconds += interval.use.observed_seconds
            self.busy_seconds += interval.use.busy_seconds
            self.device_wide_seconds += interval.use.device_wide_seconds


@dataclass
class UsageReport:
    """A report's lines (sorted by name) and its total, for ``[begin, finish)``."""

    by: str
    begin: datetime | None
    finish: datetime | None
    now: datetime
    lines: list[ReportLine] = field(default_factory=list)
    total: ReportLine = field(default_factory=lambda: ReportLine("total"))

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per line: the CSV's rows and the JSON's ``rows``."""
        return [self._row(line) for line in self.lines]

    def _row(self, line: ReportLine) -> dict[str, Any]:
        return {
            self.by: line.name,
            "from": self.begin.isoformat() if self.begin else "",
            "to": self.finish.isoformat() if self.finish else "",
            "server_gpu_hours": format_gpu_hours(line.server_gpu_hours, DECIMAL_PLACES),
            "job_gpu_hours": format_gpu_hours(line.job_gpu_hours, DECIMAL_PLACES),
            "gpu_hours": format_gpu_hours(line.gpu_hours, DECIMAL_PLACES),
            "gpu_hours_exact": format_fraction(line.gpu_hours),
            "intervals": line.intervals,
            "running": line.running,
            **_use_fields(line),
        }

    def to_csv(self) -> str:
        """The lines as CSV, with a header row."""
        out = io.StringIO()
        fields = [self.by, "from", "to", "server_gpu_hours", "job_gpu_hours", "gpu_hours"]
        fields += ["gpu_hours_exact", "intervals", "running", *USE_FIELDS]
        writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows())
        return out.getvalue()

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict: range, grouping, rows and total."""
        total = self._row(self.total)
        total.pop(self.by)
        return {
            "by": self.by,
            "from": self.begin.isoformat() if self.begin else None,
            "to": self.finish.isoformat() if self.finish else None,
            "generated": self.now.isoformat(),
            "rows": self.rows(),
            "total": total,
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"


USE_FIELDS = ("observed_hours", "used_gpu_hours", "mean_utilization_pct", "device_wide_pct")


def _use_fields(line: ReportLine) -> dict[str, float | None]:
    """What the line's intervals used, where it was observed (None: never observed)."""
    if line.observed_seconds <= 0:
        return dict.fromkeys(USE_FIELDS)
    return {
        "observed_hours": round(line.observed_seconds / 3600, DECIMAL_PLACES),
        "used_gpu_hours": round(line.busy_seconds / 3600, DECIMAL_PLACES),
        "mean_utilization_pct": round(100 * line.busy_seconds / line.observed_seconds, 1),
        "device_wide_pct": round(100 * line.device_wide_seconds / line.observed_seconds, 1),
    }


def _names(interval: UsageInterval, by: str) -> Sequence[str]:
    if by == "user":
        return (interval.owner,)
    if by == "course":
        if interval.course:
            return (interval.course,)
        return (f"research allocation {interval.allocation}" if interval.allocation else "",)
    if by == "allocation":
        return (interval.allocation or "",)
    if by == "profile":
        return (interval.profile,)
    if by == "group":
        return interval.groups or ("",)
    raise ValueError(f"a report is by one of {', '.join(GROUPINGS)}, not {by!r}")


def usage_report(
    intervals: Iterable[UsageInterval],
    *,
    begin: datetime | None,
    finish: datetime | None,
    now: datetime,
    by: str = "user",
    terms: Sequence[NamedRange] = (),
) -> UsageReport:
    """GPU-hours of ``intervals`` inside ``[begin, finish)``, one line per ``by``.

    ``terms``: the named ranges of ``by="term"`` (each interval counts in each term it
    overlaps, clipped to it and to the report's range).
    """
    if by not in GROUPINGS:
        raise ValueError(f"a report is by one of {', '.join(GROUPINGS)}, not {by!r}")
    report = UsageReport(by, begin, finish, now)
    lines: dict[str, ReportLine] = {}
    for interval in intervals:
        running = interval.ended is None
        hours = interval.gpu_hours(begin, finish, now=now)
        counted = hours > 0 or (running and _inside(interval.started, begin, finish))
        if counted:
            report.total.add(interval, hours, running)
        if by == "term":
            for term in terms:
                low = max(begin, term.begin) if begin else term.begin
                high = min(finish, term.finish) if finish else term.finish
                part = interval.gpu_hours(low, high, now=now)
                if part > 0:
                    lines.setdefault(term.name, ReportLine(term.name)).add(interval, part, running)
            continue
        if not counted:
            continue
        for name in _names(interval, by):
            lines.setdefault(name, ReportLine(name)).add(interval, hours, running)
    # Named lines first, in order; the line without a name (no course, no group) last.
    report.lines = [lines[name] for name in sorted(lines, key=lambda name: (name == "", name))]
    return report


def _inside(moment: datetime, begin: datetime | None, finish: datetime | None) -> bool:
    return (begin is None or moment >= begin) and (finish is None or moment < finish)
