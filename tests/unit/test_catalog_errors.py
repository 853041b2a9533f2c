"""Scenarios: an instructor makes a mistake in the catalog; the error says where and what to write.

Every case is the whole file, so the expected line number can be counted in the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuspawner.policy import CatalogError, CatalogProblem, load_catalog

# (yaml, line, field, words the message must contain)
MALFORMED = [
    pytest.param(
        """\
        settings:
          timezone: UTC
         lead_time: 10m
        """,
        3,
        "",
        ["is not valid YAML", "check indentation and quoting"],
        id="yaml-syntax-error",
    ),
    pytest.param(
        """\
        - id: ml101
          title: Machine Learning
        """,
        1,
        "",
        ["must be a mapping", "settings, standing, courses and/or research"],
        id="top-level-list",
    ),
    pytest.param(
        """\
        settings:
          timezone: UTC
        cours:
          - id: ml101
        """,
        3,
        "cours",
        [
            "unknown field 'cours'",
            "expected one of: courses, environments, flavors, research, settings",
        ],
        id="unknown-top-level-key",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            gpu:
              fracton: 1/4
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        5,
        "courses[0].gpu.fracton",
        ["unknown field 'fracton' (a typo?)", "compute, count, fraction, memory, model"],
        id="typo-in-field-name",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        2,
        "courses[0].title",
        ["is required but missing"],
        id="missing-title",
    ),
    pytest.param(
        """\
        courses:
          - id: ML 101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        2,
        "courses[0].id",
        ["lowercase letters, digits and dashes", "such as ml101", "'ML 101'"],
        id="bad-id-characters",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            gpu:
              fraction: 1.5
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        5,
        "courses[0].gpu.fraction",
        ["greater than 0 and at most 1", "such as 1/4", "got 1.5"],
        id="fraction-above-one",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            gpu:
              fraction: 1/4
              memory: 6
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        6,
        "courses[0].gpu.memory",
        ["has no unit", "such as 512MiB, 6GiB or 10G"],
        id="memory-without-unit",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            gpu:
              fraction: 1/4
              compute: {min: 60, max: 40}
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        6,
        "courses[0].gpu.compute.min",
        ["min (60%) cannot be larger than its max (40%)"],
        id="compute-min-above-max",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows:
                - day: Funday
                  start: "10:00"
                  end: "12:00"
        """,
        7,
        "courses[0].schedule.windows[0].day",
        ["a day of the week such as Mon", "'Funday'"],
        id="bad-weekday",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows:
                - day: Mon
                  start: "25:00"
                  end: "12:00"
        """,
        8,
        "courses[0].schedule.windows[0].start",
        ["a time of day as HH:MM", "got '25:00'"],
        id="bad-time-quoted",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows:
                - day: Mon
                  start: 10:00
                  end: 25:00
        """,
        9,
        "courses[0].schedule.windows[0].end",
        ["a time of day as HH:MM", "got '25:00'"],
        id="bad-time-unquoted-shows-what-was-written",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows:
                - {day: Mon, start: "10:00", end: "12:00"}
                - {day: Tue, start: "10:00", end: "10:00"}
        """,
        8,
        "courses[0].schedule.windows[1].end",
        ["the window ends when it starts (10:00); give the time the class ends"],
        id="end-equals-start",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows:
                - day: Mon
                  start: "12:00"
                  end: "10:15"
        """,
        9,
        "courses[0].schedule.windows[0].end",
        [
            "the window ends at 10:15, before it starts at 12:00; correct the times, or, for "
            "a class that runs past midnight, add overnight: true to the window"
        ],
        id="end-before-start-is-not-a-22-hour-class",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows:
                - day: Mon
                  start: "10:00"
                  end: "12:00"
                  overnight: true
        """,
        10,
        "courses[0].schedule.windows[0].overnight",
        ["overnight: true says the class runs past midnight, but it ends at 12:00, after it"],
        id="overnight-window-that-ends-the-same-day",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              timezone: Europe/Zurch
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        5,
        "courses[0].schedule.timezone",
        ["a named time zone such as Europe/Zurich", "'Europe/Zurch'"],
        id="unknown-timezone",
    ),
    pytest.param(
        """\
        settings:
          timezone: CEST+1
        """,
        2,
        "settings.timezone",
        ["a named time zone such as Europe/Zurich"],
        id="unknown-timezone-in-settings",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term:
                first_day: 2024-06-01
                last_day: 2024-02-19
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        6,
        "courses[0].schedule.term.first_day",
        ["first_day (2024-06-01) comes after its last_day (2024-02-19)"],
        id="term-first-day-after-last-day",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term:
                first_day: 2024-13-01
                last_day: 2024-06-01
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        6,
        "courses[0].schedule.term.first_day",
        ["a date as YYYY-MM-DD", "'2024-13-01'"],
        id="impossible-date",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
              no_class: [2024-04-01, next monday]
        """,
        7,
        "courses[0].schedule.no_class[1]",
        ["a date as YYYY-MM-DD", "'next monday'"],
        id="bad-date-in-list",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
            title: Deep Learning
        """,
        7,
        "courses[0].title",
        ["repeats the key 'title' (first at line 3)", "merge or remove"],
        id="duplicate-key",
    ),
    pytest.param(
        """\
        standing:
          - id: cpu
            title: CPU only
            default: true
          - id: small-gpu
            title: Small GPU
            gpu: {fraction: 1/8}
            default: true
        """,
        8,
        "standing[1].default",
        ["only one standing profile may be the default", "'cpu'", "'small-gpu'"],
        id="two-default-standing-profiles",
    ),
    pytest.param(
        """\
        research:
          - id: vision-lab
            title: Vision lab
            expires: 2024-12-31
            gpu: {count: 1}
        """,
        2,
        "research[0]",
        ["must name at least one user or group"],
        id="research-without-grantees",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            gpu: {fraction: 1/4}
            max_gpu_servers: 10
            reserved_seats: 12
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        6,
        "courses[0].reserved_seats",
        ["reserved_seats (12) cannot exceed max_gpu_servers (10)", "lower reserved_seats"],
        id="reserved-seats-above-max",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            reserved_seats: 4
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        4,
        "courses[0].reserved_seats",
        ["only makes sense for a course with a gpu share"],
        id="reserved-seats-without-gpu",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            environment:
              variables:
                OMP_NUM_THREADS: "4"
                CUDA_VISIBLE_DEVICES: "0,1"
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        7,
        "courses[0].environment.variables.CUDA_VISIBLE_DEVICES",
        ["enforces or describes the GPU share and is set by the hub", "remove it"],
        id="protected-variable-cuda-visible-devices",
    ),
    pytest.param(
        """\
        standing:
          - id: cpu
            title: CPU only
            environment:
              variables: {LD_PRELOAD: /tmp/evil.so}
        """,
        5,
        "standing[0].environment.variables.LD_PRELOAD",
        ["LD_PRELOAD enforces or describes the GPU share"],
        id="protected-variable-ld-preload",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
              lead_time: -5
        """,
        7,
        "courses[0].schedule.lead_time",
        ["a duration that is not negative", "got -5"],
        id="negative-lead-time",
    ),
    pytest.param(
        """\
        settings:
          grace: soon
        """,
        2,
        "settings.grace",
        ["a duration such as 10m, 90s or 1h30m", "'soon'"],
        id="unreadable-grace",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            gpu:
              count: 2
              fraction: 1/2
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        4,
        "courses[0].gpu",
        ["either a count of whole GPUs or a fraction and/or memory"],
        id="count-together-with-fraction",
    ),
    pytest.param(
        """\
        courses:
          - id: ml101
            title: Machine Learning
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: []
        """,
        6,
        "courses[0].schedule.windows",
        ["at least 1 item", "got []"],
        id="no-class-windows",
    ),
    pytest.param(
        """\
        courses:
          id: ml101
          title: Machine Learning
        """,
        1,
        "courses",
        ["expected a list"],
        id="courses-not-a-list",
    ),
    pytest.param(
        """\
        standing:
          - id: data
            title: Shared data
            storage:
              - {name: datasets, source: "path:/srv/data", mount: data}
        """,
        5,
        "standing[0].storage[0].mount",
        ["an absolute mount path", "'data'"],
        id="relative-mount-path",
    ),
    pytest.param(
        """\
        standing:
          - id: data
            title: Shared data
            storage:
              - {name: datasets, source: /srv/data, mount: /data}
        """,
        5,
        "standing[0].storage[0].source",
        ["'/srv/data' is not a storage source", "nfs:SERVER:/EXPORT/PATH"],
        id="unknown-storage-source",
    ),
    pytest.param(
        """\
        settings:
          max_gpu_servers_per_user: -1
        """,
        2,
        "settings.max_gpu_servers_per_user",
        ["greater than or equal to 0", "got -1"],
        id="negative-per-user-limit",
    ),
]


def problems_of(path: Path) -> list[CatalogProblem]:
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    return error.value.problems


@pytest.mark.parametrize(("text", "line", "field", "words"), MALFORMED)
def test_given_a_malformed_catalog_then_the_error_names_file_line_field_and_what_to_write(
    write_yaml, text, line, field, words
):
    path = write_yaml(text)

    problems = problems_of(path)

    matching = [p for p in problems if p.field == field]
    assert matching, f"no problem for {field!r} in {[str(p) for p in problems]}"
    problem = matching[0]
    assert problem.path == path
    assert problem.line == line, str(problem)
    for word in words:
        assert word in problem.message, str(problem)


def test_given_the_same_profile_id_in_two_files_then_the_error_names_the_other_file_and_line(
    write_yaml, tmp_path
):
    first = write_yaml(
        """\
        standing:
          - id: cpu
            title: CPU only
        """,
        name="a.yaml",
        folder="catalog",
    )
    second = write_yaml(
        """\
        research:
          - id: vision-lab
            title: Vision lab
            users: [rita]
            expires: 2024-12-31
        courses:
          - id: cpu
            title: A course that reused the id
            schedule:
              term: {first_day: 2024-02-19, last_day: 2024-06-01}
              windows: [{day: Mon, start: "10:00", end: "12:00"}]
        """,
        name="b.yaml",
        folder="catalog",
    )

    (problem,) = problems_of(tmp_path / "catalog")

    assert problem.path == second
    assert problem.line == 7
    assert problem.field == "courses[0].id"
    assert f"the id 'cpu' is already used at {first}:2" in problem.message
    assert "unique across the catalog" in problem.message


def test_given_settings_in_two_files_then_the_second_is_refused(write_yaml, tmp_path):
    first = write_yaml("settings: {timezone: UTC}\n", name="a.yaml", folder="catalog")
    second = write_yaml(
        """\
        # Zurich courses
        settings: {timezone: Europe/Zurich}
        """,
        name="b.yaml",
        folder="catalog",
    )

    (problem,) = problems_of(tmp_path / "catalog")

    assert (problem.path, problem.line, problem.field) == (second, 2, "settings")
    assert f"already defined in {first}; keep them in one file" in problem.message


def test_given_an_empty_folder_then_the_error_says_it_has_no_catalog_files(tmp_path):
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "notes.txt").write_text("courses: []")

    (problem,) = problems_of(tmp_path / "catalog")

    assert (problem.path, problem.line, problem.field) == (tmp_path / "catalog", None, "")
    assert "contains no .yaml or .yml catalog files" in problem.message


def test_given_a_path_that_does_not_exist_then_the_error_says_what_to_give(tmp_path):
    (problem,) = problems_of(tmp_path / "missing.yaml")

    assert "does not exist; give a catalog file or folder" in problem.message


def test_given_a_file_that_is_not_utf8_then_the_error_says_how_to_save_it(tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_bytes("title: Übung\n".encode("latin-1"))

    (problem,) = problems_of(path)

    assert "is not UTF-8 text; save it as UTF-8" in problem.message


def test_given_several_mistakes_in_two_files_then_all_are_reported_at_once(write_yaml, tmp_path):
    write_yaml("settings: {grace: soon}\n", name="a.yaml", folder="catalog")
    write_yaml("courses: {}\n", name="b.yaml", folder="catalog")

    with pytest.raises(CatalogError) as error:
        load_catalog(tmp_path / "catalog")

    text = str(error.value)
    assert text.startswith("The course catalog has 2 errors:")
    assert f"{tmp_path / 'catalog' / 'a.yaml'}:1: settings.grace: expected a duration" in text
    assert f"{tmp_path / 'catalog' / 'b.yaml'}:1: courses: expected a list" in text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty-file"),
        pytest.param("# courses come later\n\n# (ask the admins)\n", id="only-comments"),
        pytest.param("settings:\n  timezone: Europe/Zurich\n", id="only-settings"),
        pytest.param("courses: []\nstanding: []\n", id="empty-lists"),
    ],
)
def test_given_a_catalog_without_any_profile_then_it_is_refused(write_yaml, text):
    path = write_yaml(text)

    (problem,) = problems_of(path)

    assert (problem.path, problem.line, problem.field) == (path, None, "")
    assert problem.message.startswith(
        "holds no courses, standing profiles, research allocations or job flavors"
    )
    assert "add at least one, such as a standing profile with an id and a title" in (
        problem.message
    )


def test_given_a_folder_of_empty_files_then_the_folder_is_named(write_yaml, tmp_path):
    write_yaml("# nothing yet\n", name="a.yaml", folder="catalog")
    write_yaml("", name="b.yml", folder="catalog")

    (problem,) = problems_of(tmp_path / "catalog")

    assert (problem.path, problem.line) == (tmp_path / "catalog", None)
    assert "holds no courses" in problem.message
