"""The experimental zone on a real JupyterHub with LocalGPUSpawner and real servers.

A try-out profile in the experimental zone keeps ``~/scratch`` in the zone's folder
(``c.GPUAdmission.experimental_root``): its card says when it is wiped, the server finds the
folder in its home, and what it writes there outlives the server (until the daily wipe of
the course-sessions service: tests/sessions/test_zone_wipe.py, on a moved clock).
"""

from __future__ import annotations

import os
from datetime import datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ..support.course_catalogs import spawner_config, write_catalog
from ..support.hub_pages import cards, page_error

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'
CATALOG = """\
settings:
  timezone: Europe/Zurich
  experimental_zone: {wipe_at: "03:00", warning: 2h}
standing:
  - id: cpu
    title: CPU only
    default: true
  - id: try-out
    title: Try-out area
    zone: experimental
    storage:
      - {name: scratch, source: experimental, mount: /scratch}
"""


def test_an_experimental_profile_keeps_scratch_in_the_zone_between_servers(
    start_hub, browserless_user, tmp_path
):
    # Given a hub whose experimental zone is a folder of its own
    catalog_dir = tmp_path / "catalog"
    write_catalog(catalog_dir, CATALOG)
    zone, homes = tmp_path / "experimental", tmp_path / "homes"
    hub = start_hub(
        spawner_config(
            catalog_dir,
            ONE_GPU,
            f"c.GPUAdmission.experimental_root = {str(zone)!r}\n"
            f"c.SimpleLocalGPUSpawner.home_dir_template = {str(homes / '{username}')!r}\n",
        )
    )
    ana = browserless_user(hub, "ana")
    ana.login()

    # When Ana opens the spawn page, the try-out card says what is wiped and when
    shown = cards(ana.get_spawn_page().text)
    # (the time naming its zone, CET or CEST today, for the page to tell in the reader's)
    zurich = ZoneInfo("Europe/Zurich")
    today = datetime.combine(datetime.now(zurich).date(), time(3), tzinfo=zurich)
    assert (
        f"Experimental zone: ~/scratch is wiped every day at 03:00 {today.tzname()} , after a "
        "warning. Keep what matters in your home or a production profile."
    ) in " ".join(shown["try-out"]["text"].split())
    assert "Experimental zone" not in shown["cpu"]["text"]

    # When she starts it
    page = ana.post_spawn_form({"profile": "try-out"})
    assert page.status_code == 200, page_error(page.text)
    ana.wait_ready()

    # Then ~/scratch is her folder in the zone, private to her
    link = homes / "ana" / "scratch"
    assert link.is_symlink() and Path(os.readlink(link)) == zone / "ana" / "scratch"
    assert (zone / "ana").stat().st_mode & 0o777 == 0o700
    (link / "model.pt").write_bytes(b"weights")

    # And what she wrote there is still there after the server stops and starts again
    ana.stop_server()
    assert (zone / "ana" / "scratch" / "model.pt").read_bytes() == b"weights"
    assert ana.spawn_via_api({"profile": "try-out"}).status_code in (201, 202)
    ana.wait_ready()
    assert (link / "model.pt").read_bytes() == b"weights"
    ana.stop_server()


def test_without_a_zone_folder_the_profile_is_refused_with_a_sentence(
    start_hub, browserless_user, tmp_path
):
    # Given a hub with no c.GPUAdmission.experimental_root
    catalog_dir = tmp_path / "catalog"
    write_catalog(catalog_dir, CATALOG)
    hub = start_hub(
        spawner_config(
            catalog_dir,
            ONE_GPU,
            f"c.SimpleLocalGPUSpawner.home_dir_template = {str(tmp_path / 'homes' / '{username}')!r}\n",
        )
    )
    ana = browserless_user(hub, "ana")
    ana.login()

    # When Ana starts the try-out profile, she is told why it cannot start
    response = ana.spawn_via_api({"profile": "try-out"})
    assert response.status_code == 503
    assert response.json()["message"] == (
        "This profile keeps files in the experimental zone, which this hub has no folder "
        "for; tell the hub admins (c.GPUAdmission.experimental_root)."
    )
    assert ana.model()["servers"] == {}
