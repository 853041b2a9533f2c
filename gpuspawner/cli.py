"""``gpuspawner check``: validate a course catalog and show what it means in practice.

Instructors run it before handing a catalog to the hub::

    gpuspawner check catalog.yaml                      # errors, or a summary of the week
    gpuspawner check catalog/ --from 2024-03-18        # the week from another day
    gpuspawner check catalog.yaml --user alice --groups ml101 --at 2024-03-18T09:55

Errors go to stderr as ``file:line: field: message`` and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from .policy import Catalog, CatalogError, Course, UserIdentity, evaluate, load_catalog
from .policy.catalog import ResearchAllocation, StandingProfile
from .policy.schedule import ClassSession
from .policy.share import GPUShare
from .policy.wording import duration

WEEK = timedelta(days=7)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 fine, 1 catalog errors, 2 usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "check":
        parser.print_help(sys.stderr)
        return 2
    if args.user is None:
        for flag, value in (("--groups", args.groups), ("--admin", args.admin), ("--at", args.at)):
            if value:
                parser.error(f"{flag} describes a user; give --user NAME with it")
    elif args.start is not None:
        parser.error("--from lists the week's classes; with --user, use --at for the moment")
    return check(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuspawner", description="Tools for the campus GPU hub's course catalog."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check_parser = commands.add_parser(
        "check",
        help="validate a catalog and summarise its courses, or show one user's profiles",
        description=(
            "Validate a catalog file or folder. Without --user, summarise every course with "
            "its classes in the next 7 days, then research allocations and standing profiles. "
            "With --user, show the profiles that user would see. Times without an offset are "
            "read in the catalog's time zone (settings.timezone)."
        ),
    )
    check_parser.add_argument("path", metavar="PATH", type=Path, help="catalog file or folder")
    check_parser.add_argument(
        "--from",
        dest="start",
        metavar="ISO_DATETIME",
        type=_moment,
        help="list the classes of the 7 days from this moment instead of from now",
    )
    check_parser.add_argument("--user", metavar="NAME", help="show what this user would see")
    check_parser.add_argument(
        "--groups",
        metavar="A,B",
        type=_names,
        default=frozenset(),
        help="the user's JupyterHub groups, separated by commas",
    )
    check_parser.add_argument("--admin", action="store_true", help="the user is a hub admin")
    check_parser.add_argument(
        "--at", metavar="ISO_DATETIME", type=_moment, help="the moment to look at (default: now)"
    )
    return parser


def _moment(text: str) -> datetime:
    """An ISO date or date and time; naive results get the catalog's zone later."""
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(cleaned)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a date or date and time such as 2024-03-18, 2024-03-18T10:00 or "
            f"2024-03-18T10:00+01:00, got {text!r}"
        ) from None


def _names(text: str) -> frozenset[str]:
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def check(args: argparse.Namespace) -> int:
    """Load the catalog; print its problems (status 1) or the requested view (status 0)."""
    try:
        catalog = load_catalog(args.path)
    except CatalogError as error:
        # In file and line order, the order an instructor edits in.
        for problem in sorted(error.problems, key=lambda p: (str(p.path), p.line or 0)):
            print(problem, file=sys.stderr)
        count = len(error.problems)
        noun = "1 error" if count == 1 else f"{count} errors"
        print(f"{noun}: fix the catalog and run gpuspawner check again.", file=sys.stderr)
        return 1
    zone = ZoneInfo(catalog.settings.timezone)
    if args.user is not None:
        user = UserIdentity(args.user, args.groups, args.admin)
        print_user_view(catalog, user, _aware(args.at, zone))
    else:
        print_summary(catalog, args.path, _aware(args.start, zone))
    return 0


