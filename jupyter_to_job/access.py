"""Who may do what with whose jobs: the one place the job service decides it.

Design notes: docs/design/jobs.md, "jupyter_to_job.access".
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuspawner.policy import Catalog, UserIdentity

from .scopes import READ_JOBS_SCOPE, WRITE_JOBS_SCOPE


class Access(enum.IntEnum):
    """What a caller may do with one job (each level includes the ones below)."""

    NONE = 0
    READ = 1
    """List, describe, read logs, download outputs."""
    WRITE = 2
    """Also stop and delete (create is always for oneself)."""


@dataclass(frozen=True)
class Grant:
    """Whose jobs one scope (with its filters) covers."""

    everyone: bool = False
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @property
    def held(self) -> bool:
        """True when the token holds the scope in any form."""
        return self.everyone or bool(self.users) or bool(self.groups)

    def covers(self, owner: str, owner_groups: frozenset[str]) -> bool:
        return self.everyone or owner in self.users or bool(self.groups & owner_groups)


def job_grants(scopes: Iterable[str]) -> dict[Access, Grant]:
    """The read and write grants in a token's (expanded) scopes.

    The hub resolves ``!user`` to ``!user=<owner>`` in the scopes it reports; filters
    that name no user or group (``!server=``, ``!service=``) cover no job.
    """
    found: dict[Access, dict[str, set[str] | bool]] = {
        level: {"everyone": False, "users": set(), "groups": set()}
        for level in (Access.READ, Access.WRITE)
    }
    for scope in scopes:
        base, _, scope_filter = scope.partition("!")
        if base == WRITE_JOBS_SCOPE:
            levels = (Access.WRITE, Access.READ)
        elif base == READ_JOBS_SCOPE:
            levels = (Access.READ,)
        else:
            continue
        kind, _, value = scope_filter.partition("=")
        for level in levels:
            entry = found[level]
            if not scope_filter:
                entry["everyone"] = True
            elif kind == "user" and value:
                entry["users"].add(value)  # type: ignore[union-attr]
            elif kind == "group" and value:
                entry["groups"].add(value)  # type: ignore[union-attr]
    return {
        level: Grant(
            everyone=bool(entry["everyone"]),
            users=frozenset(entry["users"]),  # type: ignore[arg-type]
            groups=frozenset(entry["groups"]),  # type: ignore[arg-type]
        )
        for level, entry in found.items()
    }


@dataclass(frozen=True)
class Caller:
    """Who is asking, as the hub identified their token."""

    name: str
    kind: str = "user"
    """``user`` or ``service``."""
    admin: bool = False
    groups: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    grants: dict[Access, Grant] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "grants", job_grants(self.scopes))

    @classmethod
    def from_hub_model(cls, model: Mapping[str, object]) -> Caller:
        """From the model ``/hub/api/user`` returns for a token."""
        groups = model.get("groups") or []
        scopes = model.get("scopes") or []
        return cls(
            name=str(model["name"]),
            kind=str(model.get("kind") or "user"),
            admin=bool(model.get("admin")),
            groups=frozenset(str(g) for g in groups),  # type: ignore[union-attr]
            scopes=frozenset(str(s) for s in scopes),  # type: ignore[union-attr]
        )

    @property
    def is_user(self) -> bool:
        return self.kind == "user"

    @property
    def identity(self) -> UserIdentity:
        """The identity the catalog policy decides flavors for."""
        return UserIdentity(self.name, self.groups, self.admin and self.is_user)

    def holds(self, level: Access) -> bool:
        """True when the token holds the scope of ``level`` in any form."""
        return self.grants[level].held


@dataclass(frozen=True)
class Roster:
    """The students of the courses one person teaches: enrolled users and groups."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.users or self.groups)

    def includes(self, owner: str, owner_groups: frozenset[str]) -> bool:
        return owner in self.users or bool(self.groups & owner_groups)


def teaching_roster(
    catalog: Catalog | None, instructor: str, instructor_groups: frozenset[str] = frozenset()
) -> Roster:
    """Who ``instructor`` (a member of ``instructor_groups``) teaches, over every course of
    the catalog they teach by name or through a group (``settings.course_groups``)."""
    if catalog is None:
        return Roster()
    users: set[str] = set()
    groups: set[str] = set()
    for course in catalog.courses:
        if catalog.teaches(course, instructor, instructor_groups):
            users.update(course.enrolment.users)
            groups.update(catalog.student_groups(course))
    return Roster(frozenset(users), frozenset(groups))


def job_access(
    caller: Caller, owner: str, owner_groups: frozenset[str], roster: Roster = Roster()
) -> Access:
    """What ``caller`` may do with a job of ``owner`` (a member of ``owner_groups``)."""
    write, read = caller.grants[Access.WRITE], caller.grants[Access.READ]
    if write.covers(owner, owner_groups):
        return Access.WRITE
    admin = caller.admin and caller.is_user
    if admin and write.held:
        return Access.WRITE
    if read.covers(owner, owner_groups):
        return Access.READ
    if read.held and (admin or roster.includes(owner, owner_groups)):
        return Access.READ
    return Access.NONE


def needs_owner_groups(caller: Caller, roster: Roster = Roster()) -> bool:
    """True when a job owner's groups can change ``job_access`` (worth a hub lookup)."""
    return bool(
        caller.grants[Access.READ].groups or caller.grants[Access.WRITE].groups or roster.groups
    )


def groups_to_expand(caller: Caller, roster: Roster = Roster()) -> frozenset[str]:
    """The groups whose members ``readable_owners`` needs."""
    if readable_everyone(caller):
        return frozenset()
    return caller.grants[Access.READ].groups | roster.groups


def readable_everyone(caller: Caller) -> bool:
    """True when the caller may read every user's jobs."""
    read = caller.grants[Access.READ]
    return read.everyone or (caller.admin and caller.is_user and read.held)


def readable_owners(
    caller: Caller,
    roster: Roster = Roster(),
    group_members: Mapping[str, frozenset[str]] | None = None,
) -> frozenset[str] | None:
    """Whose jobs a listing may show: None for everyone's, else a set of owners.

    ``group_members`` maps each group of ``groups_to_expand`` to its members.
    """
    if readable_everyone(caller):
        return None
    read = caller.grants[Access.READ]
    if not read.held:
        return frozenset()
    owners = set(read.users)
    members = group_members or {}
    for group in read.groups:
        owners.update(members.get(group, frozenset()))
    owners.update(roster.users)
    for group in roster.groups:
        owners.update(members.get(group, frozenset()))
    return frozenset(owners)
