"""The harness against the real components: hub, proxy and a single-user Jupyter server."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration

DUMMY_HUB = """
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "simple"
"""


def test_a_server_keeps_running_and_answering_across_a_hub_restart(start_hub, browserless_user):
    # Given a hub with a logged-in student whose default server is running
    hub = start_hub(DUMMY_HUB)
    alice = browserless_user(hub, "alice")
    alice.login()
    assert alice.spawn_via_api({}).status_code in (201, 202)
    server = alice.wait_ready()
    assert server["url"] == "/user/alice/"
    assert alice.get_from_server("api/status").status_code == 200

    # When the hub restarts
    hub.restart()

    # Then the hub still reports the server ready, the proxy routes to it again, and her
    # browser session from before the restart is still valid
    assert alice.wait_ready()["ready"] is True
    status = alice.get_from_server("api/status")
    assert status.status_code == 200
    assert "started" in status.json()
    assert alice.session.get(f"{hub.url}/hub/home", timeout=30).url.endswith("/hub/home")

    # And she can stop it
    alice.stop_server()
    assert alice.model()["servers"] == {}