def _aware(moment: datetime | None, zone: tzinfo) -> datetime:
    if moment is None:
        return datetime.now(UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


# -- the catalog summary ------------------------------------------------------------------


def print_summary(catalog: Catalog, path: Path, start: datetime) -> None:
    """Every course with its classes in the 7 days from ``start``, then grants and profiles."""
    zone = ZoneInfo(catalog.settings.timezone)
    counts = ", ".join(
        _count(len(items), noun)
        for items, noun in (
            (catalog.courses, "course"),
            (catalog.research, "research allocation"),
            (catalog.standing, "standing profile"),
        )
    )
    print(f"{path} is a valid catalog: {counts}.")
    local = start.astimezone(zone)
    print(f"Classes are listed for the 7 days from {local:%a %d %b %Y %H:%M} ({zone.key}).")
    show_sources = path.is_dir()
    if catalog.courses:
        print("\nCourses")
        for course in catalog.courses:
            print()
            _print_course(
                catalog, course, start, catalog.sources.get(course.id) if show_sources else None
            )
    if catalog.research:
        print("\nResearch allocations")
        for grant in catalog.research:
            print()
            _print_research(grant, start.astimezone(zone).date())
    if catalog.standing:
        print("\nStanding profiles")
        for profile in catalog.standing:
            print()
            _print_standing(profile)


def _print_course(catalog: Catalog, course: Course, start: datetime, source: Path | None) -> None:
    schedule = course.course_schedule
    zone = schedule.timezone
    print(f"  {course.id}: {course.title}")
    if source is not None:
        _line("File", str(source))
    _line("Time zone", str(zone))
    term = f"{_day(schedule.first_day)} to {_day(schedule.last_day)}"
    if schedule.no_class:
        term += "; no class on " + ", ".join(_day(d) for d in sorted(schedule.no_class))
    _line("Term", term)
    _line("Windows", ", ".join(w.describe() for w in schedule.windows))
    people = []
    if course.instructors:
        people.append("instructors " + ", ".join(course.instructors))
    if catalog.instructor_groups(course):
        people.append("instructor groups " + ", ".join(catalog.instructor_groups(course)))
    if course.enrolment.users:
        people.append("users " + ", ".join(course.enrolment.users))
    if catalog.student_groups(course):
        people.append("groups " + ", ".join(catalog.student_groups(course)))
    _line("People", "; ".join(people) or "nobody enrolled yet")
    _line("GPU share", _share(course.share))
    if course.share is not None:
        seats = (
            "no course limit"
            if course.max_gpu_servers is None
            else f"{_count(course.max_gpu_servers, 'GPU server')} at most"
        )
        _line("Seats", f"{seats}, {course.reserved_seats} reserved during class")
    timing = f"lead time {_span(schedule.lead_time)}, grace {_span(schedule.grace)}"
    timing += f", pre-warm {_span(schedule.prewarm)}" if schedule.prewarm else ", no pre-warm"
    _line("Timing", timing)
    sessions = schedule.week(start)
    if sessions:
        print("    Classes:")
        for session in sessions:
            print(f"      {_session(session, zone)}")
        return
    later = schedule.status(start + WEEK).next_session
    if later is not None:
        _line("Classes", f"none in these 7 days; the next is {_span_of(later, zone)}")
    elif start.astimezone(zone).date() > schedule.last_day:
        _line("Classes", f"none; the term ended on {_day(schedule.last_day)}")
    else:
        _line("Classes", "none in these 7 days, and none left this term")


def _print_research(grant: ResearchAllocation, today: date) -> None:
    print(f"  {grant.id}: {grant.title}")
    granted = []
    if grant.users:
        granted.append("users " + ", ".join(grant.users))
    if grant.groups:
        granted.append("groups " + ", ".join(grant.groups))
    _line("Granted to", "; ".join(granted))
    _line("GPU share", _share(grant.share))
    if grant.max_gpu_servers is not None:
        _line("Seats", f"{_count(grant.max_gpu_servers, 'GPU server')} at most")
    if today > grant.expires:
        valid = f"expired on {_day(grant.expires)}"
    elif grant.starts and today < grant.starts:
        valid = f"starts on {_day(grant.starts)}, expires after {_day(grant.expires)}"
    else:
        valid = f"until {_day(grant.expires)} (its last day)"
    _line("Valid", valid)


def _print_standing(profile: StandingProfile) -> None:
    default = " (the default)" if profile.default else ""
    print(f"  {profile.id}: {profile.title}{default}")
    if profile.groups:
        _line("Open to", "groups " + ", ".join(profile.groups) + ", and admins")
    else:
        _line("Open to", "everyone")
    _line("GPU share", _share(profile.share))


# -- one user's view ----------------------------------------------------------------------


def print_user_view(catalog: Catalog, user: UserIdentity, now: datetime) -> None:
    """The profiles ``user`` would see at ``now``: available or not, and the status sentence."""
    zone = ZoneInfo(catalog.settings.timezone)
    about = ["admin"] if user.admin else []
    if user.groups:
        about.append("groups " + ", ".join(sorted(user.groups)))
    who = user.name + (f" ({'; '.join(about)})" if about else "")
    print(f"Profiles for {who} at {now.astimezone(zone):%a %d %b %Y %H:%M} ({zone.key}):")
    entitlements = evaluate(catalog, user, now)
    if not entitlements:
        print(f"\n  No profiles: {user.name} is not enrolled in any course or allocation.")
        return
    for entitlement in entitlements:
        profile = entitlement.profile
        mark = "[available]" if entitlement.available else "[not now]  "
        default = ", default" if profile.default else ""
        role = f"{profile.kind.value}, {entitlement.role.value}{default}"
        print(f"\n  {mark} {profile.id}: {profile.title} ({role})")
        print(f"              {entitlement.status}")
        print(f"              GPU share: {_share(profile.share)}")


# -- wording ------------------------------------------------------------------------------


def _line(label: str, text: str) -> None:
    print(f"    {label + ':':<12} {text}")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _day(value: date) -> str:
    return f"{value:%a %d %b %Y}"


def _span(span: timedelta | None) -> str:
    if not span:
        return "none"
    return duration(span)


def _share(share: GPUShare | None) -> str:
    return share.describe() if share is not None else "none (CPU only)"


def _span_of(session: ClassSession, zone: tzinfo) -> str:
    """``Mon 18 Mar 2024 10:00-12:00``; ``(+1 day)`` when the class runs past midnight."""
    start, end = session.start.astimezone(zone), session.end.astimezone(zone)
    text = f"{start:%a %d %b %Y %H:%M}-{end:%H:%M}"
    days = (end.date() - start.date()).days
    if days:
        text += f" (+{_count(days, 'day')})"
    return text


def _session(session: ClassSession, zone: tzinfo) -> str:
    opens = session.opens_at.astimezone(zone)
    reclaim = session.reclaim_at.astimezone(zone)
    return (
        f"{_span_of(session, zone)} (students may start from {opens:%H:%M}, "
        f"servers reclaimed at {reclaim:%H:%M})"
    )
