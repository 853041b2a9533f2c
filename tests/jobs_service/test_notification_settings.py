"""Scenarios on a real hub: a user saves their default notifications in the job service,
gets their webhook secret once, and a job created without settings sends them a signed
webhook when it ends; bad webhook addresses are 400s with a sentence."""

from __future__ import annotations

import json

import pytest

from jupyter_to_job.notifications import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature
from jupyter_to_job.rest import ApiError

from ..support import until
from ..support.job_hub import JobHub
from ..support.job_service_client import JobServiceClient as ServiceRelay
from ..support.notebooks import notebook_json
from ..support.notification_receivers import WebhookReceiver, webhook_receiver_fixture

pytestmark = pytest.mark.integration

webhook_receiver = webhook_receiver_fixture()

QUICK = notebook_json("print('trained')")


def test_the_owners_default_webhook_is_signed_with_the_secret_shown_to_them_once(
    job_hub: JobHub, webhook_receiver: WebhookReceiver
) -> None:
    alice = job_hub.as_("alice")

    saved = alice.request(
        "PUT", "notification-settings", json={"default": {"webhook_url": webhook_receiver.url}}
    )
    assert saved.status_code == 200, saved.text
    secret = saved.json()["webhook_secret"]
    assert secret and saved.json()["webhook_secret_set"] is True
    read_back = alice.request("GET", "notification-settings").json()
    assert read_back["webhook_secret"] is None and read_back["webhook_secret_set"] is True
    assert read_back["default"]["webhook_url"] == webhook_receiver.url
    assert (
        job_hub.as_("bob").request("GET", "notification-settings").json()["default"]["webhook_url"]
        is None
    )

    created = alice.create(QUICK, input_path="train.ipynb", flavor="cpu-job")
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    assert alice.wait_for(job_id, "COMPLETED", "FAILED")["status"] == "COMPLETED"

    (hook,) = until(lambda: webhook_receiver.received, "alice's webhook")
    body = json.loads(hook.body)
    assert (body["job_id"], body["owner"], body["status"]) == (job_id, "alice", "COMPLETED")
    timestamp, signature = hook.headers[TIMESTAMP_HEADER], hook.headers[SIGNATURE_HEADER]
    assert verify_signature(secret, hook.body, timestamp, signature)
    assert not verify_signature("not-" + secret, hook.body, timestamp, signature)


@pytest.mark.parametrize(
    "url", ["http://example.org/hook", "ftp://example.org/hook", "https://user:pw@example.org/"]
)
def test_a_job_with_a_webhook_that_is_not_https_is_refused_with_a_sentence(
    job_hub: JobHub, url: str
) -> None:
    answer = job_hub.as_("alice").create(
        QUICK, input_path="train.ipynb", flavor="cpu-job", notify={"webhook_url": url}
    )

    assert answer.status_code == 400, answer.text
    problem = answer.json()
    assert problem["errors"][0]["field"] == "notify.webhook_url"
    assert problem["message"].startswith("The request has errors: notify.webhook_url: the webhook")
    assert problem["message"].endswith(".")


def test_default_settings_with_a_bad_webhook_are_refused(job_hub: JobHub) -> None:
    answer = job_hub.as_("alice").request(
        "PUT", "notification-settings", json={"default": {"webhook_url": "http://example.org/"}}
    )

    assert answer.status_code == 400, answer.text
    assert "must start with https://" in answer.json()["message"]


def test_a_job_webhook_before_any_secret_is_refused_saying_what_to_do(job_hub: JobHub) -> None:
    answer = job_hub.as_("olga").create(
        QUICK,
        input_path="train.ipynb",
        flavor="cpu-job",
        notify={"webhook_url": "https://hooks.example.org/olga"},
    )

    assert answer.status_code == 400, answer.text
    assert answer.json()["reason"] == "no-webhook-secret"
    assert "PUT api/notification-settings" in answer.json()["message"]


async def test_a_users_server_relays_the_default_and_the_new_secret_comes_back_once(
    job_hub: JobHub,
) -> None:
    # Given pete's server, relaying to the job service with its own server token
    service = job_hub.service_url.removesuffix("api/")
    pete = ServiceRelay(service, job_hub.tokens["pete"])
    hook = {"webhook_url": "https://hooks.example.org/pete", "on": ["failed", "stopped"]}

    # When he saves a webhook default from his server, then asks for a new secret
    saved = await pete.put_notification_settings(json.dumps({"default": hook}).encode())
    rotated = await pete.put_notification_settings(
        json.dumps({"default": hook, "rotate_secret": True}).encode()
    )

    # Then each answer shows its secret once, the new one differs, and a read shows neither
    assert saved["webhook_secret"] and rotated["webhook_secret"]
    assert rotated["webhook_secret"] != saved["webhook_secret"]
    read_back = await pete.notification_settings()
    assert read_back["webhook_secret"] is None and read_back["webhook_secret_set"] is True
    assert read_back["default"]["on"] == ["failed", "stopped"]

    # and the service's 400 sentence reaches his server as it was
    with pytest.raises(ApiError) as refused:
        await pete.put_notification_settings(b'{"default": {"webhook_url": "http://x.org/"}}')
    assert refused.value.status == 400
    assert "must start with https://" in refused.value.message
