"""``gpuspawner usage``: GPU-hours from the usage record, as CSV or JSON.

Design notes: docs/design/accounting.md, "gpuspawner.accounting.usage_command".
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, date, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from ..policy import Catalog, CatalogError, load_catalog
from .intervals import days_range
from .report import GROUPINGS, NamedRange, UsageReport, usage_report
from .store import UsageStore

DB_VARIABLE = "GPUSPAWNER_USAGE_DB"


def add_usage_parser(commands: Any) -> None:
    """The ``usage`` command's arguments, on ``gpuspawner``'s sub-command parser."""
    parser = commands.add_parser(
        "usage",
        help="report GPU-hours per user, course, research allocation, group or term",
        description=(
            "GPU-hours (share x time) of servers and jobs from the usage record, for a "
            "date range or a term, as CSV or JSON. Days are whole days in the catalog's "
            "time zone (UTC without --catalog); --to is included."
        ),
    )
    parser.add_argument(
        "--db",
        default=os.environ.get(DB_VARIABLE),
        help=f"the usage record's SQLAlchemy URL (default: ${DB_VARIABLE})",
    )
    parser.add_argument("--catalog", help="the course catalog, for terms and its time zone")
    parser.add_argument("--from", dest="first_day", type=_day, metavar="DATE")
    parser.add_argument("--to", dest="last_day", type=_day, metavar="DATE")
    parser.add_argument("--term", metavar="NAME", help="a term of settings.terms, or a course id")
    parser.add_argument("--by", choices=GROUPINGS, default="user")
    parser.add_argument("--course", metavar="ID", help="only the GPU-hours charged to this course")
    parser.add_argument("--format", choices=("csv", "json"), default="csv")


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a date as YYYY-MM-DD, such as 2026-09-14, got {text!r}"
        ) from None


class UsageCommandError(Exception):
    """A problem with the command's arguments, as a sentence (``str()``: in the command's
    words, ``--from DATE``), and ``web``: the same in the usage API's words (``from=DATE``),
    for a browser or a script that never typed the command."""

    def __init__(self, command: str, web: str | None = None):
        super().__init__(command)
        self.web = web or command


def catalog_terms(catalog: Catalog) -> list[NamedRange]:
    """The catalog's named terms as UTC ranges (whole days in the catalog's zone)."""
    zone = ZoneInfo(catalog.settings.timezone)
    return [
        NamedRange(term.name, *days_range(term.first_day, term.last_day, zone))
        for term in catalog.settings.terms
    ]


def term_range(catalog: Catalog, name: str) -> tuple[datetime, datetime]:
    """The range of ``name``: a term of ``settings.terms``, or a course's term."""
    for term in catalog_terms(catalog):
        if term.name == name:
            return term.begin, term.finish
    course = catalog.courses_by_id.get(name)
    if course is not None:
        schedule = course.course_schedule
        return days_range(schedule.first_day, schedule.last_day, schedule.timezone)
    known = [t.name for t in catalog.settings.terms] + [c.id for c in catalog.courses]
    raise UsageCommandError(
        f"There is no term or course {name!r} in the catalog; use one of: "
        f"{', '.join(known) or 'none (add settings.terms)'}."
    )


def build_report(
    store: UsageStore,
    *,
    catalog: Catalog | None,
    first_day: date | None,
    last_day: date | None,
    term: str | None,
    by: str,
    now: datetime,
    course: str | None = None,
    courses: list[str] | None = None,
) -> UsageReport:
    """The report the command (and the usage API) prints; raises :class:`UsageCommandError`."""
    zone: tzinfo = ZoneInfo(catalog.settings.timezone) if catalog else UTC
    if term is not None:
        if first_day or last_day:
            raise UsageCommandError(
                "Give either --term or --from/--to, not both.",
                "Give either term=NAME or from=DATE&to=DATE in the address, not both.",
            )
        if catalog is None:
            raise UsageCommandError("--term needs the catalog that names the terms: --catalog.")
        begin, finish = term_range(catalog, term)
    else:
        if first_day is None or last_day is None:
            raise UsageCommandError(
                "Give the range as --from DATE --to DATE, or --term NAME.",
                "Say which days the report covers: add from=DATE&to=DATE to the address "
                "(dates such as 2026-09-14, both days included), or term=NAME for a term "
                "of the catalog or a course's term.",
            )
        if first_day > last_day:
            raise UsageCommandError(
                f"--from {first_day} comes after --to {last_day}.",
                f"The report's first day ({first_day}) comes after its last day "
                f"({last_day}); swap from= and to= in the address.",
            )
        begin, finish = days_range(first_day, last_day, zone)
    if by == "term" and catalog is None:
        raise UsageCommandError("--by term needs the catalog that names the terms: --catalog.")
    intervals = store.intervals(begin, finish, course=course, courses=courses)
    return usage_report(
        intervals,
        begin=begin,
        finish=finish,
        now=now,
        by=by,
        terms=catalog_terms(catalog) if catalog else (),
    )


def run_usage(args: argparse.Namespace, now: datetime | None = None) -> int:
    """Print the report; 0 on success, 2 for a problem with the arguments or the catalog."""
    if not args.db:
        print(
            f"Give the usage record's URL: --db URL, or set ${DB_VARIABLE} (the hub's "
            "c.GPUAdmission.usage_db_url).",
            file=sys.stderr,
        )
        return 2
    catalog = None
    if args.catalog:
        try:
            catalog = load_catalog(args.catalog)
        except CatalogError as error:
            print(error, file=sys.stderr)
            return 2
    store = UsageStore(args.db)
    try:
        report = build_report(
            store,
            catalog=catalog,
            first_day=args.first_day,
            last_day=args.last_day,
            term=args.term,
            by=args.by,
            now=now or datetime.now(UTC),
            course=args.course,
        )
    except UsageCommandError as error:
        print(error, file=sys.stderr)
        return 2
    finally:
        store.close()
    sys.stdout.write(report.to_csv() if args.format == "csv" else report.to_json_text())
    return 0
