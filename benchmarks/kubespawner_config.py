"""The anchor: course-time profiles the way a hub admin writes them for KubeSpawner today.

KubeSpawner has no notion of courses, class windows or GPU capacity; an admin
who wants them loads the course list into ``jupyterhub_config.py`` and sets
``c.KubeSpawner.profile_list`` to a function that, at every spawn-page visit,
walks all courses, looks for the user in each enrolment list and checks the
class windows with a plain loop. This module is that function, written as such
an admin would, so the benchmarks can compare the hub's policy code with it.

It agrees with ``gpuspawner.policy.evaluate`` on which profiles a user sees and
which are open (the benchmarks assert this on a sample of users and instants).
It does not say when a closed profile opens next, nor count GPU seats; the hub
does both, so the ratios include that extra work.

Used in a config as::

    courses = load_course_config("/etc/jupyterhub/courses.yaml")
    c.KubeSpawner.profile_list = make_profile_list(courses)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import yaml

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def load_course_config(path: str) -> dict:
    """Read the course list as a config file would: ``yaml.safe_load``."""
    with open(path, encoding="utf-8") as file:
        return yaml.safe_load(file)


def _minutes(text: str) -> int:
    return int(text.rstrip("m"))


def _clock(text: str) -> time:
    hour, minute = text.split(":")
    return time(int(hour), int(minute))


def _as_list(value) -> list:
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


def _class_is_on(course: dict, settings: dict, now: datetime, zone: ZoneInfo) -> bool:
    """True from ``lead_time`` before a class window until its end."""
    schedule = course["schedule"]
    lead = timedelta(minutes=_minutes(schedule.get("lead_time", settings.get("lead_time", "10m"))))
    term = schedule["term"]
    no_class = schedule.get("no_class", [])
    today = now.astimezone(zone).date()
    # A window that started yesterday may run past midnight; one tomorrow may open tonight.
    for offset in (-1, 0, 1):
        day = today + timedelta(days=offset)
        if day < term["first_day"] or day > term["last_day"] or day in no_class:
            continue
        for window in schedule["windows"]:
            days = window["days"] if "days" in window else [window["day"]]
            if DAYS[day.weekday()] not in [d.lower()[:3] for d in days]:
                continue
            start_clock, end_clock = _clock(window["start"]), _clock(window["end"])
            start = datetime.combine(day, start_clock, tzinfo=zone)
            end_day = day if end_clock > start_clock else day + timedelta(days=1)
            end = datetime.combine(end_day, end_clock, tzinfo=zone)
            if start - lead <= now < end:
                return True
    return False


def _kubespawner_profile(entry: dict, available: bool, status: str) -> dict:
    resources = entry.get("resources", {})
    override: dict = {}
    if "image" in entry.get("environment", {}):
        override["image"] = entry["environment"]["image"]
    if "cpu" in resources:
        override["cpu_limit"] = float(resources["cpu"])
    if "memory" in resources:
        override["mem_limit"] = resources["memory"].replace("GiB", "G")
    gpu = entry.get("gpu")
    if gpu:
        override["extra_resource_limits"] = {"nvidia.com/gpu": str(gpu.get("count", 1))}
    return {
        "display_name": entry["title"],
        "slug": entry["id"],
        "description": f"{status}. {entry.get('description', '')}".strip(),
        "default": bool(entry.get("default")),
        "kubespawner_override": override,
        "available": available,
    }


def visible_profiles(config: dict, user, now: datetime) -> list[dict]:
    """KubeSpawner profile dicts for every profile ``user`` sees; ``available`` marks open ones."""
    settings = config.get("settings") or {}
    groups = {g.name for g in user.groups}
    profiles = []
    for course in config.get("courses", []):
        enrolment = course.get("enrolment", {})
        teaches = user.name in _as_list(course.get("instructors"))
        enrolled = user.name in _as_list(enrolment.get("users")) or bool(
            groups & set(_as_list(enrolment.get("groups")))
        )
        if not (user.admin or teaches or enrolled):
            continue
        zone = ZoneInfo(course["schedule"].get("timezone") or settings.get("timezone", "UTC"))
        term = course["schedule"]["term"]
        today = now.astimezone(zone).date()
        staff = user.admin or teaches
        if staff and course.get("instructors_anytime", True):
            available = term["first_day"] <= today <= term["last_day"]
            available = available or _class_is_on(course, settings, now, zone)
        else:
            available = _class_is_on(course, settings, now, zone)
        status = "Open now" if available else "Closed now"
        profiles.append(_kubespawner_profile(course, available, status))
    today = now.astimezone(ZoneInfo(settings.get("timezone", "UTC"))).date()
    for grant in config.get("research", []):
        if user.name not in _as_list(grant.get("users")) and not (
            groups & set(_as_list(grant.get("groups")))
        ):
            continue
        starts: date | None = grant.get("starts")
        available = (starts is None or today >= starts) and today <= grant["expires"]
        profiles.append(
            _kubespawner_profile(grant, available, "Granted" if available else "Not now")
        )
    for standing in config.get("standing", []):
        allowed = _as_list(standing.get("groups"))
        if allowed and not user.admin and not (groups & set(allowed)):
            continue
        profiles.append(_kubespawner_profile(standing, True, "Always available"))
    return profiles


def make_profile_list(
    config: dict, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> Callable:
    """The callable for ``c.KubeSpawner.profile_list``."""

    def profile_list(spawner) -> list[dict]:
        return visible_profiles(config, spawner.user, clock())

    return profile_list
