"""The server extension's relay to the job service, when the service is missing."""

from __future__ import annotations

import pytest

from jupyter_to_job.rest import ApiError

from ..support.hubprocess import free_loopback_ports
from ..support.job_service_client import JobServiceClient as ServiceRelay


async def test_a_server_without_the_services_address_says_run_as_job_is_not_set_up():
    relay = ServiceRelay("", "server-token")
    with pytest.raises(ApiError) as refused:
        await relay.list_jobs({})
    assert (refused.value.status, refused.value.reason) == (503, "not-configured")
    assert "tell the hub admins" in refused.value.message.lower()


async def test_an_unreachable_service_is_a_503_with_a_sentence():
    (closed,) = free_loopback_ports(1)
    relay = ServiceRelay(f"http://127.0.0.1:{closed}/services/jupyter-to-job", "server-token")
    for call in (relay.flavors(), relay.describe("some-job")):
        with pytest.raises(ApiError) as refused:
            await call
        assert refused.value.status == 503
        assert refused.value.message.startswith("The job service cannot be reached")
