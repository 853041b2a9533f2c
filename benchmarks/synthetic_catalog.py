"""A large, realistic course catalog, generated deterministically and written as YAML.

200 courses in 8 time zones (some using the catalog's default zone), 20,000
enrolments (usernames listed in the course, or JupyterHub groups), 1-3 weekly
window entries per course (some on several days, some running past midnight,
some overlapping), terms that are running, over, or not started yet (some
ending or starting mid-week), dates without class, per-course lead times and
grace periods, 20 research allocations and 2 standing profiles.

The benchmark week is Monday 23 March 2026, 00:00 UTC, plus seven days: it
contains Europe's switch to summer time (Sunday 29 March), so schedules cross a
daylight-saving change. Class windows avoid 01:00-03:59 local time, where the
wall clock jumps: there the hub deliberately deviates from a plain wall-clock
comparison (a window starting inside the gap starts after it), and the
KubeSpawner anchor would need that rule too to agree with the hub.
"""

from __future__ import annotations

import functools
import random
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import yaml

from gpuspawner.policy import Catalog, UserIdentity, load_catalog

SEED = 20260323
COURSE_COUNT = 200
ENROLMENT_COUNT = 20_000
STUDENT_POOL = 6_000
RESEARCH_COUNT = 20
WEEK_START = datetime(2026, 3, 23, tzinfo=UTC)
WEEK = timedelta(days=7)
# A coarse grid over the week; 97 minutes is prime to 60, so instants land at varied minutes.
GRID_STEP = timedelta(minutes=97)

TIMEZONES = (
    "Europe/Zurich",
    "Europe/London",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
    "UTC",
)
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
SUBJECTS = ("Machine Learning", "Vision", "Robotics", "Statistics", "Physics", "Genomics")

STUDENT = "bench-student"
INSTRUCTOR = "bench-instructor"
ADMIN = "bench-admin"
# Catalog positions of the bench student's four courses (two listed by name, two by group)
# and of the bench instructor's three.
STUDENT_DIRECT_COURSES = (17, 103)
STUDENT_GROUP_COURSES = (58, 161)
INSTRUCTOR_COURSES = (5, 88, 142)
STUDENT_RESEARCH = 3


@dataclass
class SyntheticCatalog:
    """The generated catalog, its people and the instants to evaluate it at."""

    path: Path
    catalog: Catalog
    load_seconds: float
    groups_of: dict[str, frozenset[str]]
    """Every generated user's JupyterHub groups."""
    student: UserIdentity
    instructor: UserIdentity
    admin: UserIdentity
    instants: list[datetime]
    """Spread over the week, plus instants in the bench student's lead times, classes and grace."""
    sample_users: list[UserIdentity]
    """Other users (students, instructors, researchers) for the anchor cross-check."""
    folder: tempfile.TemporaryDirectory
    """Holds the YAML file; removed when the process ends."""


def hub_user(identity: UserIdentity) -> SimpleNamespace:
    """The user object a spawner sees (JupyterHub's ``User``): name, groups, admin."""
    groups = [SimpleNamespace(name=g) for g in sorted(identity.groups)]
    return SimpleNamespace(name=identity.name, groups=groups, admin=identity.admin, id=1, url="/")


@functools.cache
def synthetic_catalog() -> SyntheticCatalog:
    """Generate, write and load the catalog once per process."""
    folder = tempfile.TemporaryDirectory(prefix="gpuspawner-bench-")
    path = Path(folder.name) / "catalog.yaml"
    data, groups_of = _generate()
    path.write_text(
        yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100),
        encoding="utf-8",
    )
    start = time.perf_counter()
    catalog = load_catalog(path)
    load_seconds = time.perf_counter() - start

    def person(name: str, admin: bool = False) -> UserIdentity:
        return UserIdentity(name, groups_of.get(name, frozenset()), admin)

    rng = random.Random(SEED + 1)
    students = sorted(n for n in groups_of if n.startswith("stu-"))
    sample = [person(n) for n in rng.sample(students, 24)]
    sample += [person(f"prof-{i:03d}") for i in rng.sample(range(1, 121), 6)]
    sample += [person(f"res-{i:03d}") for i in rng.sample(range(1, 61), 6)]
    sample += [person("nobody-enrolled"), person("staff-only")]
    return SyntheticCatalog(
        path=path,
        catalog=catalog,
        load_seconds=load_seconds,
        groups_of=groups_of,
        student=person(STUDENT),
        instructor=person(INSTRUCTOR),
        admin=person(ADMIN, admin=True),
        instants=_instants(catalog, person(STUDENT)),
        sample_users=sample,
        folder=folder,
    )


