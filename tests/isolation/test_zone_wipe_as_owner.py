"""The experimental zone's wipe on a shared machine: the course-sessions service's account
may not read anyone's zone folder, so it asks the root-owned helper
(``python -m gpuspawner.zone_wipe_helper``), which empties each folder as its owner.

Needs root: it makes the system accounts of two people (zonealice, zonebob) and of the
service (zonewipesvc), runs the helper as root, as the workstation hub does, and the
service's wiper (the class the service runs) as the service's account, on a moved clock;
then the shipped workstation hub, whose Try-out area starts and is wiped at the catalog's
hour (moved to the coming minute) through the helper the hub runs.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psutil
import pytest
import requests

from gpuspawner.core.accounts import UserAccount, ensure_account
from gpuspawner.sessions.zone_wipe import NOTICE

from ..support import until
from ..support.hubprocess import REPO_ROOT, BrowserlessUser, RunningHub
from .conftest import _account_exists, crossable_by_everyone, needs_root, workstation_hub

ALICE, BOB, SERVICE = "zonealice", "zonebob", "zonewipesvc"
CATALOG = """\
settings:
  timezone: UTC
  experimental_zone: {wipe_at: "03:00", warning: 2h}
standing:
  - id: try-out
    title: Try-out area
    zone: experimental
    storage:
      - {name: experimental, source: experimental, mount: /experimental}
"""

# What the course-sessions service does, run as its account: look at the zone's folders
# (it must not be able to), then the wiper's rounds through the helper, or single requests.
SERVICE_SIDE = """
import json, os, socket, sys
from datetime import datetime
from gpuspawner.policy import load_catalog
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.zone_wipe import ExperimentalZoneWiper
from gpuspawner.zone_wipe_helper import HelperZoneFolders

plan = json.loads(sys.argv[1])
report = {"uid": os.getuid(), "read": {}, "rounds": [], "answers": []}
for path in plan.get("probe", []):
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").read()
        report["read"][path] = "allowed"
    except OSError as error:
        report["read"][path] = type(error).__name__
wiper = ExperimentalZoneWiper(HelperZoneFolders(plan["socket"]), AuditLog(plan["audit"]))
for moment in plan.get("rounds", []):
    entries = wiper.round(load_catalog(plan["catalog"]), datetime.fromisoformat(moment))
    report["rounds"].append([[e["action"], e.get("user"), e["detail"]] for e in entries])
for request in plan.get("requests", []):
    with socket.socket(socket.AF_UNIX) as connection:
        try:
            connection.connect(plan["socket"])
        except OSError as error:
            report["answers"].append({"connect": type(error).__name__})
            continue
        connection.sendall(json.dumps(request).encode() + b"\\n")
        report["answers"].append(json.loads(connection.makefile().readline()))
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def accounts() -> Iterator[dict[str, UserAccount]]:
    needs_root()
    names = {ALICE: False, BOB: False, SERVICE: True}
    existed = {name for name in names if _account_exists(name)}
    try:
        yield {name: ensure_account(name, service=service) for name, service in names.items()}
    finally:
        for name in names:
            if name not in existed:
                subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)


def own(path: Path, account: UserAccount, mode: int) -> None:
    os.chown(path, account.uid, account.gid)
    path.chmod(mode)


