"""Scenarios: a job's owner is told when it ends, by mail (a real SMTP server) and by a
signed webhook (a real HTTP receiver), per job or by the owner's default, and a send that
fails never changes the job, only adds one line to its log."""

from __future__ import annotations

import json

from jupyter_to_job.extension.embedded import local_caller
from jupyter_to_job.jobs_api import JobsAPI, local_catalog
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobNotify, JobStatus
from jupyter_to_job.notifications import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature

from ..support import eventually
from ..support.hubprocess import free_loopback_ports
from ..support.job_managers import ManagerFactory, finished
from ..support.notebooks import notebook
from ..support.notification_receivers import (
    MailSink,
    WebhookReceiver,
    mail_sink_fixture,
    webhook_receiver_fixture,
)

HUB = "https://gpu-hub.campus.test"

mail_sink = mail_sink_fixture()
webhook_receiver = webhook_receiver_fixture()


def mailing(manager: JobManager, sink: MailSink) -> JobManager:
    """Have ``manager`` mail owners at ``<name>@campus.test`` through ``sink``."""
    notifier = manager.notifier
    notifier.smtp_host, notifier.smtp_port = sink.host, sink.port
    notifier.address_template = "{username}@campus.test"
    notifier.mail_from = "gpu-hub@campus.test"
    notifier.hub_url = HUB
    return manager


def hooking(manager: JobManager) -> JobManager:
    """Let ``manager``'s webhooks reach this machine, where the tests' receiver listens
    (webhooks are refused non-public addresses otherwise)."""
    manager.notifier.webhook_allowed_networks = ["127.0.0.0/8", "::1/128"]
    return manager


async def create_and_finish(
    manager: JobManager, owner: str, code: str, notify: JobNotify | None = None
) -> str:
    request = CreateJob(
        input_path="train.ipynb", name="train", output_formats=["ipynb"], notify=notify
    )
    created = await manager.create(owner, request, notebook=notebook(code))
    await finished(manager, created.job_id)
    await manager.notifier.drain()
    return created.job_id


def log_lines(manager: JobManager, job_id: str, start: str) -> list[str]:
    text = manager.read_log(job_id).data
    return [line for line in text.splitlines() if line.startswith(start)]


