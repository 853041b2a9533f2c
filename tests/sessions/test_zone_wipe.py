"""The experimental zone, warned about and wiped by the service's rounds on a moved clock.

The catalog's experimental zone is wiped every day at 03:00 Europe/Zurich with a 2-hour
warning. Ana keeps files in her experimental folder (and a link out of it to her home);
Ben's folder holds only an empty folder. The service's rounds run through a night: Ana is
warned at 01:00 (an audit line, a notice in her folder, the home page's alert), Ben once
he writes a file at 02:00, their folders are emptied at 03:00, once, and Ana's home, the
production storage and the zone's folders themselves are untouched. The hub is the REST
stand-in of fake_hub.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gpuspawner.cli import main
from gpuspawner.policy import CatalogError, load_catalog
from gpuspawner.policy.zones import wipe_schedule
from gpuspawner.sessions import course_sessions_service
from gpuspawner.sessions.__main__ import build_parser
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.hub_client import HubClient
from gpuspawner.sessions.reclaim_api import render_warnings
from gpuspawner.sessions.service import SessionsService
from gpuspawner.sessions.watched_catalog import WatchedCatalog
from gpuspawner.sessions.zone_wipe import NOTICE, ExperimentalZoneWiper

from .fake_hub import FakeHub

TOKEN = "service-token-123"
ZURICH = ZoneInfo("Europe/Zurich")


def catalog_text(production: Path) -> str:
    return f"""\
settings:
  timezone: Europe/Zurich
  experimental_zone: {{wipe_at: "03:00", warning: 2h}}
standing:
  - id: try-out
    title: Try-out area
    zone: experimental
    storage:
      - {{name: scratch, source: experimental, mount: /scratch}}
  - id: production
    title: Production
    storage:
      - {{name: results, source: "path:{production}", mount: /results, read_only: false}}
"""


def zurich(day: int, hour: int, minute: int = 0) -> datetime:
    """A wall-clock time in Zurich in March 2025, as UTC."""
    return datetime(2025, 3, day, hour, minute, tzinfo=ZURICH).astimezone(UTC)


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def audit(path: Path) -> list[dict]:
    """The zone's audit entries (the service also records its catalog loads)."""
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in entries if e["action"].startswith("zone-")]


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """The zone's folder with ana's data and ben's empty folder, ana's home and the
    production storage, each with a file."""
    root = tmp_path / "experimental"
    home = tmp_path / "homes" / "ana"
    production = tmp_path / "production"
    for folder in (root / "ana" / "scratch" / "run-1", root / "ben" / "scratch", home, production):
        folder.mkdir(parents=True)
    (root / "ana" / "scratch" / "run-1" / "model.pt").write_bytes(b"weights")
    (root / "ana" / "scratch" / "notes.txt").write_text("try this")
    (home / "thesis.tex").write_text("my thesis")
    (production / "final.csv").write_text("1,2,3")
    # A link from the zone to the home: the wipe removes the link, never what it points to
    (root / "ana" / "scratch" / "my-home").symlink_to(home, target_is_directory=True)
    return {"root": root, "home": home, "production": production, "catalog": tmp_path / "c.yaml"}


async def test_the_zone_is_warned_about_then_wiped_at_the_set_hour_and_nothing_else(places):
    places["catalog"].write_text(catalog_text(places["production"]))
    log_path = places["catalog"].parent / "audit.jsonl"
    log = AuditLog(log_path)
    clock = Clock(zurich(10, 0, 30))
    hub = FakeHub(token=TOKEN, users={}, now=clock.now)
    async with hub.serving() as api_url:
        service = SessionsService(
            HubClient(api_url, TOKEN),
            WatchedCatalog(places["catalog"], log),
            log,
            clock=clock,
            zone_wiper=ExperimentalZoneWiper(places["root"], log),
        )
        scratch = places["root"] / "ana" / "scratch"

        # Given 00:30, before the warning: nothing happens
        await service.tick()
        assert audit(log_path) == []

        # When the round at 01:00 comes (two hours before the wipe)
        clock.now = zurich(10, 1, 0)
        await service.tick()

        # Then Ana, who holds data there, is warned, with a notice in her folder; Ben is not
        (warned,) = [e for e in audit(log_path) if e["action"] == "zone-warn"]
        assert warned["user"] == "ana" and warned["reason"] == "experimental-zone"
        notice = (places["root"] / "ana" / NOTICE).read_text()
        assert notice.startswith("Your experimental-zone folders will be wiped at 03:00")
        assert "copy what you want to keep to your home or production storage" in notice
        assert not (places["root"] / "ben" / NOTICE).exists()
        assert service.zone_wiper.warnings["ana"].wipe_at == zurich(10, 3, 0)
        # And the hub's home page (the service's reclaim page it embeds) shows Ana the
        # warning with the time left; Ben sees none
        page = render_warnings([], clock.now, "xsrf", "/reclaim", service.zone_warnings_for("ana"))
        assert 'data-reason="experimental-zone"' in page
        assert "<strong>Experimental zone:</strong>" in page
        assert "Your experimental-zone folders will be wiped at 03:00" in page
        assert 'data-seconds-left="7200"' in page
        assert service.zone_warnings_for("ben") == []

        # When Ben writes a file at 02:00, the next round warns him too (once)
        (places["root"] / "ben" / "scratch" / "draft.py").write_text("print(1)")
        clock.now = zurich(10, 2, 0)
        await service.tick()
        assert [e["user"] for e in audit(log_path)] == ["ana", "ben"]

        # When rounds go on until just before the hour: no more warnings, nothing wiped
        clock.now = zurich(10, 2, 59)
        await service.tick()
        assert len(audit(log_path)) == 2
        assert (scratch / "run-1" / "model.pt").read_bytes() == b"weights"

        # When the round at 03:00 comes
        clock.now = zurich(10, 3, 0)
        await service.tick()

        # Then their folders are emptied (the notices too), audited, once, and the
        # warnings end
        assert service.zone_warnings_for("ana") == []
        wiped = [e for e in audit(log_path) if e["action"] == "zone-wipe"]
        assert [e["user"] for e in wiped] == ["ana", "ben"]
        assert wiped[0]["detail"] == f"Wiped {places['root'] / 'ana'}: 2 items removed."
        assert list((places["root"] / "ana").iterdir()) == []
        assert list((places["root"] / "ben").iterdir()) == []
        # And the zone's folders stay, so links from homes to them still work
        assert (places["root"] / "ana").is_dir() and (places["root"] / "ben").is_dir()
        # And the home the link pointed to, and the production storage, are untouched
        assert (places["home"] / "thesis.tex").read_text() == "my thesis"
        assert (places["production"] / "final.csv").read_text() == "1,2,3"

        # When the next rounds come the same night: nothing more is wiped
        (scratch.parent / "scratch").mkdir()
        (scratch / "after.txt").write_text("written at 03:05")
        clock.now = zurich(10, 3, 5)
        await service.tick()
        assert (scratch / "after.txt").exists()
        assert len([e for e in audit(log_path) if e["action"] == "zone-wipe"]) == 2

        # And the next night Ana is warned again, as she holds data again
        clock.now = zurich(11, 1, 0)
        await service.tick()
        warned = [e["user"] for e in audit(log_path) if e["action"] == "zone-warn"]
        assert warned == ["ana", "ben", "ana"]  # Ben holds nothing since the wipe


