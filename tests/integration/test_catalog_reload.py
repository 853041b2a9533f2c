"""A real hub keeps serving while broken catalog files are dropped into its catalog folder.

An alias bomb and an alias to its own block are each refused where they are written; the
hub keeps answering with the last good catalog, and its log says which file and line to fix.
"""

from __future__ import annotations

import html
import re
import time
from datetime import timedelta

import pytest

from ..support.course_catalogs import catalog, course, minute, now, spawner_config, write_catalog

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'

# "Billion laughs": 9**9 values once every alias is expanded.
LETTERS = "abcdefghi"
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{letter}: &{letter} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, letter in zip(LETTERS, LETTERS[1:], strict=False)
)
ALIAS_TO_ITSELF = """\
standing:
  - &loop
    id: loop
    title: A profile that contains itself
    again: *loop
"""


def profile_ids(page_text: str) -> set[str]:
    return set(re.findall(r'data-profile="([^"]+)"', page_text))


def wait_for_log(hub, text: str, tries: int = 200) -> str:
    """The hub log once it contains ``text`` (a guard against hanging, not a time limit)."""
    for _ in range(tries):
        log = hub.log_text()
        if text in log:
            return log
        time.sleep(0.05)
    return hub.log_text()


def test_the_hub_keeps_its_last_good_catalog_while_broken_files_are_dropped_in(
    start_hub, browserless_user, tmp_path
):
    # Given a hub whose catalog folder offers a course that is open now, and the CPU profile
    t = minute(now())
    folder = tmp_path / "catalog"
    ml101 = course(
        "ml101", start=t - timedelta(minutes=5), end=t + timedelta(minutes=55), students=["ana"]
    )
    write_catalog(folder, catalog(ml101))
    hub = start_hub(spawner_config(folder, ONE_GPU))
    ana = browserless_user(hub, "ana")
    ana.login()
    assert profile_ids(ana.get_spawn_page().text) == {"cpu", "ml101"}

    for name, text in [("bomb.yaml", ALIAS_BOMB), ("loop.yaml", ALIAS_TO_ITSELF)]:
        # When an instructor drops a broken file beside the good one
        log_before = len(hub.log_text())
        broken = folder / name
        broken.write_text(text)

        # Then the hub keeps answering, with the last good catalog's profiles
        assert hub.api("GET", "/").status_code == 200
        page = ana.get_spawn_page()
        assert page.status_code == 200
        assert profile_ids(page.text) == {"cpu", "ml101"}

        # And its log names the file and line to fix, and that the good catalog stays
        log = wait_for_log(hub, f"{broken}:")[log_before:]
        located = re.search(rf"{re.escape(str(broken))}:(\d+): ([^\n]*)", log)
        assert located, hub.log_tail(40)
        line, message = int(located.group(1)), html.unescape(located.group(2))
        if name == "bomb.yaml":
            # The line of the key whose aliases multiply past the limit, and that alias.
            assert 2 <= line <= len(LETTERS)
            assert f"the alias *{LETTERS[line - 2]} makes the file repeat more than" in message
            assert "looks like an alias bomb and was not loaded" in message
        else:
            assert line == 5
            assert message.startswith("standing[0].again: the alias *loop refers to the block")
        assert "keeping the last good one" in log
        assert "Traceback" not in log
        broken.unlink()

    # And once the broken files are gone, a new good file is picked up as usual
    stats = course(
        "stats101", start=t - timedelta(minutes=5), end=t + timedelta(minutes=55), students=["ana"]
    )
    (folder / "stats.yaml").write_text("courses:\n" + stats)
    assert eventually_offered(ana, {"cpu", "ml101", "stats101"})


def eventually_offered(user, expected: set[str], tries: int = 100) -> bool:
    """Open the spawn page until it offers ``expected`` (a guard, not a time limit)."""
    for _ in range(tries):
        if profile_ids(user.get_spawn_page().text) == expected:
            return True
        time.sleep(0.1)
    return False
