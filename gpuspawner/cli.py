"""``gpuspawner check``: validate a course catalog and show what it means in practice.

Design notes: docs/design/hub.md, "gpuspawner.cli".
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .accounting.usage_command import add_usage_parser, run_usage
from .policy import (
    Catalog,
    CatalogError,
    CatalogProblem,
    Course,
    UserIdentity,
    evaluate,
    load_catalog,
)
from .policy.budget_spec import budget_text
from .policy.capacity import several_nodes_on_one_machine
from .policy.catalog import Origin
from .policy.catalog_models import (
    ProfileSection,
    ResearchAllocation,
    SoftwareEnvironment,
    StandingProfile,
)
from .policy.course_overrides import describe_overrides
from .policy.schedule import ClassSession, GapClash, WeeklyWindow, gap_clashes
from .policy.share import GPUShare
from .policy.units import SIZE_HINT, format_mib, parse_size_mib
from .policy.wording import duration

WEEK = timedelta(days=7)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 fine, 1 catalog errors, 2 usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "usage":
        return run_usage(args)
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
    check_parser.add_argument(
        "--gpu-memory",
        metavar="SIZE",
        type=_gpu_memory,
        action="append",
        default=[],
        help="the memory of the hub's GPUs, such as 24GiB (once per kind of GPU): warn about "
        "GPU shares that ask for more memory than the largest one has (on Kubernetes, where "
        "the GPUs are the nodes'); without it, the hub's inventory is used",
    )
    check_parser.add_argument(
        "--hub-config",
        metavar="FILE",
        type=Path,
        help="the hub's jupyterhub_config.py: compare GPU shares with the GPUs it would use on "
        "one machine (c.GPUAdmission.gpu_inventory and simulated_gpus, read without running "
        "the file); without it, the GPUs NVML finds on this machine",
    )
    add_usage_parser(commands)
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


def _gpu_memory(text: str) -> int:
    try:
        return parse_size_mib(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {SIZE_HINT}, got {text!r}") from None


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
    try:
        inventory = gpu_inventory(args.gpu_memory, args.hub_config)
    except HubConfigError as error:
        print(f"gpuspawner check: {error}", file=sys.stderr)
        return 2
    if not args.gpu_memory:  # one machine's hub: its jobs cannot span nodes
        refused = one_machine_problems(catalog)
        for problem in refused:
            print(problem, file=sys.stderr)
        if refused:
            noun = "1 flavor" if len(refused) == 1 else f"{len(refused)} flavors"
            print(
                f"{noun} cannot run on one machine: fix the catalog, or give --gpu-memory SIZE "
                "(the GPUs of the nodes) to check it for Kubernetes.",
                file=sys.stderr,
            )
            return 1
    print_warnings(catalog_warnings(catalog, inventory))
    for left_out in catalog.override_problems:
        print(f"warning: an instructor's change is left out: {left_out}", file=sys.stderr)
    zone = ZoneInfo(catalog.settings.timezone)
    if args.user is not None:
        user = UserIdentity(args.user, args.groups, args.admin)
        print_user_view(catalog, user, _aware(args.at, zone))
    else:
        print_summary(catalog, args.path, _aware(args.start, zone), inventory)
    return 0


def _aware(moment: datetime | None, zone: tzinfo) -> datetime:
    if moment is None:
        return datetime.now(UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


# -- the GPUs shares are compared with ------------------------------------------------------


@dataclass(frozen=True)
class GPUInventory:
    """The GPUs ``gpuspawner check`` compares GPU shares with, and where they come from."""

    largest_mib: int | None
    """The memory of the largest GPU; None: no GPU is known, so nothing is compared."""
    largest: str
    """The largest GPU in words, for a warning: ``the largest GPU NVML finds here (H200)``."""
    summary: str
    """A sentence for the summary: which inventory was used, or why none was."""


class HubConfigError(ValueError):
    """A ``--hub-config`` file whose GPU settings cannot be read."""


GPU_SETTINGS = ("gpu_inventory", "simulated_gpus")


def gpu_inventory(gpu_memory: list[int], hub_config: Path | None) -> GPUInventory:
    """The GPUs the hub would use: ``gpu_memory`` sizes when given; otherwise the
    one-machine inventory of ``hub_config`` (or of a hub with the default settings), found
    the way the hub finds it (:meth:`GPUAdmission.local_devices`: NVML, or simulated GPUs)."""
    if gpu_memory:
        sizes = ", ".join(format_mib(m) for m in sorted(set(gpu_memory)))
        return GPUInventory(
            max(gpu_memory),
            "the largest GPU given with --gpu-memory",
            f"GPU shares are compared with the GPUs given with --gpu-memory ({sizes}).",
        )
    settings = read_hub_gpu_settings(hub_config) if hub_config is not None else {}
    from traitlets import TraitError

    from .core.admission import GPUAdmission  # the hub's own inventory; heavy, so only here

    try:
        admission = GPUAdmission(**settings)
        devices = admission.local_devices()
    except (TraitError, ValueError, TypeError) as error:
        raise HubConfigError(
            f"{hub_config}: c.GPUAdmission's GPU settings are not valid ({error}); fix them, "
            "or give --gpu-memory SIZE instead"
        ) from None
    if not devices:
        if hub_config is not None:
            mode = admission.gpu_inventory
            detail = {
                "nvml": "NVML finds no GPU here",
                "simulated": "its simulated_gpus list none",
            }.get(mode, "NVML finds no GPU here, and its simulated_gpus list none")
            why = (
                f"the hub configured in {hub_config} would have none on this machine "
                f"(gpu_inventory {mode!r}: {detail}). Give --gpu-memory SIZE"
            )
        else:
            why = (
                "NVML finds none on this machine. Give --hub-config FILE (the hub's "
                "simulated GPUs) or --gpu-memory SIZE"
            )
        return GPUInventory(
            None, "", f"GPU shares are not compared with any GPU: {why} to compare them."
        )
    largest = max(devices, key=lambda d: d.memory_mib)
    labels = ", ".join(d.label for d in devices)
    if largest.simulated:
        source = f"the simulated GPUs of c.GPUAdmission.simulated_gpus in {hub_config}"
    else:
        source = "the GPUs NVML finds on this machine"
    return GPUInventory(
        largest.memory_mib,
        f"the largest of {source} ({largest.model})",
        f"GPU shares are compared with {source}: {labels}.",
    )


def read_hub_gpu_settings(path: Path) -> dict[str, Any]:
    """``c.GPUAdmission.gpu_inventory`` and ``simulated_gpus`` as ``path`` sets them, read
    without running it (a hub config may start processes or write files as it loads); the
    last assignment wins, as when the hub runs it (one inside a condition counts as if it
    ran). Each must be written as a literal."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except OSError as error:
        raise HubConfigError(f"{path} cannot be read: {error.strerror}") from None
    except (SyntaxError, ValueError) as error:
        raise HubConfigError(
            f"{path} is not valid Python ({error}); give the hub's jupyterhub_config.py"
        ) from None
    found: dict[str, Any] = {}
    assignments = [
        (node.lineno, target, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
    ]
    for line, target, value in sorted(assignments, key=lambda item: item[0]):
        name = _gpu_admission_setting(target)
        if name is None:
            continue
        try:
            found[name] = ast.literal_eval(value)
        except ValueError:
            raise HubConfigError(
                f"{path}:{line}: c.GPUAdmission.{name} is computed, not written as a value, "
                "so gpuspawner check cannot read it without running the file; write it as a "
                "literal, or give --gpu-memory SIZE instead"
            ) from None
    return found


def _gpu_admission_setting(target: ast.expr) -> str | None:
    """``simulated_gpus`` for the target ``c.GPUAdmission.simulated_gpus``, and so on."""
    if (
        isinstance(target, ast.Attribute)
        and target.attr in GPU_SETTINGS
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "GPUAdmission"
        and isinstance(target.value.value, ast.Name)
        and target.value.value.id == "c"
    ):
        return target.attr
    return None


# -- warnings -----------------------------------------------------------------------------


def one_machine_problems(catalog: Catalog) -> list[CatalogProblem]:
    """The job flavors on several nodes, which a hub on one machine refuses, located."""
    return [
        catalog.origins[flavor.id].problem(
            f"asks for {flavor.nodes} nodes, but {several_nodes_on_one_machine(flavor.nodes)}",
            "gpu",
            "nodes",
        )
        for flavor in catalog.flavors
        if flavor.nodes > 1
    ]


def catalog_warnings(
    catalog: Catalog, inventory: GPUInventory | None = None
) -> list[CatalogProblem]:
    """What a valid catalog says that is probably not meant, located like errors.

    ``inventory``: the hub's GPUs, when known (GPU shares larger than its largest warn).
    """
    warnings: list[CatalogProblem] = []
    for course in catalog.courses:
        warnings += _window_warnings(course, catalog.origins[course.id])
    profiles: list[Course | ResearchAllocation | StandingProfile] = [
        *catalog.courses,
        *catalog.research,
        *catalog.standing,
    ]
    gpu_profiles = [p for p in profiles if p.share is not None]
    for profile in gpu_profiles:
        if isinstance(profile, Course | ResearchAllocation) and profile.max_gpu_servers == 0:
            what = "course" if isinstance(profile, Course) else "research allocation"
            warnings.append(
                catalog.origins[profile.id].problem(
                    f"is 0, so nobody can start this {what} with its GPU share; raise it to "
                    "the number of GPU servers it may run at once, or remove it for no limit",
                    "max_gpu_servers",
                )
            )
    if (
        catalog.settings.max_gpu_servers_per_user == 0
        and gpu_profiles
        and catalog.settings_origin is not None
    ):
        warnings.append(
            catalog.settings_origin.problem(
                "is 0, so only hub admins can start a profile with a GPU share; raise it to "
                "the number of GPU servers one person may run at once (1 is usual)",
                "max_gpu_servers_per_user",
            )
        )
    warnings += _environment_warnings(catalog, profiles)
    largest = inventory.largest_mib if inventory is not None else None
    if inventory is not None and largest is not None:
        shares = [(p.id, p.share) for p in (*gpu_profiles, *catalog.flavors)]
        for profile_id, share in shares:
            if share is not None and share.memory_mib and share.memory_mib > largest:
                warnings.append(
                    catalog.origins[profile_id].problem(
                        f"asks for {format_mib(share.memory_mib)} of GPU memory, more than the "
                        f"{format_mib(largest)} of {inventory.largest}, so it can never "
                        "start; lower it, or check which GPUs the hub has",
                        "gpu",
                        "memory",
                    )
                )
    return sorted(warnings, key=lambda w: (str(w.path), w.line or 0))


def _environment_warnings(
    catalog: Catalog, profiles: Sequence[ProfileSection]
) -> list[CatalogProblem]:
    """Environments that cannot work as written: a GPU requirement offered by a profile
    without a GPU, a Python environment that is not on this machine, one nobody offers."""
    warnings: list[CatalogProblem] = []
    offered: set[str] = set()
    for profile in profiles:
        for position, environment in enumerate(profile.offered_environments):
            offered.add(environment.id)
            if environment.requires is not None and profile.share is None:
                warnings.append(
                    catalog.origins[profile.id].problem(
                        f"offers {environment.id}, which needs "
                        f"{environment.requires.describe()}, but gives no GPU; add a gpu "
                        "share, or offer an environment without a GPU requirement",
                        "environments",
                        position,
                    )
                )
    for environment in catalog.environments:
        origin = catalog.environment_origins[environment.id]
        if environment.id not in offered:
            warnings.append(
                origin.problem(
                    "is offered by no course, research allocation or standing profile; list "
                    "its id under a profile's environments: to offer it",
                    "id",
                )
            )
        server = Path(environment.python or "") / "bin" / "jupyterhub-singleuser"
        if environment.python and not server.is_file():
            warnings.append(
                origin.problem(
                    f"{server} is not on this machine; if the hub runs its servers here, "
                    "install jupyterhub (and jupyterlab) into that environment",
                    "python",
                )
            )
    return warnings


def _window_warnings(course: Course, origin: Origin) -> list[CatalogProblem]:
    """Windows that meet a daylight-saving gap, and windows that overlap one another."""
    schedule = course.course_schedule
    zone = schedule.timezone
    windows = [
        (index, window)
        for index, spec in enumerate(course.schedule.windows)
        for window in spec.weekly()
    ]
    warnings = []
    for index, window in windows:
        clashes = gap_clashes(
            window, zone, schedule.first_day, schedule.last_day, schedule.no_class
        )
        for wholly in (True, False):
            chosen = [c for c in clashes if c.wholly == wholly]
            if chosen:
                warnings.append(
                    origin.problem(_gap_message(window, zone, chosen), "schedule", "windows", index)
                )
    for position, (index, window) in enumerate(windows):
        for other_index, other in windows[:position]:
            if window.overlaps(other):
                other_line = origin.line("schedule", "windows", other_index)
                warnings.append(
                    origin.problem(
                        f"{window.describe()} overlaps {other.describe()} "
                        f"(windows[{other_index}], line {other_line}); the hub merges "
                        "overlapping windows into one class, so join them into one window or "
                        "correct the times",
                        "schedule",
                        "windows",
                        index,
                    )
                )
    return warnings


def _gap_message(window: WeeklyWindow, zone: tzinfo, clashes: list[GapClash]) -> str:
    first = clashes[0]
    days = ", ".join(_day(c.day) for c in clashes)
    jump = f"clocks jump from {first.jump_from:%H:%M} to {first.jump_to:%H:%M}"
    where = f"the daylight-saving gap of {zone} on {days} ({jump})"
    if first.wholly:
        dates = ", ".join(c.day.isoformat() for c in clashes)
        return (
            f"{window.describe()} lies wholly in {where}, so there is no class then; move the "
            f"window out of {first.jump_from:%H:%M}-{first.jump_to:%H:%M}, or add {dates} to "
            "no_class to make that plain"
        )
    if first.starts_in_gap:
        return (
            f"{window.describe()} starts in {where}, so that class starts at "
            f"{first.jump_to:%H:%M}; move the window if it should start on time"
        )
    return (
        f"{window.describe()} ends in {where}, so that class ends when the clocks jump; move "
        "the window if it should last its full time"
    )


def print_warnings(warnings: list[CatalogProblem]) -> None:
    """Each warning as ``file:line: warning: field: message`` on stderr, then a count."""
    if not warnings:
        return
    for warning in warnings:
        where = f"{warning.path}:{warning.line}" if warning.line else str(warning.path)
        field = f"{warning.field}: " if warning.field else ""
        print(f"{where}: warning: {field}{warning.message}", file=sys.stderr)
    noun = _count(len(warnings), "warning")
    print(
        f"{noun}: the hub accepts this catalog, but check that this is what you mean.",
        file=sys.stderr,
    )


# -- the catalog summary ------------------------------------------------------------------


def print_summary(
    catalog: Catalog, path: Path, start: datetime, inventory: GPUInventory | None = None
) -> None:
    """Every course with its classes in the 7 days from ``start``, then grants and profiles;
    which GPUs the shares were compared with (``inventory``)."""
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
    if inventory is not None:
        print(inventory.summary)
    experimental = catalog.settings.experimental_zone
    if experimental is not None:
        in_zone = [
            p.id
            for p in (*catalog.courses, *catalog.research, *catalog.standing)
            if p.zone == "experimental"
        ]
        volume = f", volume {experimental.volume} on Kubernetes" if experimental.volume else ""
        print(
            f"Experimental zone: wiped every day at {experimental.wipe_at:%H:%M} ({zone.key}), "
            f"warning {_span(experimental.warning)} before{volume}; profiles: "
            f"{', '.join(in_zone) or 'none yet'}."
        )
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
    if catalog.environments:
        print("\nEnvironments")
        for environment in catalog.environments:
            print()
            _print_environment(catalog, environment)


def _print_environment(catalog: Catalog, environment: SoftwareEnvironment) -> None:
    print(f"  {environment.id}: {environment.title}")
    if environment.contains:
        _line("Contains", ", ".join(environment.contains))
    if environment.image:
        _line("Image", environment.image)
    if environment.python:
        _line("Python", environment.python)
    if environment.requires:
        _line("Needs", environment.requires.describe())
    profiles = [*catalog.courses, *catalog.research, *catalog.standing]
    offered_by = [p.id for p in profiles if environment in p.offered_environments]
    _line("Offered by", ", ".join(offered_by) or "nobody yet")


def _print_environments(profile: ProfileSection) -> None:
    """The environments a profile offers, the default first, or nothing without a choice."""
    ids = [e.id for e in profile.offered_environments]
    if ids:
        _line("Environments", f"{ids[0]} (the default)" + "".join(f", {i}" for i in ids[1:]))


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
    _print_environments(course)
    if course.share is not None:
        seats = (
            "no course limit"
            if course.max_gpu_servers is None
            else f"{_count(course.max_gpu_servers, 'GPU server')} at most"
        )
        _line("Seats", f"{seats}, {course.reserved_seats} reserved during class")
    if course.budget is not None:
        hours = budget_text(course.budget.gpu_hours_per_student_per_week)
        _line("Budget", f"{hours} GPU-hours per student per week, from Monday 00:00 ({zone})")
    timing = f"lead time {_span(schedule.lead_time)}, grace {_span(schedule.grace)}"
    timing += f", pre-warm {_span(schedule.prewarm)}" if schedule.prewarm else ", no pre-warm"
    _line("Timing", timing)
    changes = describe_overrides(course)
    if changes:
        _line("Instructors", "changed on the course page: " + "; ".join(changes))
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
    _print_environments(grant)
    if grant.max_gpu_servers is not None:
        _line("Seats", f"{_count(grant.max_gpu_servers, 'GPU server')} at most")
    if grant.budget is not None:
        hours = budget_text(grant.budget.gpu_hours_per_term)
        _line("Budget", f"{hours} GPU-hours for all its holders together, until it expires")
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
    _print_environments(profile)


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
        if profile.environments:
            choices = ", ".join(e.id for e in profile.environments)
            print(f"              Environments: {choices}")


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