def _instants(catalog: Catalog, student: UserIdentity) -> list[datetime]:
    """A grid over the week plus, for each of the student's classes, one instant per phase."""
    moments = set()
    moment = WEEK_START
    while moment < WEEK_START + WEEK:
        moments.add(moment)
        moment += GRID_STEP
    courses, _ = catalog.courses_for(student.name, student.groups)
    minute = timedelta(minutes=1)
    for course in courses:
        for session in course.course_schedule.week(WEEK_START):
            moments.add(session.opens_at + minute)  # lead time
            moments.add(session.start + minute)  # class
            if session.grace > 2 * minute:
                moments.add(session.end + minute)  # grace
            moments.add(session.reclaim_at + minute)  # closed again
    return sorted(m for m in moments if WEEK_START <= m < WEEK_START + WEEK)


def _generate() -> tuple[dict, dict[str, frozenset[str]]]:
    rng = random.Random(SEED)
    groups: dict[str, set[str]] = {}

    def join(user: str, group: str) -> None:
        groups.setdefault(user, set()).add(group)

    students = [f"stu-{i:05d}" for i in range(1, STUDENT_POOL + 1)]
    for name in students:
        join(name, f"year-{rng.randint(1, 5)}")
        join(name, rng.choice(("dept-cs", "dept-physics", "dept-biology", "dept-math")))

    courses = [_course(rng, index) for index in range(COURSE_COUNT)]
    _place_bench_people(courses)

    # Enrolments: (student, course) pairs, with course sizes that vary a lot.
    weights = [rng.paretovariate(1.5) for _ in courses]
    pairs: set[tuple[str, int]] = set()
    target = ENROLMENT_COUNT - len(STUDENT_DIRECT_COURSES) - len(STUDENT_GROUP_COURSES)
    while len(pairs) < target:
        pairs.add((rng.choice(students), rng.choices(range(COURSE_COUNT), weights)[0]))
    pairs.update((STUDENT, i) for i in STUDENT_DIRECT_COURSES + STUDENT_GROUP_COURSES)
    for student, index in sorted(pairs):
        course = courses[index]
        mode = course["_mode"]
        by_group = mode == "groups" or (mode == "mixed" and rng.random() < 0.5)
        if student == STUDENT:
            by_group = index in STUDENT_GROUP_COURSES
        if by_group:
            join(student, f"{course['id']}-students")
            course["enrolment"].setdefault("groups", [f"{course['id']}-students"])
        else:
            course["enrolment"].setdefault("users", []).append(student)
    for course in courses:
        del course["_mode"]
        if not course["enrolment"]:
            del course["enrolment"]

    research = [_research(rng, index) for index in range(RESEARCH_COUNT)]
    research[STUDENT_RESEARCH]["groups"] = ["lab-vision"]
    join(STUDENT, "lab-vision")
    for grant in research:
        for user in grant.get("users", []):
            join(user, "researchers")
    for name in (INSTRUCTOR, ADMIN, "staff-only"):
        join(name, "staff")
    for index in range(1, 121):
        join(f"prof-{index:03d}", "staff")
    data = {
        "settings": {
            "timezone": "Europe/Zurich",
            "lead_time": "10m",
            "grace": "10m",
            "max_gpu_servers_per_user": 1,
        },
        "standing": [
            {
                "id": "cpu",
                "title": "CPU only",
                "description": "A small server without a GPU, always available.",
                "resources": {"cpu": 1, "memory": "2GiB"},
                "default": True,
            },
            {
                "id": "staff-gpu",
                "title": "Staff GPU",
                "description": "Half a GPU for staff.",
                "groups": ["staff"],
                "gpu": {"fraction": "1/2"},
            },
        ],
        "courses": courses,
        "research": research,
    }
    return data, {name: frozenset(g) for name, g in groups.items()}


