"""The job service's own page on the hub: one's jobs, pipelines and schedules, with no
server running.

Design notes: docs/design/job-service.md, "jupyter_to_job.service.jobs_page".
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from ..access import Caller
from ..jobs_api import JobsAPI
from ..models import MAX_LIST_ITEMS, MAX_NAME_LENGTH, CreateJob, DescribeJob
from ..pipelines_api import PipelinesAPI
from ..rest import OUTPUT_CONTENT_TYPES, ApiError, as_api_error, content_disposition
from ..schedules_api import SchedulesAPI
from .handlers import HubScopedMixin

JOB_ID = r"(?P<job_id>[^/]+)"

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
)


def rerun_base(name: str) -> str:
    """``name`` without a rerun's number: "run1 (2)" -> "run1"."""
    return re.sub(r" \(\d+\)$", "", name) or name


def rerun_name(name: str, taken: set[str]) -> str:
    """The next free name for a rerun of ``name``: "run1 (2)", "run1 (3)"... (the Jobs
    panel's rule: a rerun of "run1 (2)" is "run1 (3)")."""
    base = rerun_base(name)
    number = 2
    while True:
        suffix = f" ({number})"
        candidate = base[: MAX_NAME_LENGTH - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1


def tensorboard_link(hub_prefix: str, job: DescribeJob) -> str:
    """Where a job's owner opens TensorBoard over the job's folder (its notebook's, where it
    ran), in their own server (jupyter_to_job/extension/tensorboard.py). The link goes
    through the hub's ``user/<name>/`` route: to the server when it runs, else to the hub's
    page that says it is not running and offers to start it. The service never runs
    TensorBoard itself."""
    folder = PurePosixPath(job.input_path).parent.as_posix()
    query = urlencode({"folder": folder})
    return f"{hub_prefix}user/{quote(job.owner)}/jupyter-to-job/tensorboard/open?{query}"


class JobsPageBase(HubScopedMixin, HubOAuthenticated, web.RequestHandler):
    """Signed in through the hub; ``self.caller`` is who the hub says is looking."""

    def initialize(
        self,
        api: JobsAPI,
        page_auth: Any,
        access_scopes: set[str],
        schedules: SchedulesAPI | None = None,
        pipelines: PipelinesAPI | None = None,
        base: str = "",
    ) -> None:
        super().initialize(api, page_auth, access_scopes)
        self.schedules = schedules
        self.pipelines = pipelines
        self.base = base

    @property
    def caller(self) -> Caller:
        return Caller.from_hub_model(self.current_user)

    def render(self, template: str, **values: Any) -> None:  # type: ignore[override]
        self.set_header("Cache-Control", "no-store")
        self.finish(
            _templates.get_template(template).render(
                hub_prefix=self.hub_auth.hub_prefix,
                base=self.base,
                viewer=self.current_user["name"] if self.current_user else "",
                **values,
            )
        )

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, web.HTTPError) and not isinstance(error, ApiError):
            message = error.log_message or (
                "The form came from an old page or another site (its XSRF token did not "
                "match). Reload the jobs page and try again."
                if status_code == 403
                else "The jobs page failed; the hub admins see why in the job service's log."
            )
            status = status_code
        else:
            refusal = as_api_error(error, status_code)
            message, status = refusal.message, refusal.status
        self.set_status(status)
        self.render("jobs_page.html", error=message, status=status)


class JobsListPage(JobsPageBase):
    @web.authenticated
    async def get(self) -> None:
        caller = self.caller
        listing = await self.api.list_jobs(caller, {"max_items": "100"})
        schedules: list[Any] = []
        pipelines: list[Any] = []
        # One's own schedules and pipelines; a token that may only read others' jobs
        # (an instructor's without write on their own) has none to show.
        try:
            if self.schedules is not None:
                schedules = self.schedules.list_schedules(caller).schedules
            if self.pipelines is not None:
                pipelines = self.pipelines.list_pipelines(caller).pipelines
        except ApiError:
            pass
        self.render(
            "jobs_page.html",
            jobs=listing.jobs,
            total=listing.total_count,
            schedules=schedules,
            pipelines=pipelines,
            anyone_elses=any(not job.own for job in listing.jobs),
        )


class JobPage(JobsPageBase):
    @web.authenticated
    async def get(self, job_id: str) -> None:
        caller = self.caller
        job = await self.api.describe(caller, job_id)
        log = await self.api.read_log(caller, job_id, {"offset": "0"})
        own = await self.api.list_jobs(caller, {"owner": job.owner, "max_items": "100"})
        reruns = [other for other in own.jobs if other.rerun_of == job.job_id]
        original = next((other for other in own.jobs if other.job_id == job.rerun_of), None)
        message = self.get_argument("done", "")
        self.render(
            "jobs_page.html",
            job=job,
            log=log,
            reruns=sorted(reruns, key=lambda other: other.create_time),
            original=original,
            final=job.status.is_final,
            message=message,
            tensorboard=tensorboard_link(self.hub_auth.hub_prefix, job) if job.own else None,
            xsrf=self.xsrf_token.decode(),
        )


