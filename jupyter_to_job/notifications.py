"""Tell a job's owner, or a pipeline's, that it ended: a mail over SMTP and a signed webhook.

What is sent, when, how webhooks are signed and which addresses they may reach:
docs/jobs-notifications.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import smtplib
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from prometheus_client import Counter
from tornado.httpclient import HTTPRequest
from tornado.simple_httpclient import SimpleAsyncHTTPClient
from traitlets import Bool, Float, Integer, List, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from .logs import LogStore
from .models import JobNotify, JobStatus
from .store import JobRow, JobStore

SIGNATURE_HEADER = "X-Jupyter-To-Job-Signature"
TIMESTAMP_HEADER = "X-Jupyter-To-Job-Timestamp"
DEFAULT_TOLERANCE_SECONDS = 300

NOTIFICATIONS_FAILED = Counter(
    "jupyter_to_job_notifications_failed",
    "Finish notifications of jobs that could not be sent, by channel (mail, webhook).",
    ["channel"],
)


def new_webhook_secret() -> str:
    return secrets.token_urlsafe(32)


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    message = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify_signature(
    secret: str,
    body: bytes,
    timestamp: str,
    signature: str,
    *,
    now: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """True when ``signature`` is the owner's over ``body`` and ``timestamp`` is recent."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, body, sent), signature)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 3)


def _duration_words(seconds: float | None) -> str:
    if seconds is None:
        return "it did not start"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


class PipelineEnd(Protocol):
    """What the owner of a pipeline that ended is told of it (its row, once it ended)."""

    pipeline_id: str
    name: str
    owner: str
    status: str
    """COMPLETED, FAILED or STOPPED."""
    status_message: str | None
    create_time: datetime
    end_time: datetime | None


def _ended_payload(
    key: str,
    ended: JobRow | PipelineEnd,
    start: datetime | None,
    links: dict[str, str],
    **more: Any,
) -> dict[str, Any]:
    """The webhook's body about a job or pipeline that ended (``key``: its id's field);
    ``more`` goes after the reason."""
    return {
        key: getattr(ended, key),
        "name": ended.name,
        "owner": ended.owner,
        "status": ended.status,
        "reason": ended.status_message,
        **more,
        "start_time": _iso(start),
        "end_time": _iso(ended.end_time),
        "duration_seconds": _seconds_between(start, ended.end_time),
        "links": links,
    }


