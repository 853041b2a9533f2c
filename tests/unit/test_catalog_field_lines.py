"""Scenarios: an admin gets one field of a job flavor (or a course) wrong; the error names
that field and the line it is written on, never the first line of its block.

Each case is a whole catalog with every flavor field written out, one of them wrong; the
expected line is the line of the wrong value in that file.
"""

from __future__ import annotations

import pytest

from gpuspawner.policy import CatalogError, load_catalog

FLAVOR = """\
flavors:
  - id: big
    title: Big job
    description: A big job.
    environment:
      image: registry.example/big:1
      python: /opt/envs/big
      default_url: /lab
      variables:
        DATA_DIR: /data
    resources:
      cpu: 4
      memory: 16GiB
    gpu:
      fraction: 1/2
      memory: 40GiB
      compute:
        min: 10
        max: 50
      model: [A100]
    default_deadline: 1h
    max_deadline: 24h
    max_running_per_user: 2
    access:
      everyone: false
      users: [alice]
      groups: [staff]
      courses: []
      research: []
    oom_retry_memory: 32GiB
"""

# (a line of FLAVOR, what is written instead, the field the error names)
FLAVOR_MISTAKES = {
    "id": ("  - id: big", "  - id: Big!", "flavors[0].id"),
    "title": ("    title: Big job", "    title: ''", "flavors[0].title"),
    "description": (
        "    description: A big job.",
        "    description: [a, list]",
        "flavors[0].description",
    ),
    "environment.image": (
        "      image: registry.example/big:1",
        "      image: [a, list]",
        "flavors[0].environment.image",
    ),
    "environment.python": (
        "      python: /opt/envs/big",
        "      python: [a, list]",
        "flavors[0].environment.python",
    ),
    "environment.default_url": (
        "      default_url: /lab",
        "      default_url: [a]",
        "flavors[0].environment.default_url",
    ),
    "environment.variables": (
        "        DATA_DIR: /data",
        "        CUDA_VISIBLE_DEVICES: '0'",
        "flavors[0].environment.variables.CUDA_VISIBLE_DEVICES",
    ),
    "resources.cpu": ("      cpu: 4", "      cpu: -1", "flavors[0].resources.cpu"),
    "resources.memory": (
        "      memory: 16GiB",
        "      memory: lots",
        "flavors[0].resources.memory",
    ),
    "gpu.fraction": ("      fraction: 1/2", "      fraction: 2", "flavors[0].gpu.fraction"),
    "gpu.memory": ("      memory: 40GiB", "      memory: 40", "flavors[0].gpu.memory"),
    "gpu.compute.min above max": (
        "        min: 10",
        "        min: 60",
        "flavors[0].gpu.compute.min",
    ),
    "gpu.compute.max": ("        max: 50", "        max: 500", "flavors[0].gpu.compute.max"),
    "gpu.model": ("      model: [A100]", "      model: [[A100]]", "flavors[0].gpu.model[0]"),
    "default_deadline of zero": (
        "    default_deadline: 1h",
        "    default_deadline: 0s",
        "flavors[0].default_deadline",
    ),
    "default_deadline past max": (
        "    default_deadline: 1h",
        "    default_deadline: 48h",
        "flavors[0].default_deadline",
    ),
    "default_deadline unreadable": (
        "    default_deadline: 1h",
        "    default_deadline: soon",
        "flavors[0].default_deadline",
    ),
    "max_deadline of zero": (
        "    max_deadline: 24h",
        "    max_deadline: 0s",
        "flavors[0].max_deadline",
    ),
    "max_deadline unreadable": (
        "    max_deadline: 24h",
        "    max_deadline: never",
        "flavors[0].max_deadline",
    ),
    "max_running_per_user": (
        "    max_running_per_user: 2",
        "    max_running_per_user: 0",
        "flavors[0].max_running_per_user",
    ),
    "access.everyone": (
        "      everyone: false",
        "      everyone: maybe",
        "flavors[0].access.everyone",
    ),
    "access.users": (
        "      users: [alice]",
        "      users: [[alice]]",
        "flavors[0].access.users[0]",
    ),
    "access.courses": (
        "      courses: []",
        "      courses: [nope]",
        "flavors[0].access.courses[0]",
    ),
    "access.research": (
        "      research: []",
        "      research: [nope]",
        "flavors[0].access.research[0]",
    ),
    "oom_retry_memory below memory": (
        "    oom_retry_memory: 32GiB",
        "    oom_retry_memory: 8GiB",
        "flavors[0].oom_retry_memory",
    ),
}


def wrong(text: str, original: str, replacement: str) -> tuple[str, int]:
    """``text`` with its line ``original`` replaced, and that line's number."""
    lines = text.splitlines()
    index = lines.index(original)
    lines[index] = replacement
    return "\n".join(lines) + "\n", index + 1