def test_a_root_that_holds_a_home_or_production_storage_is_never_wiped(places, tmp_path):
    # Given the service pointed, by mistake, at the folder that holds the production storage
    places["catalog"].write_text(catalog_text(places["production"]))
    catalog = load_catalog(places["catalog"])
    log_path = tmp_path / "audit.jsonl"
    wiper = ExperimentalZoneWiper(tmp_path, AuditLog(log_path))

    # When the wipe comes
    wiper.round(catalog, zurich(10, 3, 0))

    # Then it refuses, says why and what to do, and everything is still there
    (refused,) = audit(log_path)
    assert refused["action"] == "zone-wipe-refused"
    assert f"overlaps the production storage {places['production']}" in refused["detail"]
    assert "Point the service's experimental root at a folder of its own." in refused["detail"]
    assert (places["production"] / "final.csv").exists()
    assert (places["root"] / "ana" / "scratch" / "notes.txt").exists()


def test_a_wipe_missed_by_more_than_an_hour_is_left_out(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        'settings:\n  timezone: UTC\n  experimental_zone: {wipe_at: "03:00", warning: 30m}\n'
        "standing:\n  - {id: cpu, title: CPU}\n"
    )
    zone = load_catalog(path).settings.experimental_zone
    assert zone is not None
    late = wipe_schedule(zone, UTC, datetime(2025, 3, 10, 4, 30, tzinfo=UTC))
    on_time = wipe_schedule(zone, UTC, datetime(2025, 3, 10, 3, 59, tzinfo=UTC))
    assert not late.wipe_due(datetime(2025, 3, 10, 4, 30, tzinfo=UTC))
    assert on_time.wipe_due(datetime(2025, 3, 10, 3, 59, tzinfo=UTC))
    assert late.next == datetime(2025, 3, 11, 3, 0, tzinfo=UTC)
    assert late.warn_from == datetime(2025, 3, 11, 2, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (
            "standing:\n  - id: p\n    title: P\n    storage:\n"
            "      - {name: s, source: experimental, mount: /s}\n",
            "standing[0].storage[0].source",
            "this profile is in production; add zone: experimental",
        ),
        (
            "standing:\n  - id: p\n    title: P\n    zone: experimental\n    storage:\n"
            "      - {name: s, source: experimental, mount: /s}\n",
            "standing[0].storage[0].source",
            "the catalog has no experimental zone to mount; add settings.experimental_zone",
        ),
        (
            "settings:\n  experimental_zone: {warning: 25h}\nstanding:\n  - {id: p, title: P}\n",
            "settings.experimental_zone.warning",
            "shorter than a day",
        ),
        (
            "settings:\n  experimental_zone: {volume: scratch}\nstanding:\n  - {id: p, title: P}\n",
            "settings.experimental_zone.volume",
            "expected a claim (pvc:CLAIM) or an NFS export",
        ),
    ],
)
def test_zone_mistakes_in_the_catalog_are_located_and_explained(tmp_path, text, field, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    (problem,) = error.value.problems
    assert problem.field == field
    assert words in problem.message


def test_check_shows_the_zone_its_hour_and_its_profiles(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(catalog_text(tmp_path))
    assert main(["check", str(path)]) == 0
    assert (
        "Experimental zone: wiped every day at 03:00 (Europe/Zurich), warning 2 h before; "
        "profiles: try-out."
    ) in capsys.readouterr().out


def test_the_hub_hands_the_zone_folder_to_the_service_and_it_wipes_there(tmp_path):
    service = course_sessions_service(tmp_path / "c.yaml", experimental_root="/srv/experimental")
    command = service["command"]
    assert command[command.index("--experimental-root") + 1] == "/srv/experimental"
    args = build_parser({}).parse_args(command[3:])
    assert args.experimental_root == "/srv/experimental"
    # And from the environment, as every flag of the service
    env = {"GPUSPAWNER_SESSIONS_EXPERIMENTAL_ROOT": "/srv/zone"}
    assert build_parser(env).parse_args(["--catalog", "c.yaml"]).experimental_root == "/srv/zone"
