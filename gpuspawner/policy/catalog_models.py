"""The catalog's blocks as schema models: environments, storage, courses and their windows,
research allocations, standing profiles, zones, settings and job flavors (``CatalogFile``).
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.functional_validators import AfterValidator

from .budget_spec import CourseBudget, NamedTerm, ResearchBudget
from .catalog_fields import (
    CatalogModel,
    Duration,
    Environment,
    FieldError,
    GPUSpec,
    Identifier,
    NameList,
    Resources,
    SizeBytes,
    Version,
)
from .instructor_bounds import CourseInstructorBounds, InstructorBounds
from .schedule import (
    MAX_TERM_DAYS,
    CourseSchedule,
    WeeklyWindow,
    parse_clock,
    parse_timezone,
    parse_weekday,
)
from .share import GPUShare
from .storage import parse_storage_source
from .units import format_bytes
from .wording import duration


class EnvironmentRequirement(CatalogModel):
    """What the GPU's driver must offer for an environment to work (minimum versions).

    Checked against the GPU a server is given where its versions are known (NVML on one
    machine, GPU Feature Discovery's node labels on Kubernetes, ``driver``/``cuda`` of a
    simulated GPU); a GPU whose versions are not known is not checked.
    """

    driver: Version | None = None
    """The lowest NVIDIA driver version, such as ``"535.104"``."""
    cuda: Version | None = None
    """The lowest CUDA version the driver must support, such as ``"12.4"``."""

    @model_validator(mode="after")
    def _something(self) -> EnvironmentRequirement:
        if self.driver is None and self.cuda is None:
            raise ValueError("give driver and/or cuda (minimum versions), or remove requires")
        return self

    def describe(self) -> str:
        """``CUDA 12.4 or newer, driver 535.104 or newer``."""
        parts = []
        if self.cuda:
            parts.append(f"CUDA {self.cuda} or newer")
        if self.driver:
            parts.append(f"NVIDIA driver {self.driver} or newer")
        return ", ".join(parts)


class SoftwareEnvironment(CatalogModel):
    """An environment a course or allocation can offer (the catalog's ``environments:``).

    ``image`` is the container image on Kubernetes; ``python`` the folder of a Python
    environment (a venv or conda env whose ``bin/jupyterhub-singleuser`` starts the server)
    on one machine. Give one or both.
    """

    id: Identifier
    title: str = Field(min_length=1)
    description: str = ""
    contains: NameList = Field(default_factory=list)
    """What is in it, in a few words each: ``[PyTorch 2.4, CUDA 12.4, JupyterLab 4]``."""
    image: str | None = Field(default=None, min_length=1)
    python: str | None = None
    requires: EnvironmentRequirement | None = None

    @field_validator("python")
    @classmethod
    def _absolute_prefix(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or ".." in value.split("/")):
            raise ValueError(
                f"expected the absolute folder of a Python environment (a venv or conda env) "
                f"without '..', such as /opt/envs/pytorch, got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _runs_somewhere(self) -> SoftwareEnvironment:
        if self.image is None and self.python is None:
            raise ValueError(
                "give an image (for Kubernetes) and/or python (the folder of a Python "
                "environment on one machine), so servers have something to run"
            )
        return self


class StorageMount(CatalogModel):
    """A folder mounted into the server (a host path locally, a volume on Kubernetes)."""

    name: Identifier
    source: str
    mount: str
    read_only: bool = True

    @field_validator("mount")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or ".." in value.split("/"):
            raise ValueError(f"expected an absolute mount path without '..', got {value!r}")
        return value

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        parse_storage_source(value)  # raises ValueError naming the accepted forms
        return value


class WindowSpec(CatalogModel):
    """A weekly class window: ``{day: Mon, start: "10:00", end: "12:00"}``; ``days`` for several.

    A window ends after it starts on the same day. One that runs past midnight says so with
    ``overnight: true`` (``{day: Fri, start: "22:00", end: "01:00", overnight: true}``: it
    ends on Saturday); without it, an end before the start (``12:00``-``10:15``) is an
    error, not a 22-hour class.
    """

    day: Annotated[int, BeforeValidator(parse_weekday)] | None = None
    days: list[Annotated[int, BeforeValidator(parse_weekday)]] | None = None
    start: Annotated[Any, BeforeValidator(parse_clock)]
    end: Annotated[Any, BeforeValidator(parse_clock)]
    overnight: bool = False
    """The class runs past midnight: it ends at ``end`` on the next day."""

    @model_validator(mode="after")
    def _one_day_field(self) -> WindowSpec:
        if (self.day is None) == (self.days is None):
            raise ValueError("give either day (one day) or days (a list of days)")
        start, end = f"{self.start:%H:%M}", f"{self.end:%H:%M}"
        if self.start == self.end:
            raise FieldError(
                f"the window ends when it starts ({start}); give the time the class ends",
                "end",
            )
        if self.end < self.start and not self.overnight:
            raise FieldError(
                f"the window ends at {end}, before it starts at {start}; correct the times, "
                "or, for a class that runs past midnight, add overnight: true to the window",
                "end",
            )
        if self.end > self.start and self.overnight:
            raise FieldError(
                f"overnight: true says the class runs past midnight, but it ends at {end}, "
                f"after it starts at {start} on the same day; remove overnight, or correct "
                "the times",
                "overnight",
            )
        return self

    def weekly(self) -> list[WeeklyWindow]:
        days = [self.day] if self.day is not None else list(self.days or [])
        return [WeeklyWindow(d, self.start, self.end) for d in days]


class Term(CatalogModel):
    """The term's first and last day of classes."""

    first_day: date
    last_day: date

    @model_validator(mode="after")
    def _ordered(self) -> Term:
        if self.first_day > self.last_day:
            raise FieldError(
                f"the term's first_day ({self.first_day}) comes after its last_day "
                f"({self.last_day}); correct one of them",
                "first_day",
            )
        if (self.last_day - self.first_day).days > MAX_TERM_DAYS:
            raise FieldError(
                f"a term may last at most three years; this one runs from {self.first_day} to "
                f"{self.last_day}. Split it into terms or use a research allocation.",
                "last_day",
            )
        return self


class ScheduleSpec(CatalogModel):
    """When a course meets."""

    timezone: str | None = None
    term: Term
    windows: list[WindowSpec] = Field(min_length=1)
    no_class: list[date] = Field(default_factory=list)
    lead_time: Duration | None = None
    grace: Duration | None = None
    prewarm: Duration | None = None
    """Start enrolled students' servers this long before class (the sessions service)."""

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None:
            parse_timezone(value)
        return value


class Enrolment(CatalogModel):
    """Who takes the course: usernames and/or JupyterHub groups."""

    users: NameList = Field(default_factory=list)
    groups: NameList = Field(default_factory=list)


class CatalogEntry(CatalogModel):
    """What every entry that starts something has: a server profile or a job flavor."""

    id: Identifier
    title: str = Field(min_length=1)
    description: str = ""
    environment: Environment = Field(default_factory=Environment)
    resources: Resources = Field(default_factory=Resources)
    gpu: GPUSpec | None = None

    several_nodes: ClassVar[bool] = False
    """Whether ``gpu.nodes`` may be above 1 (job flavors: a job runs as one pod per node)."""

    @model_validator(mode="after")
    def _one_node(self) -> CatalogEntry:
        if self.gpu is not None and self.gpu.nodes > 1 and not self.several_nodes:
            raise FieldError(
                f"a server runs on one node, so gpu.nodes ({self.gpu.nodes}) is for job "
                "flavors only; remove nodes, or describe this as a job flavor",
                "gpu",
                "nodes",
            )
        return self

    @property
    def nodes(self) -> int:
        """How many pods (one per node) a start from this entry takes: 1 but for jobs on
        several nodes."""
        return self.gpu.nodes if self.gpu else 1

    @cached_property
    def share(self) -> GPUShare | None:
        """The GPU share of each server or job started from it, if any (built once)."""
        return self.gpu.to_share() if self.gpu else None


class ReclaimPolicy(CatalogModel):
    """When the course-sessions service takes back a server of a profile, and how it warns.

    ``reclaim: {idle_after: 30m, idle_below: 5, warning: 10m, keep_once: true}``. Without
    ``idle_after`` a server is never reclaimed for being idle. The owner is warned
    ``warning`` before the reclaim, in JupyterLab and on the hub's home page, and with
    ``keep_once`` may answer "I'm still using it" once per server, which restarts the
    idle clock (courses: also counts a pre-warmed server as opened).
    """

    idle_after: Duration | None = None
    """Reclaim a server whose GPU share saw no utilisation for this long."""
    idle_below: int = Field(default=5, ge=0, le=100)
    """Utilisation, in percent of the GPU, at or below which its device counts as idle."""
    warning: Duration = timedelta(minutes=10)
    keep_once: bool = True

    @field_validator("idle_after", "warning")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("expected a duration longer than zero, such as 10m")
        return value


class CourseReclaimPolicy(ReclaimPolicy):
    """A course's reclaim policy: also pre-warmed servers that nobody opened."""

    unopened_after: Duration | None = None
    """Reclaim a pre-warmed server nobody opened this long after class start."""

    @field_validator("unopened_after")
    @classmethod
    def _positive_unopened(cls, value: timedelta | None) -> timedelta | None:
        return cls._positive(value)


class ResearchReclaimPolicy(ReclaimPolicy):
    """A research allocation's reclaim policy: also servers whose grant expired."""

    after_expiry: bool = True
    """Reclaim servers of this allocation once it expires (midnight in the catalog's zone)."""


class ProfileSection(CatalogEntry):
    """A server profile: a course, a research allocation or a standing profile."""

    storage: list[StorageMount] = Field(default_factory=list)
    reclaim: ReclaimPolicy = Field(default_factory=ReclaimPolicy)
    """When the course-sessions service reclaims this profile's servers (default: never
    for idleness; see :class:`ReclaimPolicy`)."""
    zone: Literal["production", "experimental"] = "production"
    """``experimental``: a place to try code, whose ``source: experimental`` storage is
    wiped every day (``settings.experimental_zone``); ``production`` storage persists."""
    environments: list[Identifier] = Field(default_factory=list)
    """Ids of the catalog's ``environments`` its users choose among on the spawn card (the
    first is the default). Empty: the profile's own ``environment`` runs, no choice."""

    _offered: tuple[SoftwareEnvironment, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _experimental_storage_in_its_zone(self) -> ProfileSection:
        for position, mount in enumerate(self.storage):
            if mount.source == "experimental" and self.zone != "experimental":
                raise FieldError(
                    f"the storage {mount.name!r} is in the experimental zone, which is wiped "
                    "every day, but this profile is in production; add zone: experimental, "
                    "or use persistent storage",
                    "storage",
                    position,
                    "source",
                )
        return self

    @field_validator("environments")
    @classmethod
    def _distinct_environments(cls, value: list[str], info: ValidationInfo) -> list[str]:
        repeated = sorted({e for e in value if value.count(e) > 1})
        if repeated:
            raise ValueError(f"lists {', '.join(repeated)} more than once; list each once")
        own = info.data.get("environment")
        if value and own is not None and (own.image or own.python):
            raise ValueError(
                "the offered environments give the image and the Python environment, so "
                "this profile's environment may not set image or python too; remove them "
                "from environment (its variables and default_url stay)"
            )
        return value

    @property
    def offered_environments(self) -> tuple[SoftwareEnvironment, ...]:
        """The environments it offers, resolved from the catalog (set by load_catalog)."""
        return (self.__pydantic_private__ or {}).get("_offered") or ()


class Course(ProfileSection):
    """A course profile."""

    instructors: NameList = Field(default_factory=list)
    enrolment: Enrolment = Field(default_factory=Enrolment)
    schedule: ScheduleSpec
    max_gpu_servers: int | None = Field(default=None, ge=0)
    reserved_seats: int = Field(default=0, ge=0)
    instructors_anytime: bool = True
    """Instructors may start the course environment at any time during the term."""
    budget: CourseBudget | None = None
    """GPU-hours each student may use a week (``gpu_hours_per_student_per_week``)."""
    reclaim: CourseReclaimPolicy = Field(default_factory=CourseReclaimPolicy)
    instructor_bounds: CourseInstructorBounds | None = None
    """This course's narrower bounds of what its instructors may change (within
    ``settings.instructor_bounds``; :mod:`.instructor_bounds`)."""

    _schedule: CourseSchedule | None = PrivateAttr(default=None)
    _overrides: Any = PrivateAttr(default=None)
    """Instructors' changes in force (:func:`.course_overrides.course_overrides`)."""

    @field_validator("reserved_seats")
    @classmethod
    def _seats(cls, value: int, info: ValidationInfo) -> int:
        # A field validator (gpu and max_gpu_servers come earlier) so the error points
        # at the reserved_seats line.
        limit = info.data.get("max_gpu_servers")
        if limit is not None and value > limit:
            raise ValueError(
                f"reserved_seats ({value}) cannot exceed max_gpu_servers ({limit}); "
                "lower reserved_seats or raise max_gpu_servers"
            )
        if value and info.data.get("gpu") is None and "gpu" in info.data:
            raise ValueError("reserved_seats only makes sense for a course with a gpu share")
        return value

    @cached_property
    def course_schedule(self) -> CourseSchedule:
        """The resolved schedule (set when the catalog is assembled)."""
        # Read the private slot directly: pydantic's attribute fallback is slow, and
        # this is read for every course on every spawn-page render.
        schedule = (self.__pydantic_private__ or {}).get("_schedule")
        assert schedule is not None, "course schedules are resolved by load_catalog"
        return schedule


class ResearchAllocation(ProfileSection):
    """GPU time granted to users or groups until an expiry date."""

    users: NameList = Field(default_factory=list)
    groups: NameList = Field(default_factory=list)
    starts: date | None = None
    expires: date
    max_gpu_servers: int | None = Field(default=None, ge=0)
    budget: ResearchBudget | None = None
    """GPU-hours all holders may use from ``starts`` to ``expires`` (``gpu_hours_per_term``)."""
    reclaim: ResearchReclaimPolicy = Field(default_factory=ResearchReclaimPolicy)

    @model_validator(mode="after")
    def _grantees(self) -> ResearchAllocation:
        if not self.users and not self.groups:
            raise ValueError("a research allocation must name at least one user or group")
        if self.starts and self.starts > self.expires:
            raise FieldError(
                f"starts ({self.starts}) comes after expires ({self.expires}); an allocation "
                "starts on or before the day it expires",
                "starts",
            )
        return self

    def active_on(self, day: date) -> bool:
        """True on the days from ``starts`` (if set) to ``expires``, both included."""
        return (self.starts is None or self.starts <= day) and day <= self.expires


class StandingProfile(ProfileSection):
    """A profile open all the time, such as the CPU-only default."""

    groups: NameList = Field(default_factory=list)
    """Empty: everyone. Otherwise only members of these groups (and admins)."""
    default: bool = False


def _check_group_template(value: str | None) -> str | None:
    if value is None:
        return None
    if "{course}" not in value:
        raise ValueError(
            f"expected a group name containing {{course}} (the course id), such as "
            f"course-{{course}}-students, got {value!r}; use null to turn it off"
        )
    try:
        value.format(course="x")
    except (KeyError, IndexError, ValueError):
        raise ValueError(
            f"{value!r} may hold no other placeholder than {{course}}; "
            "write a literal brace as {{ or }}"
        ) from None
    return value


GroupTemplate = Annotated[str | None, AfterValidator(_check_group_template)]


class CourseGroups(CatalogModel):
    """The JupyterHub groups that make a person a course's student or instructor.

    Every course gets one of each, named from these templates (``{course}`` is the
    course id); with single sign-on the campus identity provider fills them, so
    enrolment follows the campus directory without editing the catalog. They add to a
    course's own ``instructors`` and ``enrolment``. ``null`` turns one off.
    """

    students: GroupTemplate = "course-{course}-students"
    instructors: GroupTemplate = "course-{course}-instructors"


class ExperimentalZone(CatalogModel):
    """The experimental zone: where people check that their code runs before moving it to
    production. Its storage (``source: experimental``) is wiped every day at ``wipe_at`` in
    the catalog's time zone, by the course-sessions service, after a ``warning`` to the
    people who hold data there; nothing else (homes, production storage) is ever wiped.
    """

    wipe_at: Annotated[Any, BeforeValidator(parse_clock)] = Field(
        default_factory=lambda: parse_clock("03:00")
    )
    """The time of day of the wipe (``"03:00"``)."""
    warning: Duration = timedelta(hours=2)
    """How long before the wipe the people who hold data there are warned."""
    volume: str | None = None
    """Kubernetes: the volume holding every user's folder (``pvc:CLAIM`` or
    ``nfs:SERVER:/EXPORT``), mounted into servers at ``<user>/<entry name>``. One machine:
    the folder is ``c.GPUAdmission.experimental_root``."""

    @field_validator("warning")
    @classmethod
    def _within_a_day(cls, value: timedelta) -> timedelta:
        if not timedelta(0) < value < timedelta(days=1):
            raise ValueError(
                "expected a warning longer than zero and shorter than a day, such as 2h"
            )
        return value

    @field_validator("volume")
    @classmethod
    def _shared_volume(cls, value: str | None) -> str | None:
        if value is not None and parse_storage_source(value).kind not in ("pvc", "nfs"):
            raise ValueError(
                f"expected a claim (pvc:CLAIM) or an NFS export (nfs:SERVER:/EXPORT) that "
                f"holds every user's folder, got {value!r}"
            )
        return value


class Settings(CatalogModel):
    """Catalog-wide defaults."""

    timezone: str = "UTC"
    lead_time: Duration = timedelta(minutes=10)
    grace: Duration = timedelta(minutes=10)
    max_gpu_servers_per_user: int = Field(default=1, ge=0)
    course_groups: CourseGroups = Field(default_factory=CourseGroups)
    terms: list[NamedTerm] = Field(default_factory=list)
    """Named terms for GPU-hour usage reports (``gpuspawner usage --term NAME``)."""
    experimental_zone: ExperimentalZone | None = None
    """The experimental zone and its daily wipe; None: there is none (every profile is
    in production)."""
    instructor_bounds: InstructorBounds = Field(default_factory=InstructorBounds)
    """What instructors may change of their courses on the course page, and where their
    changes are kept (:mod:`.instructor_bounds`)."""

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        parse_timezone(value)
        return value


class FlavorAccess(CatalogModel):
    """Who may run jobs on a flavor. Admins always may."""

    everyone: bool = False
    users: NameList = Field(default_factory=list)
    groups: NameList = Field(default_factory=list)
    courses: list[Identifier] = Field(default_factory=list)
    """Students and instructors of these courses, during the term."""
    research: list[Identifier] = Field(default_factory=list)
    """Holders of these research allocations, while the allocation is active."""


class JobFlavor(CatalogEntry):
    """What a "Run as Job" batch job runs on: GPU share, CPU, memory, environment."""

    several_nodes: ClassVar[bool] = True

    default_deadline: Duration = timedelta(hours=1)
    max_deadline: Duration = timedelta(hours=24)
    max_running_per_user: int = Field(default=1, ge=1)
    access: FlavorAccess = Field(default_factory=FlavorAccess)
    oom_retry_memory: SizeBytes | None = None
    """Memory for the next attempt of a job with a checkpoint that ran out of the flavor's
    ``resources.memory`` (one retry per out-of-memory kill, counted against the job's
    retries); without it such a job is not started again. Larger than that memory."""

    @model_validator(mode="after")
    def _oom_retry_memory(self) -> JobFlavor:
        if self.oom_retry_memory is None:
            return self
        if self.resources.memory is None:
            raise FieldError(
                "oom_retry_memory needs resources.memory: a job can only run out of a memory "
                "limit it has; set the flavor's memory, or remove oom_retry_memory",
                "oom_retry_memory",
            )
        if self.oom_retry_memory <= self.resources.memory:
            raise FieldError(
                f"oom_retry_memory ({format_bytes(self.oom_retry_memory)}) must be larger "
                f"than the flavor's memory ({format_bytes(self.resources.memory)}), or a job "
                "that ran out would run out again; raise it, or remove it",
                "oom_retry_memory",
            )
        return self

    @model_validator(mode="after")
    def _deadlines(self) -> JobFlavor:
        for name in ("default_deadline", "max_deadline"):
            if getattr(self, name) <= timedelta(0):
                raise FieldError(f"{name} must be longer than zero, such as 1h", name)
        if self.default_deadline > self.max_deadline:
            # At the default's line, unless the file sets only the maximum.
            only_max = self.model_fields_set & {"default_deadline", "max_deadline"} == {
                "max_deadline"
            }
            raise FieldError(
                f"default_deadline ({duration(self.default_deadline)}) is longer than "
                f"max_deadline ({duration(self.max_deadline)}); shorten default_deadline, "
                "or raise max_deadline",
                "max_deadline" if only_max else "default_deadline",
            )
        return self


class CatalogFile(CatalogModel):
    """The shape of one catalog file."""

    settings: Settings | None = None
    standing: list[StandingProfile] = Field(default_factory=list)
    courses: list[Course] = Field(default_factory=list)
    research: list[ResearchAllocation] = Field(default_factory=list)
    flavors: list[JobFlavor] = Field(default_factory=list)
    environments: list[SoftwareEnvironment] = Field(default_factory=list)