def problems(write_yaml, text: str) -> list[tuple[int | None, str, str]]:
    path = write_yaml(text)
    with pytest.raises(CatalogError) as raised:
        load_catalog(path)
    for problem in raised.value.problems:
        assert problem.path == path
    return [(p.line, p.field, p.message) for p in raised.value.problems]


def test_the_whole_flavor_as_written_is_valid(write_yaml):
    assert [f.id for f in load_catalog(write_yaml(FLAVOR)).flavors] == ["big"]


@pytest.mark.parametrize("mistake", FLAVOR_MISTAKES)
def test_a_wrong_flavor_field_is_reported_at_its_own_line(write_yaml, mistake):
    # Given a flavor with every field written out, one of them wrong
    original, replacement, field = FLAVOR_MISTAKES[mistake]
    text, line = wrong(FLAVOR, original, replacement)
    # When the catalog is loaded
    found = problems(write_yaml, text)
    # Then the one error names that field, at the line it is written on
    assert [(where, name) for where, name, _ in found] == [(line, field)], found


def test_a_default_deadline_past_the_maximum_says_both_and_what_to_change(write_yaml):
    text, line = wrong(FLAVOR, "    default_deadline: 1h", "    default_deadline: 48h")

    assert problems(write_yaml, text) == [
        (
            line,
            "flavors[0].default_deadline",
            "default_deadline (48 h) is longer than max_deadline (24 h); shorten "
            "default_deadline, or raise max_deadline",
        )
    ]


def test_a_maximum_below_the_default_deadline_is_reported_where_it_is_written(write_yaml):
    # Given a flavor that leaves default_deadline at its default (1 hour)
    text = FLAVOR.replace("    default_deadline: 1h\n", "")
    text, line = wrong(text, "    max_deadline: 24h", "    max_deadline: 30m")
    # Then the error is at max_deadline, the only one of the two in the file
    (found,) = problems(write_yaml, text)
    assert found[:2] == (line, "flavors[0].max_deadline")


COURSE = """\
settings:
  timezone: Europe/Zurich
courses:
  - id: ml101
    title: Machine Learning
    storage:
      - name: scratch
        source: path:/srv/scratch
        mount: /scratch
    schedule:
      term:
        first_day: 2024-02-19
        last_day: 2024-06-01
      windows:
        - day: Mon
          start: "10:00"
          end: "12:00"
research:
  - id: vision-lab
    title: Vision lab
    users: [rita]
    starts: 2024-01-01
    expires: 2024-12-31
"""

# (a line of COURSE, what is written instead, the field the error names)
COURSE_MISTAKES = {
    "a window that ends before it starts": (
        '          end: "12:00"',
        '          end: "09:15"',
        "courses[0].schedule.windows[0].end",
    ),
    "a window that ends when it starts": (
        '          end: "12:00"',
        '          end: "10:00"',
        "courses[0].schedule.windows[0].end",
    ),
    "a term that ends before it starts": (
        "        first_day: 2024-02-19",
        "        first_day: 2024-07-01",
        "courses[0].schedule.term.first_day",
    ),
    "a term of five years": (
        "        last_day: 2024-06-01",
        "        last_day: 2029-06-01",
        "courses[0].schedule.term.last_day",
    ),
    "experimental storage in production": (
        "        source: path:/srv/scratch",
        "        source: experimental",
        "courses[0].storage[0].source",
    ),
    "an allocation that starts after it expires": (
        "    starts: 2024-01-01",
        "    starts: 2025-01-01",
        "research[0].starts",
    ),
}


@pytest.mark.parametrize("mistake", COURSE_MISTAKES)
def test_a_wrong_course_or_allocation_field_is_reported_at_its_own_line(write_yaml, mistake):
    original, replacement, field = COURSE_MISTAKES[mistake]
    text, line = wrong(COURSE, original, replacement)

    found = problems(write_yaml, text)

    assert [(where, name) for where, name, _ in found] == [(line, field)], found


def test_a_class_past_midnight_says_so_and_ends_the_next_day(write_yaml):
    # Given a Friday class from 22:00 to 01:00 marked overnight
    text = COURSE.replace(
        '          end: "12:00"', '          end: "01:00"\n          overnight: true'
    )
    text = text.replace('          start: "10:00"', '          start: "22:00"')
    # When the catalog is loaded, then the class lasts three hours, into Tuesday
    (window,) = load_catalog(write_yaml(text)).courses[0].course_schedule.windows
    assert window.describe() == "Mon 22:00-01:00"
    assert window._week_minutes() == (22 * 60, 3 * 60)