class JobNotifier(LoggingConfigurable):
    """Sends the finish mail and webhook of jobs (docs/jobs-notifications.md)."""

    smtp_host = Unicode(
        "",
        help="""The SMTP server for finish mails; empty: no mail is sent.

        Example: ``c.JobNotifier.smtp_host = "smtp.campus.edu"``.""",
    ).tag(config=True)

    smtp_port = Integer(25, help="The SMTP server's port: ``c.JobNotifier.smtp_port = 587``.").tag(
        config=True
    )

    smtp_starttls = Bool(
        False,
        help="Upgrade the SMTP connection with STARTTLS: ``c.JobNotifier.smtp_starttls = True``.",
    ).tag(config=True)

    smtp_username = Unicode(
        "", help="Log in to the SMTP server as: ``c.JobNotifier.smtp_username = 'jobs'``."
    ).tag(config=True)

    smtp_password_file = Unicode(
        "",
        help="""A file holding the SMTP password (read at each send, so it can be rotated):
        ``c.JobNotifier.smtp_password_file = "/run/secrets/smtp-password"``.""",
    ).tag(config=True)

    mail_from = Unicode(
        "jupyter-to-job@localhost",
        help="The sender of finish mails: ``c.JobNotifier.mail_from = 'gpu-hub@campus.edu'``.",
    ).tag(config=True)

    address_template = Unicode(
        "",
        help="""The owner's mail address, from their hub user name; empty: no mail is sent.

        Example: ``c.JobNotifier.address_template = "{username}@campus.edu"``.""",
    ).tag(config=True)

    smtp_timeout = Float(
        10.0, help="Seconds an SMTP exchange may take: ``c.JobNotifier.smtp_timeout = 20``."
    ).tag(config=True)

    hub_url = Unicode(
        "",
        help="""The hub's public address, for the links in finish mails and webhooks.

        Example: ``c.JobNotifier.hub_url = "https://gpu-hub.campus.edu"``.""",
    ).tag(config=True)

    service_prefix = Unicode(
        help="""The job service's path on the hub, for log and output links:
        ``c.JobNotifier.service_prefix = "/services/jupyter-to-job/"``.""",
    ).tag(config=True)

    @default("service_prefix")
    def _default_prefix(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or "/services/jupyter-to-job/"

    webhook_timeout = Float(
        5.0, help="Seconds one webhook POST may take: ``c.JobNotifier.webhook_timeout = 10``."
    ).tag(config=True)

    webhook_attempts = Integer(
        3, help="Tries per webhook before giving up: ``c.JobNotifier.webhook_attempts = 5``."
    ).tag(config=True)

    webhook_backoff = Float(
        1.0,
        help="""Seconds before the second try of a webhook, doubled for each later one:
        ``c.JobNotifier.webhook_backoff = 2``.""",
    ).tag(config=True)

    webhook_allowed_networks = List(
        Unicode(),
        help="""Non-public networks webhooks may reach. Webhooks to this machine or to
        private, link-local or reserved addresses are refused otherwise, so that a user's
        webhook cannot post to internal services.

        Example: ``c.JobNotifier.webhook_allowed_networks = ["10.20.0.0/16"]``.""",
    ).tag(config=True)

    @validate("webhook_allowed_networks")
    def _valid_networks(self, proposal: dict[str, Any]) -> list[str]:
        for network in proposal["value"]:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ValueError(
                    f"c.JobNotifier.webhook_allowed_networks: {network!r} is not a network; "
                    "write it as an address with its prefix length, such as '10.20.0.0/16'"
                ) from None
        return list(proposal["value"])

    def __init__(self, *, store: JobStore, log_store: LogStore, **kwargs: Any):
        super().__init__(**kwargs)
        self.store = store
        self.log_store = log_store
        self._tasks: set[asyncio.Future[None]] = set()

    @property
    def mail_ready(self) -> bool:
        """True when finish mails can be sent (a mail server and an address template)."""
        return bool(self.smtp_host and self.address_template)

    # -- what to send -------------------------------------------------------------------

    def settings_for(self, row: JobRow) -> JobNotify | None:
        """The job's own settings, or else its owner's default (None: nothing)."""
        own = self.store.job_notify(row.job_id)
        if own is not None:
            return JobNotify.model_validate(own)
        return self.owner_default(row.owner)

    def links(self, row: JobRow) -> dict[str, str]:
        hub = self.hub_url.rstrip("/")
        api = f"{hub}/{self.service_prefix.strip('/')}/api/jobs/{row.job_id}"
        links = {"lab": f"{hub}/user/{row.owner}/lab", "log": f"{api}/logs"}
        for fmt in row.output_formats or ["ipynb"]:
            links[fmt] = f"{api}/outputs/{fmt}"
        return links

    def payload(self, row: JobRow) -> dict[str, Any]:
        return _ended_payload("job_id", row, row.start_time, self.links(row), flavor=row.flavor)

    # -- when a job ends ----------------------------------------------------------------

    def job_ended(self, job_id: str) -> None:
        """Start sending what the job's settings ask for; returns at once, never raises."""
        try:
            row = self.store.get(job_id)
            if row is None or not row.job_status.is_final:
                return
            settings = self.settings_for(row)
        except Exception:
            self.log.exception("Could not read the notification settings of job %s", job_id)
            return
        self._send(
            settings, row.job_status, lambda: self._mail(row), lambda url: self._webhook(row, url)
        )

    def owner_default(self, owner: str) -> JobNotify | None:
        """The owner's default settings (None: nothing)."""
        settings = self.store.owner_notify(owner)
        if settings is not None and settings.settings:
            return JobNotify.model_validate(settings.settings)
        return None

    def pipeline_ended(self, end: PipelineEnd, own: JobNotify | None) -> None:
        """Tell the owner that a pipeline ended, as ``own`` (its ``notify``) or else their
        default says; returns at once, never raises."""
        try:
            settings = own or self.owner_default(end.owner)
        except Exception:
            self.log.exception("Could not read the notification settings of %s", end.owner)
            return
        self._send(
            settings,
            JobStatus(end.status),
            lambda: self._pipeline_mail(end),
            lambda url: self._pipeline_webhook(end, url),
        )

    def pipeline_links(self, end: PipelineEnd) -> dict[str, str]:
        hub = self.hub_url.rstrip("/")
        api = f"{hub}/{self.service_prefix.strip('/')}/api/pipelines/{end.pipeline_id}"
        return {"lab": f"{hub}/user/{end.owner}/lab", "pipeline": api}

    def pipeline_payload(self, end: PipelineEnd) -> dict[str, Any]:
        return _ended_payload("pipeline_id", end, end.create_time, self.pipeline_links(end))

    def pipeline_message(self, end: PipelineEnd, address: str) -> EmailMessage:
        status = end.status.lower()
        links = self.pipeline_links(end)
        assert end.end_time is not None
        seconds = (end.end_time - end.create_time).total_seconds()
        lines = [
            f"Your pipeline {end.name!r} {status}.",
            "",
            f"Status:   {end.status}",
            f"Reason:   {end.status_message or '-'}",
            f"Duration: {_duration_words(seconds)}",
            "",
            f"Open JupyterLab (Jobs panel): {links['lab']}",
            f"Pipeline: {links['pipeline']}",
            "",
            f"Pipeline id: {end.pipeline_id}",
        ]
        return self._mail_to(address, f"Pipeline {end.name} {status}", lines)

    def _pipeline_failed(self, end: PipelineEnd, channel: str, error: BaseException) -> None:
        NOTIFICATIONS_FAILED.labels(channel=channel).inc()
        self.log.warning(
            "Could not send the %s of pipeline %s: %s",
            channel,
            end.pipeline_id,
            str(error) or type(error).__name__,
        )

    async def _pipeline_mail(self, end: PipelineEnd) -> None:
        try:
            await self._mail_owner(end.owner, lambda address: self.pipeline_message(end, address))
        except Exception as error:
            self._pipeline_failed(end, "mail", error)

    async def _pipeline_webhook(self, end: PipelineEnd, url: str) -> None:
        try:
            await self._post_for_owner(end.owner, url, self.pipeline_payload(end))
        except Exception as error:
            self._pipeline_failed(end, "webhook", error)

    def _send(
        self,
        settings: JobNotify | None,
        status: JobStatus,
        mail: Callable[[], Awaitable[None]],
        webhook: Callable[[str], Awaitable[None]],
    ) -> None:
        """Start the mail and the webhook that ``settings`` ask for on an ending in
        ``status``; nothing when they ask for none."""
        if settings is None or not settings.wants(status):
            return
        if settings.email:
            self._spawn(mail())
        if settings.webhook_url is not None:
            self._spawn(webhook(settings.webhook_url))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)  # the event loop holds tasks only weakly
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the sends under way (at shutdown, and in tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _failed(self, row: JobRow, channel: str, what: str, error: BaseException) -> None:
        NOTIFICATIONS_FAILED.labels(channel=channel).inc()
        reason = str(error) or type(error).__name__
        try:
            self.log_store.append_line(row.job_id, f"[job] could not send the {what}: {reason}")
        except OSError:
            self.log.warning("Could not send the %s of job %s: %s", what, row.job_id, reason)

    # -- mail ---------------------------------------------------------------------------

    def message(self, row: JobRow, address: str) -> EmailMessage:
        status = row.job_status.value.lower()
        links = self.links(row)
        lines = [
            f"Your job {row.name!r} {status}.",
            "",
            f"Status:   {row.job_status.value}",
            f"Reason:   {row.status_message or '-'}",
            f"Duration: {_duration_words(_seconds_between(row.start_time, row.end_time))}",
            f"Flavor:   {row.flavor or '-'}",
            f"Notebook: {row.input_path}",
            "",
            f"Open JupyterLab (Jobs panel): {links['lab']}",
            f"Log: {links['log']}",
        ]
        for fmt in ("ipynb", "html"):
            if fmt in links:
                lines.append(f"Output ({fmt}): {links[fmt]}")
        lines += ["", f"Job id: {row.job_id}"]
        return self._mail_to(address, f"Job {row.name} {status}", lines)

    def _mail_to(self, address: str, subject: str, lines: list[str]) -> EmailMessage:
        mail = EmailMessage()
        mail["Subject"] = subject
        mail["From"] = self.mail_from
        mail["To"] = address
        mail.set_content("\n".join(lines) + "\n")
        return mail

    def _send_mail(self, mail: EmailMessage) -> None:
        with smtplib.SMTP(self.smtp_host, self.smtp_port, timeout=self.smtp_timeout) as smtp:
            if self.smtp_starttls:
                smtp.starttls()
            if self.smtp_username:
                password = Path(self.smtp_password_file).read_text().strip()
                smtp.login(self.smtp_username, password)
            smtp.send_message(mail)

    async def _mail_owner(self, owner: str, message: Callable[[str], EmailMessage]) -> None:
        """Mail ``message(address)`` to ``owner``'s address; raises what stops it."""
        if not self.smtp_host or not self.address_template:
            raise RuntimeError(
                "the job service has no mail server or address set up "
                "(c.JobNotifier.smtp_host, c.JobNotifier.address_template)"
            )
        address = self.address_template.format(username=owner)
        await asyncio.to_thread(self._send_mail, message(address))

    async def _mail(self, row: JobRow) -> None:
        try:
            await self._mail_owner(row.owner, lambda address: self.message(row, address))
        except Exception as error:
            self._failed(row, "mail", "finish mail", error)

    # -- webhook ------------------------------------------------------------------------

    async def _post_for_owner(self, owner_name: str, url: str, payload: dict[str, Any]) -> None:
        """POST ``payload`` to ``url`` signed with ``owner_name``'s webhook secret; raises
        what stops it."""
        owner = self.store.owner_notify(owner_name)
        if owner is None or not owner.webhook_secret:
            raise RuntimeError(
                "its owner has no webhook secret yet; PUT api/notification-settings first"
            )
        body = json.dumps(payload, separators=(",", ":")).encode()
        host, address = await self._webhook_address(url)
        # Connect to the address just checked, not to what a second lookup might give.
        client = SimpleAsyncHTTPClient(force_instance=True, hostname_mapping={host: address})
        try:
            await self._post(client, url, body, owner.webhook_secret)
        finally:
            client.close()

    async def _webhook(self, row: JobRow, url: str) -> None:
        try:
            await self._post_for_owner(row.owner, url, self.payload(row))
        except Exception as error:
            self._failed(row, "webhook", f"finish webhook to {url}", error)

    async def _post(
        self, client: SimpleAsyncHTTPClient, url: str, body: bytes, secret: str
    ) -> None:
        """POST ``body`` signed with ``secret``, tried ``webhook_attempts`` times."""
        delay = self.webhook_backoff
        for attempt in range(1, max(1, self.webhook_attempts) + 1):
            timestamp = int(time.time())
            request = HTTPRequest(
                url,
                method="POST",
                body=body,
                headers={
                    "Content-Type": "application/json",
                    TIMESTAMP_HEADER: str(timestamp),
                    SIGNATURE_HEADER: sign(secret, body, timestamp),
                },
                request_timeout=self.webhook_timeout,
                connect_timeout=self.webhook_timeout,
                follow_redirects=False,
            )
            try:
                await client.fetch(request)
                return
            except Exception:
                if attempt >= self.webhook_attempts:
                    raise
            await asyncio.sleep(delay)
            delay *= 2

    async def _webhook_address(self, url: str) -> tuple[str, str]:
        """The webhook's host and the address to connect to; raises when that address is
        not public and not in ``webhook_allowed_networks``."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        allowed = [ipaddress.ip_network(n, strict=False) for n in self.webhook_allowed_networks]
        addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in found]
        for address in addresses:
            if not address.is_global and not any(address in n for n in allowed):
                raise RuntimeError(
                    f"{host} is at {address}, which is not a public address; the job service "
                    "calls webhooks on public addresses only (the hub admins can allow a "
                    "network with c.JobNotifier.webhook_allowed_networks)"
                )
        return host, str(addresses[0])