def _course(rng: random.Random, index: int) -> dict:
    course_id = f"course-{index:03d}"
    subject = rng.choice(SUBJECTS)
    course: dict = {
        "id": course_id,
        "title": f"{subject} {100 + index}",
        "description": f"Weekly lab of {subject} {100 + index}.",
        "instructors": [f"prof-{rng.randint(1, 120):03d}" for _ in range(rng.randint(1, 2))],
        "enrolment": {},
        "_mode": rng.choices(("users", "groups", "mixed"), (55, 25, 20))[0],
        "environment": {"image": f"registry.campus.example/courses/{course_id}:2026s"},
        "resources": {"cpu": rng.randint(1, 4), "memory": f"{rng.choice((2, 4, 8, 16))}GiB"},
    }
    if rng.random() < 0.65:
        gpu: dict = (
            {"count": 1} if rng.random() < 0.1 else {"fraction": rng.choice(("1/4", "1/2", "1/8"))}
        )
        if "fraction" in gpu and rng.random() < 0.3:
            gpu["memory"] = "6GiB"
        course["gpu"] = gpu
        if rng.random() < 0.5:
            course["max_gpu_servers"] = rng.randint(20, 60)
            if rng.random() < 0.2:
                course["reserved_seats"] = rng.randint(2, 6)
    schedule: dict = {}
    if rng.random() < 0.65:
        schedule["timezone"] = rng.choice(TIMEZONES)
    schedule["term"] = _term(rng)
    schedule["windows"] = [_window(rng) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        first, last = schedule["term"]["first_day"], schedule["term"]["last_day"]
        days = {first + timedelta(days=rng.randint(0, (last - first).days))}
        if rng.random() < 0.5:
            days.add(WEEK_START.date() + timedelta(days=rng.randint(0, 6)))
        schedule["no_class"] = sorted(days)
    if rng.random() < 0.6:
        schedule["lead_time"] = rng.choice(("5m", "15m", "20m", "30m"))
    if rng.random() < 0.6:
        schedule["grace"] = rng.choice(("0m", "5m", "15m", "30m"))
    course["schedule"] = schedule
    if rng.random() < 0.1:
        course["instructors_anytime"] = False
    return course


def _term(rng: random.Random) -> dict:
    kind = rng.choices(("running", "over", "not-started", "intensive"), (78, 7, 7, 8))[0]
    if kind == "over":
        first = date(2026, 1, 12)
        last = rng.choice((date(2026, 3, 6), date(2026, 3, 25)))  # one ends mid-week
    elif kind == "not-started":
        first = rng.choice((date(2026, 3, 26), date(2026, 4, 13)))  # one starts mid-week
        last = date(2026, 7, 3)
    elif kind == "intensive":
        first, last = date(2026, 3, 16), date(2026, 3, 27)
    else:
        first = date(2026, 2, 9) + timedelta(days=rng.randint(0, 21))
        last = date(2026, 5, 15) + timedelta(days=rng.randint(0, 35))
    return {"first_day": first, "last_day": last}


def _window(rng: random.Random) -> dict:
    if rng.random() < 0.15:
        # Runs past midnight, and ends before 01:00 (outside any daylight-saving jump).
        start = rng.choice((22 * 60, 22 * 60 + 30, 23 * 60, 23 * 60 + 30))
        end = rng.choice((15, 30, 45, 60))
    else:
        start = rng.randint(8, 20) * 60 + rng.choice((0, 5, 10, 15, 30, 45))
        end = start + rng.choice(range(45, 181, 15))
    window: dict = {}
    if rng.random() < 0.3:
        window["days"] = [DAY_NAMES[d] for d in sorted(rng.sample(range(7), 2))]
    else:
        window["day"] = DAY_NAMES[rng.randint(0, 6)]
    window["start"] = f"{start // 60:02d}:{start % 60:02d}"
    window["end"] = f"{end // 60 % 24:02d}:{end % 60:02d}"
    if end < start:
        window["overnight"] = True
    return window


def _place_bench_people(courses: list[dict]) -> None:
    """The bench student's and instructor's courses: running this week, meeting often."""
    for index in STUDENT_DIRECT_COURSES + STUDENT_GROUP_COURSES + INSTRUCTOR_COURSES:
        schedule = courses[index]["schedule"]
        schedule["term"] = {"first_day": date(2026, 2, 16), "last_day": date(2026, 6, 5)}
        schedule["windows"] = [
            {"days": ["Mon", "Wed"], "start": "10:15", "end": "12:00"},
            {"day": "Thu", "start": "14:00", "end": "15:30"},
        ]
        schedule.pop("no_class", None)
        courses[index]["instructors_anytime"] = True
    for index in STUDENT_GROUP_COURSES:
        courses[index]["_mode"] = "groups"
    for index in STUDENT_DIRECT_COURSES:
        courses[index]["_mode"] = "users"
    for index in INSTRUCTOR_COURSES:
        courses[index]["instructors"] = [INSTRUCTOR]


def _research(rng: random.Random, index: int) -> dict:
    grant: dict = {
        "id": f"research-{index:02d}",
        "title": f"Research allocation {index:02d}",
        "users": [f"res-{rng.randint(1, 60):03d}" for _ in range(rng.randint(1, 4))],
    }
    if rng.random() < 0.4:
        grant["groups"] = [f"lab-{rng.randint(1, 8)}"]
    kind = rng.choices(("active", "expired", "future", "mid-week"), (70, 10, 10, 10))[0]
    if kind == "future":
        grant["starts"] = date(2026, 4, 1)
    elif kind == "mid-week":
        grant["starts"] = date(2026, 3, 25)
    grant["expires"] = date(2026, 3, 1) if kind == "expired" else date(2026, 12, 31)
    if index == STUDENT_RESEARCH:
        grant.pop("starts", None)
        grant["expires"] = date(2026, 9, 30)
    grant["gpu"] = {"count": 1} if rng.random() < 0.5 else {"fraction": "1/2"}
    return grant