class JobLogPiece(JobsPageBase):
    async def get(self, job_id: str) -> None:
        """What the page's script follows: ``offset`` on, and the job's status now.

        The script fetches it with the page's XSRF token, without which the hub's sign-in
        ignores the cookie of any request that is not a page view. Not signed in, it
        answers 403 with what to do, where a page would send the browser to the login.
        """
        if self.current_user is None:
            self.set_status(403)
            self.set_header("Content-Type", "application/json; charset=utf-8")
            self.finish(
                {
                    "message": "The log is no longer followed: the sign-in to the jobs page "
                    "expired, or the request lacked the page's XSRF token. Reload the page "
                    "to read on.",
                    "reason": "forbidden",
                }
            )
            return
        caller = self.caller
        chunk = await self.api.read_log(
            caller, job_id, {"offset": self.get_argument("offset", "0")}
        )
        job = await self.api.describe(caller, job_id)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(
            {
                **chunk.model_dump(mode="json"),
                "status": job.status.value,
                "cells_completed": job.cells_completed,
                "cells_total": job.cells_total,
            }
        )


class JobOutputPage(JobsPageBase):
    @web.authenticated
    async def get(self, job_id: str, fmt: str) -> None:
        download = await self.api.output(self.caller, job_id, fmt)
        self.set_header("Content-Type", OUTPUT_CONTENT_TYPES[fmt])
        # The HTML opens in the browser; the notebook is saved, to open in JupyterLab.
        disposition = content_disposition(download.filename)
        if fmt == "html":
            disposition = disposition.replace("attachment", "inline", 1)
        self.set_header("Content-Disposition", disposition)
        self.set_header("X-Content-Type-Options", "nosniff")
        # Notebook HTML is the user's content: never let it script the service's origin.
        self.set_header("Content-Security-Policy", "sandbox")
        self.set_header("Cache-Control", "no-store")
        with download.open() as stream:
            self.finish(stream.read())


class JobStopForm(JobsPageBase):
    @web.authenticated
    async def post(self, job_id: str) -> None:
        await self.api.update(self.caller, job_id, b'{"status": "STOPPED"}')
        self.redirect(f"{self.base}/jobs/{job_id}?done=stop", status=303)


class JobRerunForm(JobsPageBase):
    @web.authenticated
    async def post(self, job_id: str) -> None:
        """Run the job's notebook snapshot again as it ran, under the next free name (the
        Jobs panel in JupyterLab lets people change its parameters first)."""
        caller = self.caller
        job = await self.api.describe(caller, job_id)
        # The names the rerun's could clash with: the caller's jobs named like it (not
        # only the newest hundred of all their jobs).
        mine = await self.api.list_jobs(
            caller,
            {
                "owner": caller.name,
                "name": rerun_base(job.name)[:MAX_NAME_LENGTH],
                "max_items": str(MAX_LIST_ITEMS),
            },
        )
        request = rerun_request(job, {other.name for other in mine.jobs})
        created = await self.api.create(caller, request, None)
        self.redirect(f"{self.base}/jobs/{created.job_id}?done=rerun", status=303)


def rerun_request(job: DescribeJob, taken: set[str]) -> CreateJob:
    """``job`` again: its snapshot, flavor, parameters and limits, under a free name."""
    return CreateJob(
        input_path=job.input_path,
        name=rerun_name(job.name, taken | {job.name}),
        flavor=job.flavor,
        parameters=dict(job.parameters),
        deadline_seconds=job.deadline_seconds,
        cell_timeout_seconds=job.cell_timeout_seconds,
        output_formats=list(job.output_formats),
        kernel_name=job.kernel_name,
        rerun_of=job.job_id,
    )


class OAuthCallback(HubOAuthCallbackHandler):
    """The hub's OAuth callback, with the page's HubOAuth (not the process's singleton)."""

    def initialize(self, page_auth: Any) -> None:
        self.hub_auth = page_auth


def jobs_page_handlers(prefix: str, **kwargs: Any) -> list[tuple[str, type, dict[str, Any]]]:
    """The page's routes under ``prefix`` (``/services/jupyter-to-job/``), each given
    ``kwargs`` (``api``, ``page_auth``: a HubOAuth, ``access_scopes``, ``schedules``,
    ``pipelines``)."""
    base = prefix.rstrip("/")
    kwargs = {**kwargs, "base": base}
    return [
        (f"{base}/?", JobsListPage, kwargs),
        (f"{base}/jobs/{JOB_ID}", JobPage, kwargs),
        (f"{base}/jobs/{JOB_ID}/log", JobLogPiece, kwargs),
        (f"{base}/jobs/{JOB_ID}/output/(?P<fmt>ipynb|html)", JobOutputPage, kwargs),
        (f"{base}/jobs/{JOB_ID}/stop", JobStopForm, kwargs),
        (f"{base}/jobs/{JOB_ID}/rerun", JobRerunForm, kwargs),
        (f"{base}/oauth_callback", OAuthCallback, {"page_auth": kwargs["page_auth"]}),
    ]
