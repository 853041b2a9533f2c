"""Scenarios: a catalog file that would make the hub work without end is refused at once.

An alias bomb, an alias to its own block, blocks nested without end and a huge file each
get a located error that says what to do, and reading stops at the limit that was hit:
the tests count the values built instead of timing anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuspawner.policy import CatalogError, CatalogProblem, load_catalog
from gpuspawner.policy.yaml_source import (
    MAX_ALIAS_VALUES,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    load_with_lines,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# "Billion laughs": nine levels of nine aliases would be 9**9 (387 million) values.
LETTERS = "abcdefghi"
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{letter}: &{letter} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, letter in zip(LETTERS, LETTERS[1:], strict=False)
)


def only_problem(path: Path) -> CatalogProblem:
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    (problem,) = error.value.problems
    return problem


@pytest.fixture
def values_built(monkeypatch) -> list[int]:
    """Counts every value YAML builds while the test reads a catalog."""
    count = [0]
    original = yaml.constructor.BaseConstructor.construct_object

    def counting(self, node, deep=False):
        count[0] += 1
        return original(self, node, deep)

    monkeypatch.setattr(yaml.constructor.BaseConstructor, "construct_object", counting)
    return count


class TestAliasBomb:
    def test_given_a_billion_laughs_file_then_it_is_refused_at_the_alias_that_multiplies(
        self, write_yaml
    ):
        path = write_yaml(ALIAS_BOMB)

        problem = only_problem(path)

        assert problem.path == path
        key = problem.field.split("[")[0]
        assert key in LETTERS
        # The line of the top-level key whose aliases pass the limit, and its alias.
        assert problem.line == LETTERS.index(key) + 1
        previous = LETTERS[LETTERS.index(key) - 1]
        assert f"the alias *{previous} makes the file repeat more than" in problem.message
        assert f"{MAX_ALIAS_VALUES:,} values" in problem.message
        assert "alias bomb" in problem.message
        assert "Write the values out, or use fewer aliases inside aliases" in problem.message

    def test_given_a_billion_laughs_file_then_reading_stops_near_the_limit(
        self, write_yaml, values_built
    ):
        path = write_yaml(ALIAS_BOMB)

        with pytest.raises(CatalogError):
            load_catalog(path)

        # Each alias use is counted; nothing close to 9**9 values is ever built.
        assert 0 < values_built[0] <= MAX_ALIAS_VALUES + 100

    def test_given_a_bomb_of_merge_keys_then_merging_stays_bounded(self, write_yaml):
        levels = ["l0: &l0 {" + ", ".join(f"k{i}: {i}" for i in range(200)) + "}"]
        levels += [f"l{n}: &l{n} {{<<: [{', '.join([f'*l{n - 1}'] * 50)}]}}" for n in range(1, 12)]
        path = write_yaml("\n".join(levels) + "\n")

        problem = only_problem(path)

        assert "makes the file repeat more than" in problem.message
        assert problem.field.startswith("l")

    def test_given_an_anchor_used_a_few_times_then_the_catalog_loads(self, write_yaml):
        students = ", ".join(f"student{i}" for i in range(200))
        lines = [
            "courses:",
            "  - id: c1",
            "    title: Course 1",
            f"    enrolment: &everyone {{users: [{students}]}}",
            "    schedule: &weekly",
            "      term: {first_day: 2024-02-19, last_day: 2024-06-01}",
            '      windows: [{day: Mon, start: "10:00", end: "12:00"}]',
        ]
        for n in range(2, 60):
            lines += [
                f"  - id: c{n}",
                f"    title: Course {n}",
                "    enrolment: *everyone",
                "    schedule: *weekly",
            ]
        path = write_yaml("\n".join(lines) + "\n")

        catalog = load_catalog(path)

        assert len(catalog.courses) == 59
        assert len(catalog.courses_by_id["c59"].enrolment.users) == 200


class TestRecursiveAlias:
    @pytest.mark.parametrize(
        ("text", "line", "field", "alias"),
        [
            pytest.param("courses: &a [*a]\n", 1, "courses[0]", "a", id="list-in-itself"),
            pytest.param(
                """\
                settings: &s
                  timezone: UTC
                  again: *s
                """,
                3,
                "settings.again",
                "s",
                id="mapping-in-itself",
            ),
            pytest.param(
                """\
                standing:
                  - &cpu
                    id: cpu
                    title: CPU only
                    <<: *cpu
                """,
                5,
                "standing[0].<<",
                "cpu",
                id="merge-of-itself",
            ),
            pytest.param(
                """\
                courses:
                  - &outer
                    id: ml101
                    schedule:
                      windows: [{day: Mon, nested: [*outer]}]
                """,
                5,
                "courses[0].schedule.windows[0].nested[0]",
                "outer",
                id="deep-inside-itself",
            ),
        ],
    )
    def test_given_an_alias_inside_its_own_block_then_its_line_and_field_are_named(
        self, write_yaml, text, line, field, alias
    ):
        path = write_yaml(text)

        problem = only_problem(path)

        assert (problem.path, problem.line, problem.field) == (path, line, field)
        assert (
            f"the alias *{alias} refers to the block &{alias} that contains it, so its value "
            "would never end; replace the alias with the values it should repeat"
        ) == problem.message


class TestNesting:
    def test_given_brackets_nested_without_end_then_the_depth_limit_is_named(self, write_yaml):
        path = write_yaml("courses: " + "[" * 5000 + "]" * 5000 + "\n")

        problem = only_problem(path)

        assert problem.line == 1
        assert problem.field == "courses" + "[0]" * MAX_DEPTH
        assert f"more than {MAX_DEPTH} levels deep" in problem.message
        assert "check the indentation, brackets and aliases there" in problem.message

    def test_given_indented_blocks_nested_too_deep_then_the_line_of_the_first_too_deep_is_named(
        self, write_yaml
    ):
        text = "".join("  " * level + f"k{level}:\n" for level in range(MAX_DEPTH + 5))
        path = write_yaml(text)

        problem = only_problem(path)

        assert problem.line == MAX_DEPTH + 1
        assert problem.field == ".".join(f"k{level}" for level in range(MAX_DEPTH))

    def test_given_a_chain_of_aliases_each_one_deeper_then_the_depth_limit_is_named(
        self, write_yaml
    ):
        # Every line is shallow; only following the aliases nests deeper and deeper.
        lines = ["a0: &a0 [x]"] + [f"a{n}: &a{n} [*a{n - 1}]" for n in range(1, MAX_DEPTH + 5)]
        path = write_yaml("\n".join(lines) + "\n")

        problem = only_problem(path)

        # a31 is a list in a list ... 32 deep around x: one level too many. Its line is named.
        assert problem.field == f"a{MAX_DEPTH - 1}" + "[0]" * MAX_DEPTH
        assert problem.line == MAX_DEPTH
        assert f"more than {MAX_DEPTH} levels deep" in problem.message

    def test_given_a_long_chain_of_merges_then_the_depth_limit_is_named_at_its_use(
        self, write_yaml
    ):
        # Each block merges the one before it, hidden where its keys are all overridden
        # (so it is never built on the way): only the last use follows the whole chain.
        lines = ["hidden:"]
        for n in range(2000):
            inner = "{z: 1}" if n == 0 else f"{{<<: *n{n - 1}}}"
            lines.append(f"  - {{k: 0, <<: {{k: &n{n} {inner}}}}}")
        lines.append("settings: {<<: *n1999}")
        path = write_yaml("\n".join(lines) + "\n")

        problem = only_problem(path)

        assert (problem.line, problem.field) == (2002, "settings")
        assert f"more than {MAX_DEPTH} levels deep" in problem.message


class TestOtherShapes:
    def test_given_a_file_larger_than_the_limit_then_it_is_refused_unread(self, tmp_path):
        path = tmp_path / "catalog.yaml"
        path.write_text("# " + "x" * MAX_FILE_BYTES + "\n")

        problem = only_problem(path)

        assert (problem.path, problem.line, problem.field) == (path, None, "")
        assert problem.message.startswith(
            f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, far more than a catalog needs"
        )
        assert "split it into several files in a catalog folder" in problem.message

    def test_given_an_alias_to_an_anchor_not_yet_defined_then_it_says_to_anchor_first(
        self, write_yaml
    ):
        path = write_yaml(
            """\
            standing:
              - id: cpu
                title: *name
            """
        )

        problem = only_problem(path)

        assert (problem.line, problem.field) == (3, "standing[0].title")
        assert "uses the alias *name, but no block above it is anchored &name" in problem.message

    def test_given_the_same_anchor_twice_then_the_first_is_named(self, write_yaml):
        path = write_yaml(
            """\
            standing:
              - &p {id: cpu, title: CPU}
              - &p {id: gpu, title: GPU}
            """
        )

        problem = only_problem(path)

        assert (problem.line, problem.field) == (3, "standing[1]")
        assert "defines the anchor &p a second time (first at line 2)" in problem.message

    def test_given_two_documents_in_one_file_then_the_second_is_named(self, write_yaml):
        path = write_yaml(
            """\
            standing: [{id: cpu, title: CPU}]
            ---
            standing: [{id: gpu, title: GPU}]
            """
        )

        problem = only_problem(path)

        assert problem.line == 2
        assert "starts a second YAML document" in problem.message

    def test_given_a_merge_of_a_plain_value_then_it_says_what_to_merge(self, write_yaml):
        path = write_yaml(
            """\
            settings:
              <<: 3
            """
        )

        problem = only_problem(path)

        assert (problem.line, problem.field) == (2, "settings")
        assert "the merge key << takes a block of fields" in problem.message

    def test_given_a_key_that_is_a_list_then_it_is_refused_without_building_it(self, write_yaml):
        path = write_yaml(
            """\
            settings:
              ? [a, b]
              : 1
            """
        )

        problem = only_problem(path)

        assert (problem.line, problem.field) == (2, "settings")
        assert "has a key that is not a plain name" in problem.message

    def test_given_an_alias_then_the_line_map_points_at_the_alias_not_the_anchor(self, write_yaml):
        path = write_yaml(
            """\
            first: &shared [1, 2]
            second:
              - *shared
            """
        )

        data, lines = load_with_lines(path)

        assert data == {"first": [1, 2], "second": [[1, 2]]}
        assert lines[("second", 0)] == 3
        assert lines[("second", 0, 1)] == 1


def test_given_an_alias_bomb_then_gpuspawner_check_prints_the_line_without_a_traceback(
    write_yaml,
):
    path = write_yaml(ALIAS_BOMB)

    result = subprocess.run(
        [sys.executable, "-m", "gpuspawner", "check", str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"{path}:" in result.stderr and "alias bomb" in result.stderr
    assert "1 error: fix the catalog and run gpuspawner check again." in result.stderr


@pytest.mark.parametrize("parser", ["libyaml", "pure-python"])
def test_given_either_yaml_parser_then_the_same_lines_and_errors_come_out(
    write_yaml, monkeypatch, parser
):
    # PyYAML uses libyaml's parser when it was built with it; the pure-Python one otherwise.
    if parser == "libyaml" and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("this PyYAML was built without libyaml")
    loader = yaml.CSafeLoader if parser == "libyaml" else yaml.SafeLoader
    monkeypatch.setattr("gpuspawner.policy.yaml_source._Loader", loader)
    good = write_yaml(
        """\
        standing:
          - &cpu {id: cpu, title: CPU only}
          - id: big
            title: Big
            <<: *cpu
        """,
        name="good.yaml",
    )
    bomb = write_yaml(ALIAS_BOMB, name="bomb.yaml")
    loop = write_yaml("courses: &a [*a]\n", name="loop.yaml")

    data, lines = load_with_lines(good)

    assert data["standing"][1] == {"id": "big", "title": "Big"}
    assert (lines[("standing", 1)], lines[("standing", 1, "title")]) == (3, 4)
    assert "alias bomb" in only_problem(bomb).message
    assert (only_problem(loop).line, only_problem(loop).field) == (1, "courses[0]")