async def test_the_owner_gets_a_mail_saying_their_job_completed_with_its_links(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = mailing(await make_manager(), mail_sink)

    job_id = await create_and_finish(manager, "alice", "print('done')", JobNotify(email=True))

    (mail,) = await eventually(lambda: mail_sink.to("alice@campus.test"), what="alice's mail")
    text = mail.get_content()
    assert mail["Subject"] == "Job train completed"
    assert mail["From"] == "gpu-hub@campus.test"
    assert "Status:   COMPLETED" in text
    assert "Duration: " in text and "did not start" not in text
    assert f"{HUB}/user/alice/lab" in text
    assert f"{HUB}/services/jupyter-to-job/api/jobs/{job_id}/logs" in text
    assert f"{HUB}/services/jupyter-to-job/api/jobs/{job_id}/outputs/ipynb" in text
    assert manager.describe(job_id).status is JobStatus.COMPLETED


async def test_the_mail_of_a_failed_job_gives_the_reason(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = mailing(await make_manager(), mail_sink)

    job_id = await create_and_finish(
        manager, "alice", "raise ValueError('the learning rate is negative')", JobNotify(email=True)
    )

    described = manager.describe(job_id)
    assert described.status is JobStatus.FAILED and described.status_message
    (mail,) = await eventually(lambda: mail_sink.to("alice@campus.test"), what="alice's mail")
    text = mail.get_content()
    assert mail["Subject"] == "Job train failed"
    assert "Status:   FAILED" in text
    assert f"Reason:   {described.status_message}" in text
    assert "the learning rate is negative" in text


async def test_a_job_that_asks_only_for_failures_sends_nothing_when_it_completes(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = mailing(await make_manager(), mail_sink)

    await create_and_finish(manager, "alice", "1", JobNotify(email=True, on=["failed"]))

    assert mail_sink.messages == []


async def test_the_webhook_body_is_signed_with_the_owners_secret_only(
    make_manager: ManagerFactory, webhook_receiver: WebhookReceiver
) -> None:
    manager = hooking(await make_manager())
    manager.store.set_owner_notify("alice", {}, "alices-secret")

    job_id = await create_and_finish(
        manager, "alice", "print('ok')", JobNotify(webhook_url=webhook_receiver.url)
    )

    (hook,) = webhook_receiver.received
    body = json.loads(hook.body)
    assert (body["job_id"], body["owner"], body["name"]) == (job_id, "alice", "train")
    assert body["status"] == "COMPLETED" and body["end_time"].endswith("Z")
    assert body["duration_seconds"] >= 0
    timestamp, signature = hook.headers[TIMESTAMP_HEADER], hook.headers[SIGNATURE_HEADER]
    assert signature.startswith("sha256=")
    assert verify_signature("alices-secret", hook.body, timestamp, signature)
    assert not verify_signature("bobs-secret", hook.body, timestamp, signature)
    assert not verify_signature("alices-secret", hook.body + b" ", timestamp, signature)
    # A hook replayed an hour later is refused.
    assert not verify_signature(
        "alices-secret", hook.body, timestamp, signature, now=int(timestamp) + 3600
    )


async def test_the_owners_default_applies_to_a_job_without_settings(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = mailing(await make_manager(), mail_sink)
    manager.store.set_owner_notify("alice", JobNotify(email=True).model_dump(mode="json"), None)

    await create_and_finish(manager, "alice", "1")
    await create_and_finish(manager, "bob", "1")  # bob has no default: nothing is sent

    assert [mail["To"] for mail in mail_sink.messages] == ["alice@campus.test"]


async def test_a_job_whose_mail_cannot_be_sent_still_completes_with_one_log_line(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = mailing(await make_manager(), mail_sink)
    (manager.notifier.smtp_port,) = free_loopback_ports(1)  # nothing listens there

    job_id = await create_and_finish(manager, "alice", "print('ok')", JobNotify(email=True))

    assert manager.describe(job_id).status is JobStatus.COMPLETED
    (line,) = log_lines(manager, job_id, "[job] could not send")
    assert line.startswith("[job] could not send the finish mail: ")
    assert mail_sink.messages == []


async def test_a_webhook_that_keeps_failing_is_retried_then_logged_once(
    make_manager: ManagerFactory, webhook_receiver: WebhookReceiver
) -> None:
    manager = hooking(await make_manager())
    manager.notifier.webhook_attempts = 3
    manager.notifier.webhook_backoff = 0.01
    manager.store.set_owner_notify("alice", {}, "alices-secret")
    webhook_receiver.status = 503

    job_id = await create_and_finish(
        manager, "alice", "1", JobNotify(webhook_url=webhook_receiver.url)
    )

    assert len(webhook_receiver.received) == 3
    assert manager.describe(job_id).status is JobStatus.COMPLETED
    (line,) = log_lines(manager, job_id, "[job] could not send")
    assert line.startswith(f"[job] could not send the finish webhook to {webhook_receiver.url}")


async def test_a_webhook_to_this_machine_is_not_called_unless_the_admins_allow_it(
    make_manager: ManagerFactory, webhook_receiver: WebhookReceiver
) -> None:
    # Given alice's webhook on this machine (where the hub's own services listen too)
    manager = await make_manager()
    manager.store.set_owner_notify("alice", {}, "alices-secret")

    # When her job ends, the hook is not called, and her job's log says why
    job_id = await create_and_finish(
        manager, "alice", "1", JobNotify(webhook_url=webhook_receiver.url)
    )
    assert webhook_receiver.received == []
    assert manager.describe(job_id).status is JobStatus.COMPLETED
    (line,) = log_lines(manager, job_id, "[job] could not send")
    assert "which is not a public address" in line
    assert "c.JobNotifier.webhook_allowed_networks" in line

    # And once the admins allow this machine's network, it is called
    hooking(manager)
    await create_and_finish(manager, "alice", "1", JobNotify(webhook_url=webhook_receiver.url))
    assert len(webhook_receiver.received) == 1


async def test_a_job_stopped_before_it_started_tells_its_owner(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = mailing(await make_manager(max_running_jobs=1), mail_sink)
    blocker = await manager.create(
        "bob", CreateJob(input_path="b.ipynb"), notebook=notebook("import time; time.sleep(600)")
    )
    queued = await manager.create(
        "alice",
        CreateJob(input_path="q.ipynb", notify=JobNotify(email=True, on=["stopped"])),
        notebook=notebook("1"),
    )

    await manager.stop(queued.job_id)
    await manager.stop(blocker.job_id)
    await manager.notifier.drain()

    (mail,) = await eventually(lambda: mail_sink.to("alice@campus.test"), what="alice's mail")
    assert mail["Subject"] == "Job q stopped"
    assert "Reason:   Stopped before it started." in mail.get_content()


async def test_the_run_as_job_dialog_offers_the_mail_only_once_mail_can_be_sent(
    make_manager: ManagerFactory, mail_sink: MailSink
) -> None:
    manager = await make_manager()
    api = JobsAPI(manager, mode="standalone", catalog=local_catalog)
    alice = local_caller("alice")
    assert api.config(alice).features.notify_email is False

    mailing(manager, mail_sink)

    assert api.config(alice).features.notify_email is True
