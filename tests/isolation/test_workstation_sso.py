"""Campus single sign-on on the shared workstation: a person's system account is made at their
first login, and their server runs as it.

The shipped workstation configuration with ``GPUSPAWNER_WORKSTATION_AUTH=sso`` (which lays
hub_config/sso over it), against the real stand-in campus identity provider.
"""

from __future__ import annotations

import pwd
import secrets
from pathlib import Path

import pytest
import requests

from ..support.idp import browserless_login, free_port, start_campus_idp
from .conftest import needs_root, workstation_hub
from .student import Student

pytestmark = pytest.mark.integration

PERSON = "wsada"
PASSWORD = "correct horse battery staple"
CLIENT_ID = "campus-gpu-hub"


def test_a_person_signing_in_through_the_campus_gets_their_own_account_and_server():
    needs_root()
    try:
        pwd.getpwnam(PERSON)
        pytest.skip(f"a system account {PERSON!r} exists already; this test makes it itself")
    except KeyError:
        pass
    # Given the workstation hub logging in through the campus provider, where Ada is a
    # student of the demo course (by the course's group) and has no account on the machine
    client_secret = secrets.token_hex(16)
    issuer_port = free_port()
    environment = {
        "GPUSPAWNER_WORKSTATION_AUTH": "sso",
        "CAMPUS_OIDC_ISSUER": f"http://127.0.0.1:{issuer_port}",
        "CAMPUS_OIDC_CLIENT_ID": CLIENT_ID,
        "CAMPUS_OIDC_CLIENT_SECRET": client_secret,
    }
    with workstation_hub(environment, accounts=[PERSON]) as hub:
        idp = start_campus_idp(
            clients=[
                {
                    "client_id": CLIENT_ID,
                    "client_secret": client_secret,
                    "redirect_uris": [f"{hub.url}/hub/oauth_callback"],
                }
            ],
            users=[
                {
                    "username": PERSON,
                    "password": PASSWORD,
                    "name": "Ada Lovelace",
                    "email": "ada@campus.example",
                    "groups": ["students", "course-gpu-demo-students"],
                }
            ],
            workdir=hub.runtime / "idp",  # type: ignore[attr-defined]
            port=issuer_port,
        )
        try:
            hub.launch()

            # When she signs in for the first time
            session = requests.Session()
            landed = browserless_login(session, f"{hub.url}/hub/oauth_login", PERSON, PASSWORD)

            # Then she is in, and the machine has an account for her with a private home
            assert landed.status_code == 200, landed.text[-2000:]
            account = pwd.getpwnam(PERSON)
            assert account.pw_uid != 0
            assert Path(account.pw_dir).stat().st_mode & 0o777 == 0o700

            # and her course server runs as that account, in her home
            student = Student(hub, PERSON)
            started = student.user.spawn_via_api({"profile": "gpu-demo"})
            assert started.status_code in (201, 202), started.text
            student.user.wait_ready()
            process = student.server_process()
            assert process.uids().real == account.pw_uid
            assert process.cwd() == account.pw_dir
        finally:
            idp.stop()
