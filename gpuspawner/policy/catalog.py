"""The course catalog: what instructors and admins write in YAML, as one index for lookups
(:class:`Catalog`) with its located errors. The blocks' schema models are in
``catalog_models`` (their field types in ``catalog_fields``), reading files in
``catalog_loading``.

Design notes: docs/design/policy.md, "gpuspawner.policy.catalog".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .catalog_models import (
    Course,
    JobFlavor,
    ResearchAllocation,
    Settings,
    SoftwareEnvironment,
    StandingProfile,
)
from .override_models import OverridesFile
from .yaml_source import LineMap, field_name, line_for

# -- errors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogProblem:
    """One thing wrong with a catalog, located."""

    path: Path
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class CatalogError(ValueError):
    """A catalog that cannot be used; ``problems`` lists every located error."""

    def __init__(self, problems: list[CatalogProblem]):
        self.problems = problems
        count = len(problems)
        heading = (
            "The course catalog has 1 error"
            if count == 1
            else (f"The course catalog has {count} errors")
        )
        super().__init__(heading + ":\n" + "\n".join(f"  {p}" for p in problems))


def field_label(loc: tuple) -> str:
    # Pydantic marks an invalid mapping key with "[key]"; the key itself names the field.
    return field_name(tuple(part for part in loc if part != "[key]"))


@dataclass(frozen=True)
class Origin:
    """Where a part of the catalog is written: its file, its place in the file and the
    file's lines, so a later check (``gpuspawner check``'s warnings) can point at a field
    the way validation errors do."""

    path: Path
    loc: tuple
    lines: LineMap = field(repr=False, compare=False)

    def problem(self, message: str, *fields: Any) -> CatalogProblem:
        """``message`` located at ``fields`` inside this part, such as ``("gpu", "memory")``."""
        loc = self.loc + fields
        return CatalogProblem(self.path, self.line(*fields), field_label(loc), message)

    def line(self, *fields: Any) -> int | None:
        """The line of ``fields`` inside this part (or of the closest part that has one)."""
        return line_for(self.lines, self.loc + fields)


@dataclass
class Catalog:
    """All profiles of the hub, merged from one or more files and indexed for lookups."""

    settings: Settings
    courses: list[Course]
    research: list[ResearchAllocation]
    standing: list[StandingProfile]
    sources: dict[str, Path] = field(default_factory=dict)
    """Where each profile id was defined."""
    flavors: list[JobFlavor] = field(default_factory=list)
    """Job flavors for "Run as Job"."""
    origins: dict[str, Origin] = field(default_factory=dict, repr=False)
    """Where each profile (by id) is written."""
    settings_origin: Origin | None = field(default=None, repr=False)
    """Where the settings are written, if they are."""
    environments: list[SoftwareEnvironment] = field(default_factory=list)
    """The environments courses and allocations can offer (``environments:``)."""
    environment_origins: dict[str, Origin] = field(default_factory=dict, repr=False)
    """Where each environment (by id) is written."""
    overrides: OverridesFile | None = field(default=None, repr=False)
    """Instructors' changes applied to the courses (:mod:`.course_overrides`), if any."""
    override_problems: list[str] = field(default_factory=list, repr=False)
    """Instructors' changes left out, and why (bounds narrowed since, unreadable file)."""

    def __post_init__(self) -> None:
        self.environments_by_id = {e.id: e for e in self.environments}
        self.courses_by_id = {c.id: c for c in self.courses}
        self.flavors_by_id = {f.id: f for f in self.flavors}
        self.reserving_courses = [c for c in self.courses if c.reserved_seats]
        self.profile_cache: dict[str, Any] = {}
        """Profiles built from catalog entries, by id (filled by entitlements)."""
        self.research_by_id = {r.id: r for r in self.research}
        self.standing_by_id = {s.id: s for s in self.standing}
        self._course_users: dict[str, list[Course]] = defaultdict(list)
        self._course_groups: dict[str, list[Course]] = defaultdict(list)
        self._course_instructors: dict[str, list[Course]] = defaultdict(list)
        self._instructor_groups: dict[str, list[Course]] = defaultdict(list)
        for course in self.courses:
            for user in course.enrolment.users:
                self._course_users[user].append(course)
            for group in self.student_groups(course):
                self._course_groups[group].append(course)
            for instructor in course.instructors:
                self._course_instructors[instructor].append(course)
            for group in self.instructor_groups(course):
                self._instructor_groups[group].append(course)
        self._research_users: dict[str, list[ResearchAllocation]] = defaultdict(list)
        self._research_groups: dict[str, list[ResearchAllocation]] = defaultdict(list)
        for grant in self.research:
            for user in grant.users:
                self._research_users[user].append(grant)
            for group in grant.groups:
                self._research_groups[group].append(grant)

    def student_groups(self, course: Course) -> tuple[str, ...]:
        """The hub groups whose members take ``course``: its enrolment groups and the
        ``settings.course_groups.students`` group."""
        template = self.settings.course_groups.students
        groups = list(course.enrolment.groups)
        if template is not None:
            groups.append(template.format(course=course.id))
        return tuple(dict.fromkeys(groups))

    def instructor_groups(self, course: Course) -> tuple[str, ...]:
        """The hub groups whose members teach ``course`` (``settings.course_groups``)."""
        template = self.settings.course_groups.instructors
        return (template.format(course=course.id),) if template is not None else ()

    def teaches(self, course: Course, name: str, groups: frozenset[str] | set[str]) -> bool:
        """True when ``name`` (a member of ``groups``) is an instructor of ``course``."""
        return name in course.instructors or any(
            g in groups for g in self.instructor_groups(course)
        )

    def takes(self, course: Course, name: str, groups: frozenset[str] | set[str]) -> bool:
        """True when ``name`` (a member of ``groups``) is enrolled in ``course``."""
        return name in course.enrolment.users or any(
            g in groups for g in self.student_groups(course)
        )

    def holds(
        self, grant: ResearchAllocation, name: str, groups: frozenset[str] | set[str]
    ) -> bool:
        """True when ``name`` (a member of ``groups``) is granted the research allocation."""
        return name in grant.users or any(g in groups for g in grant.groups)

    def known_groups(self) -> frozenset[str]:
        """Every hub group the catalog gives a meaning to (enrolment, teaching, research,
        standing profiles, job flavors): the groups worth taking from an identity provider."""
        found: set[str] = set()
        for course in self.courses:
            found.update(self.student_groups(course))
            found.update(self.instructor_groups(course))
        for grant in self.research:
            found.update(grant.groups)
        for standing in self.standing:
            found.update(standing.groups)
        for flavor in self.flavors:
            found.update(flavor.access.groups)
        return frozenset(found)

    def courses_for(
        self, name: str, groups: frozenset[str] | set[str]
    ) -> tuple[list[Course], set[str]]:
        """Courses a user takes or teaches (catalog order), and the ids they teach."""
        found: dict[str, Course] = {}
        teaching: set[str] = set()
        for course in self._course_instructors.get(name, ()):
            found[course.id] = course
            teaching.add(course.id)
        for group in groups:
            for course in self._instructor_groups.get(group, ()):
                found[course.id] = course
                teaching.add(course.id)
        for course in self._course_users.get(name, ()):
            found[course.id] = course
        for group in groups:
            for course in self._course_groups.get(group, ()):
                found[course.id] = course
        order = {c.id: i for i, c in enumerate(self.courses)}
        return sorted(found.values(), key=lambda c: order[c.id]), teaching

    def research_for(
        self, name: str, groups: frozenset[str] | set[str]
    ) -> list[ResearchAllocation]:
        """Research allocations granted to a user directly or through a group."""
        found = {g.id: g for g in self._research_users.get(name, ())}
        for group in groups:
            for grant in self._research_groups.get(group, ()):
                found[grant.id] = grant
        order = {g.id: i for i, g in enumerate(self.research)}
        return sorted(found.values(), key=lambda g: order[g.id])

    def students_of(self, course: Course, group_members: dict[str, list[str]]) -> list[str]:
        """Enrolled usernames, resolving groups through ``group_members``."""
        names = list(dict.fromkeys(course.enrolment.users))
        for group in self.student_groups(course):
            for member in group_members.get(group, []):
                if member not in names:
                    names.append(member)
        return names