class Zone:
    """The zone's folder as the workstation hub lays it out, and the helper serving it."""

    def __init__(self, tmp_path: Path, accounts: dict[str, UserAccount]):
        self.accounts = accounts
        self.root = tmp_path / "experimental"
        self.root.mkdir(mode=0o711)
        self.root.chmod(0o711)  # crossed by every owner, listed by none
        self.catalog = tmp_path / "catalog.yaml"
        self.catalog.write_text(CATALOG)
        self.catalog.chmod(0o644)
        self.socket = tmp_path / "zone-wipe" / "wipe.sock"
        self.service_dir = tmp_path / "course-sessions"
        self.service_dir.mkdir()
        own(self.service_dir, accounts[SERVICE], 0o700)
        self.helper: subprocess.Popen | None = None

    def folder(self, name: str) -> Path:
        """A person's folder in the zone, as their server's start makes it (0700, theirs)."""
        account = self.accounts[name]
        mine = self.root / name
        (mine / "experimental").mkdir(parents=True)
        for path in (mine, mine / "experimental"):
            own(path, account, 0o700)
        return mine / "experimental"

    def write(self, path: Path, text: str, owner: str) -> Path:
        path.write_text(text)
        own(path, self.accounts[owner], 0o600)
        return path

    def start_helper(self) -> None:
        self.helper = subprocess.Popen(
            [
                *(sys.executable, "-m", "gpuspawner.zone_wipe_helper"),
                *("--root", str(self.root), "--socket", str(self.socket)),
                *("--client-account", SERVICE, "--catalog", str(self.catalog)),
            ],
            cwd=REPO_ROOT,
        )
        until(lambda: self.socket.exists() or self.helper.poll() is not None, "the helper")
        assert self.helper.poll() is None, "the helper stopped"

    def stop_helper(self) -> None:
        if self.helper is not None and self.helper.poll() is None:
            self.helper.terminate()
            self.helper.wait()

    def as_account(
        self, name: str, plan: dict[str, Any], *, in_group_of: str | None = None
    ) -> dict[str, Any]:
        """Run the service's side as ``name`` (the service's account, or someone else;
        ``in_group_of``: with that account's group added, as a careless admin might)."""
        account = self.accounts[name]

        def become() -> None:
            if in_group_of is None:
                account.become()
                return
            os.setgroups([*account.groups, self.accounts[in_group_of].gid])
            os.setresgid(account.gid, account.gid, account.gid)
            os.setresuid(account.uid, account.uid, account.uid)

        plan = {
            "socket": str(self.socket),
            "catalog": str(self.catalog),
            "audit": str(self.service_dir / "course-sessions.jsonl"),
            **plan,
        }
        done = subprocess.run(
            [sys.executable, "-c", SERVICE_SIDE, json.dumps(plan)],
            preexec_fn=become,
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        [line] = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
        return json.loads(line.removeprefix("REPORT "))


@pytest.fixture
def zone(tmp_path: Path, accounts: dict[str, UserAccount]) -> Iterator[Zone]:
    needed = [tmp_path, Path(sys.executable).resolve().parent, Path(sys.prefix), REPO_ROOT]
    with crossable_by_everyone(needed):
        zone = Zone(tmp_path, accounts)
        try:
            yield zone
        finally:
            zone.stop_helper()


def test_the_service_wipes_alices_zone_folder_at_the_hour_without_reading_it(zone, accounts):
    # Given alice keeps a model in her zone folder, and a link there into her home
    alice = accounts[ALICE]
    scratch = zone.folder(ALICE)
    model = zone.write(scratch / "model.pt", "weights", ALICE)
    thesis = zone.write(Path(alice.home) / "thesis.tex", "my thesis", ALICE)
    (scratch / "my-home").symlink_to(alice.home, target_is_directory=True)
    os.lchown(scratch / "my-home", alice.uid, alice.gid)
    # and bob keeps a draft in his
    draft = zone.write(zone.folder(BOB) / "draft.py", "print(1)", BOB)
    zone.start_helper()

    # When the service's round runs as its account at 01:00, two hours before the wipe
    report = zone.as_account(
        SERVICE,
        {
            "probe": [str(zone.root), str(zone.root / ALICE), str(model)],
            "rounds": ["2025-03-10T01:00:00+00:00"],
        },
    )

    # Then the service could neither list the zone nor read alice's folder or file
    assert report["uid"] == accounts[SERVICE].uid
    assert set(report["read"].values()) == {"PermissionError"}, report["read"]
    # And both were warned, with the notice in their folder, written as its owner
    [warned] = report["rounds"]
    assert [(action, user) for action, user, _ in warned] == [
        ("zone-warn", ALICE),
        ("zone-warn", BOB),
    ]
    notice = zone.root / ALICE / NOTICE
    assert notice.stat().st_uid == alice.uid
    assert notice.read_text().startswith("Your experimental-zone folders will be wiped at 03:00")
    assert model.read_text() == "weights"

    # When the round at 03:00 comes
    [wiped] = zone.as_account(SERVICE, {"rounds": ["2025-03-10T03:00:00+00:00"]})["rounds"]

    # Then both folders are emptied, audited, the folders themselves kept
    assert [(action, user) for action, user, _ in wiped] == [
        ("zone-wipe", ALICE),
        ("zone-wipe", BOB),
    ]
    # (her experimental folder and the notice; the link was inside the former)
    assert wiped[0][2] == f"Wiped {ALICE}'s folder: 2 items removed."
    assert list((zone.root / ALICE).iterdir()) == [] and not draft.exists()
    assert (zone.root / ALICE).stat().st_uid == alice.uid
    # And the link into her home was removed, not followed: her home is untouched
    assert thesis.read_text() == "my thesis"
    assert Path(alice.home).is_dir()


def test_emptying_alices_folder_is_done_as_alice_and_never_reaches_bobs(zone, accounts):
    # Given alice's zone folder holds a file, a link to bob's zone folder, and a folder root
    # left there that alice herself may not empty
    scratch = zone.folder(ALICE)
    zone.write(scratch / "model.pt", "weights", ALICE)
    bobs = zone.folder(BOB)
    draft = zone.write(bobs / "draft.py", "print(1)", BOB)
    (scratch / "bobs").symlink_to(bobs, target_is_directory=True)
    roots = scratch / "left-by-root"
    roots.mkdir()
    (roots / "keep.txt").write_text("root's")
    zone.start_helper()

    # When the service asks the helper to empty alice's folder
    report = zone.as_account(SERVICE, {"requests": [{"action": "empty", "user": ALICE}]})

    # Then what alice may remove is gone, the link too (not followed: bob's draft stays),
    # and root's folder stays, since the work was done as alice: her experimental folder
    # is reported as not wholly removed
    [answer] = report["answers"]
    assert answer == {"ok": [0, ["experimental: Permission denied"]]}
    assert sorted(p.name for p in scratch.iterdir()) == ["left-by-root"]
    assert (roots / "keep.txt").read_text() == "root's"
    assert draft.read_text() == "print(1)"


def test_the_helper_answers_only_the_service_and_only_a_users_own_folder(zone, accounts):
    # Given alice's and bob's folders, and, where the service's account's folder would be,
    # a link into alice's home
    zone.write(zone.folder(ALICE) / "model.pt", "weights", ALICE)
    draft = zone.write(zone.folder(BOB) / "draft.py", "print(1)", BOB)
    thesis = zone.write(Path(accounts[ALICE].home) / "thesis.tex", "my thesis", ALICE)
    (zone.root / SERVICE).symlink_to(accounts[ALICE].home, target_is_directory=True)
    zone.start_helper()

    # When alice herself asks the helper to empty bob's folder
    asked_by_alice = zone.as_account(ALICE, {"requests": [{"action": "empty", "user": BOB}]})
    # Then she cannot even reach its socket
    assert asked_by_alice["answers"] == [{"connect": "PermissionError"}]
    # And with the service's group given to her by mistake she reaches it, but is refused:
    # only the service's account is answered
    in_group = zone.as_account(
        ALICE, {"requests": [{"action": "empty", "user": BOB}]}, in_group_of=SERVICE
    )
    assert in_group["answers"] == [{"error": "Only the course-sessions service may ask."}]

    # When the service asks with a path, root's name, or a name whose folder is a link
    report = zone.as_account(
        SERVICE,
        {
            "requests": [
                {"action": "empty", "user": f"../{BOB}"},
                {"action": "empty", "user": "root"},
                {"action": "empty", "user": SERVICE},
                {"action": "holds", "user": "nobody-here"},
                {"action": "users"},
            ]
        },
    )
    # Then each is refused with a sentence, and "users" names only real folders of their own
    path, root, link, unknown, users = report["answers"]
    assert path == {"error": f"'../{BOB}' is not a user name."}
    assert root == {"error": "root has no folder in the experimental zone."}
    assert link == {"error": f"{zone.root / SERVICE} is not a folder of {SERVICE}'s own."}
    assert unknown == {"error": "There is no system account 'nobody-here'."}
    assert users == {"ok": [ALICE, BOB]}
    # And nothing was removed anywhere
    assert draft.read_text() == "print(1)"
    assert thesis.read_text() == "my thesis"
    assert (zone.root / ALICE / "experimental" / "model.pt").exists()


# -- the workstation hub: the zone enabled, wiped through the helper --------------------------


@pytest.fixture(scope="module")
def workstation_with_fast_rounds() -> Iterator[RunningHub]:
    """The shipped workstation hub, its course-sessions service going round every 2 s."""
    needs_root()
    with workstation_hub(extra_env={"GPUSPAWNER_DEMO_SESSIONS_INTERVAL": "2"}) as hub:
        hub.launch()
        yield hub


def processes_running(hub: RunningHub, module: str) -> list[psutil.Process]:
    """The hub's child processes running ``python -m module``."""
    return [
        process
        for process in psutil.Process(hub.pid).children(recursive=True)
        if module in process.cmdline()
    ]


def test_on_the_workstation_the_try_out_area_starts_and_its_folder_is_wiped_at_the_hour(
    workstation_with_fast_rounds,
):
    hub = workstation_with_fast_rounds
    runtime: Path = hub.runtime  # type: ignore[attr-defined]
    student = BrowserlessUser(hub, "student3")
    home = Path(pwd.getpwnam("student3").pw_dir)

    # Given student3 starts the Try-out area (no longer refused on the workstation)
    student.login()
    answer = student.spawn_via_api({"profile": "try-out"})
    assert answer.status_code in (201, 202), answer.text
    student.wait_ready()
    # and keeps a file in ~/experimental and one in his home, through his server
    headers = {"Authorization": f"token {student.token}"}
    for path in ("experimental/model.txt", "thesis.txt"):
        saved = requests.put(
            student.server_url() + f"api/contents/{path}",
            json={"type": "file", "format": "text", "content": "mine"},
            headers=headers,
            timeout=60,
        )
        assert saved.status_code in (200, 201), saved.text
    model = runtime / "experimental" / "student3" / "experimental" / "model.txt"
    assert model.stat().st_uid == pwd.getpwnam("student3").pw_uid

    # Then the hub runs the wipe helper as root, and the service as its own account with
    # the helper's socket and no zone folder
    [helper] = processes_running(hub, "gpuspawner.zone_wipe_helper")
    assert helper.uids().effective == 0
    [service] = processes_running(hub, "gpuspawner.sessions")
    assert service.username() == "gpuhub-services"
    assert "--experimental-wipe-helper" in service.cmdline()
    assert "--experimental-root" not in service.cmdline()

    # When the catalog moves the daily wipe to the coming minute
    catalog = runtime / "catalog" / "catalog.yaml"
    zone = ZoneInfo("Europe/Zurich")
    wipe_at = (datetime.now(zone) + timedelta(seconds=70)).replace(second=0, microsecond=0)
    text = catalog.read_text()
    assert 'experimental_zone: {wipe_at: "03:00", warning: 2h}' in text
    catalog.write_text(
        text.replace('wipe_at: "03:00"', f'wipe_at: "{wipe_at:%H:%M}"'),
    )

    # Then student3 is warned, and at that minute his zone file is gone
    audit = runtime / "course-sessions" / "course-sessions.jsonl"

    def zone_entries() -> list[tuple[str, str]]:
        lines = [json.loads(line) for line in audit.read_text().splitlines()]
        return [(e["action"], e.get("user")) for e in lines if e["action"].startswith("zone-")]

    until(lambda: ("zone-wipe", "student3") in zone_entries(), "the wipe", timeout=300)
    assert ("zone-warn", "student3") in zone_entries()
    assert not model.exists()
    # And his home, his server's ~/experimental link and his zone folder are still there
    assert (home / "thesis.txt").read_text() == "mine"
    assert (home / "experimental").is_symlink()
    assert (runtime / "experimental" / "student3").is_dir()
    # And the service never got to read the zone itself
    assert not any(action == "zone-wipe-refused" for action, _ in zone_entries()), zone_entries()
