"""The course catalog: what instructors and admins write in YAML.

One file, or a folder of ``*.yaml``/``*.yml`` files that are merged. Top-level
keys, all optional::

    settings:   time zone, default lead time and grace, per-user GPU server limit
    standing:   profiles open to everyone all the time (the CPU-only default)
    courses:    course profiles, open around their class windows
    research:   research allocations granted to users or groups until a date
    flavors:    what "Run as Job" jobs run on
    environments: images / Python environments that profiles offer to choose from

See ``hub_config/local/catalog.yaml`` for a complete, commented example.
Every validation error names the file, the line and the field, and says what is
expected (:class:`CatalogError`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.functional_validators import AfterValidator

from .budget_spec import CourseBudget, NamedTerm, ResearchBudget
from .instructor_bounds import CourseInstructorBounds, InstructorBounds
from .override_models import OverridesFile
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
from .units import (
    format_bytes,
    parse_duration,
    parse_fraction,
    parse_size_bytes,
    parse_size_mib,
)
from .wording import duration
from .yaml_source import LineMap, field_name, line_for

MAX_JOB_NODES = 64
"""The most nodes one job may run on (``gpu.nodes`` of a job flavor)."""
ID_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
VERSION_PATTERN = re.compile(r"^\d+(\.\d+){0,3}$")

# Variables that enforce a GPU share: a catalog (or a user) may never set them.
PROTECTED_VARIABLE_PREFIXES = ("CUDA_", "NVIDIA_", "GPUSPAWNER_", "HAMI_", "JUPYTERHUB_")
PROTECTED_VARIABLES = frozenset(
    {
        "LD_PRELOAD",
        "ACTIVE_OOM_KILLER",
        "LD_LIBRARY_PATH",
        "GPU_CORE_UTILIZATION_POLICY",
        "RUNAI_GPU_MEMORY_LIMIT",
        "PYTHONPATH",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "XLA_CLIENT_MEM_FRACTION",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "TF_FORCE_GPU_ALLOW_GROWTH",
        "XLA_PYTHON_CLIENT_PREALLOCATE",
    }
)


class FieldError(ValueError):
    """A check of a whole block that is about one of its fields: raised by a model
    validator, it is reported at that field's line (``field`` is relative to the block),
    as a field validator's error would be, rather than at the block's first line."""

    def __init__(self, message: str, *field: str | int):
        super().__init__(message)
        self.field = field


def is_protected_variable(name: str) -> bool:
    """True for environment variables that enforce or describe a GPU share."""
    upper = name.upper()
    return upper in PROTECTED_VARIABLES or upper.startswith(PROTECTED_VARIABLE_PREFIXES)


def _check_id(value: str) -> str:
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise ValueError(
            "expected an id of lowercase letters, digits and dashes (at most 63, "
            f"starting and ending with a letter or digit), such as ml101 or vision-lab, got {value!r}"
        )
    return value


def _check_variable_name(name: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise ValueError(
            f"{name!r} is not a valid environment variable name; use letters, digits and _"
        )
    if is_protected_variable(name):
        raise ValueError(
            f"{name} enforces or describes the GPU share and is set by the hub; "
            "remove it from the catalog"
        )
    return name


def _names(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


Identifier = Annotated[str, AfterValidator(_check_id)]
Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
SizeBytes = Annotated[int, BeforeValidator(parse_size_bytes)]
SizeMiB = Annotated[int, BeforeValidator(parse_size_mib)]
GPUFraction = Annotated[Fraction, BeforeValidator(parse_fraction)]
NameList = Annotated[list[str], BeforeValidator(_names)]
# Checked as a mapping key, so an error points at the variable's own line.
VariableName = Annotated[str, AfterValidator(_check_variable_name)]


class CatalogModel(BaseModel):
    """Base: unknown keys are errors (they are usually typos)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Compute(CatalogModel):
    """Bounds on the share of the GPU's compute, in percent."""

    min: int | None = Field(default=None, ge=0, le=100)
    max: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> Compute:
        # Checked here (GPUShare checks it too) so the error points at the compute block.
        if self.min is not None and self.max is not None and self.min > self.max:
            raise FieldError(
                f"the compute min ({self.min}%) cannot be larger than its max ({self.max}%)",
                "min",
            )
        return self


class GPUSpec(CatalogModel):
    """A GPU share as written in YAML: ``count`` whole GPUs, or ``fraction`` and/or ``memory``.

    ``nodes`` (job flavors only): the job runs as that many pods on as many nodes, each
    with the share (``{count: 2, nodes: 2}``: four GPUs as two pods of two).
    """

    count: int | None = Field(default=None, ge=1, le=16)
    fraction: GPUFraction | None = None
    memory: SizeMiB | None = None
    compute: Compute | None = None
    model: NameList = Field(default_factory=list)
    nodes: int = Field(default=1, ge=1, le=MAX_JOB_NODES)

    @model_validator(mode="after")
    def _consistent(self) -> GPUSpec:
        self.to_share()
        if self.nodes > 1 and not self.count:
            raise FieldError(
                f"a job on {self.nodes} nodes takes whole GPUs on each of them: give count "
                "(the GPUs of each node, such as count: 2), not fraction or memory; or "
                "remove nodes",
                "nodes",
            )
        return self

    @property
    def total_gpus(self) -> int:
        """The whole GPUs of all the nodes (0 for a slice)."""
        return (self.count or 0) * self.nodes

    def to_share(self) -> GPUShare:
        """The normalised :class:`GPUShare`; raises ValueError with a readable reason."""
        return GPUShare(
            fraction=self.fraction,
            memory_mib=self.memory,
            compute_min_pct=self.compute.min if self.compute else None,
            compute_max_pct=self.compute.max if self.compute else None,
            models=tuple(self.model),
            count=self.count or 0,
        )


class Resources(CatalogModel):
    """CPU cores and memory of the server."""

    cpu: float | None = Field(default=None, gt=0, le=256)
    memory: SizeBytes | None = None


class Environment(CatalogModel):
    """What the server runs.

    ``image`` is used on Kubernetes; ``python`` (a Python environment's prefix,
    whose ``bin/jupyterhub-singleuser`` starts the server) on one machine. Extra
    ``variables`` may not touch the GPU enforcement variables.
    """

    image: str | None = None
    python: str | None = None
    default_url: str | None = None
    variables: dict[VariableName, str] = Field(default_factory=dict)


def _check_version(value: Any) -> str:
    # YAML reads 12.4 as a number and 535.104.05 as a string: both are versions here.
    text = str(value).strip() if isinstance(value, int | float | str) else ""
    if not VERSION_PATTERN.match(text):
        raise ValueError(
            f'expected a version of numbers and dots, such as "12.4" or "535.104", '
            f"got {value!r}; quote it in the YAML"
        )
    return text


Version = Annotated[str, BeforeValidator(_check_version)]


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
