"""The job-service hub for a whole module (see job_hub.py for who is who).

Each person calls the service with a token holding exactly what their single-user
server's ``$JUPYTERHUB_API_TOKEN`` holds (``job_server_token_scopes()``, cut down by the hub
to what they may have); tara's token holds her role's scopes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jupyter_to_job.hub import job_server_token_scopes
from jupyter_to_job.scopes import READ_JOBS_SCOPE, access_scope

from ..support.job_hub import STUDENTS_GROUP, JobHub, start_job_hub, stopped_afterwards


@pytest.fixture(scope="module")
def job_hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JobHub]:
    """One hub for a whole module, with every person's server-like token."""
    with stopped_afterwards(start_job_hub(tmp_path_factory.mktemp("job-hub")), request) as setup:
        for name in ("alice", "bob", "ines", "olga", "root", "pete", "rhea"):
            setup.tokens[name] = setup.token(name, job_server_token_scopes())
        setup.tokens["tara"] = setup.token(
            "tara", [access_scope(), f"{READ_JOBS_SCOPE}!group={STUDENTS_GROUP}"]
        )
        yield setup
