"""Students' Run as Job jobs, as the course page lists them: read from the hub's job service.

The course-sessions service reads them with its own token, which needs the job service's
read scope and access to it (``sessions_service_role(job_service="jupyter-to-job")``);
the course page has already decided that the viewer teaches the students asked about.
A job service that does not answer, or refuses, leaves the page without jobs and with a
sentence saying why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from urllib.parse import urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

log = logging.getLogger("gpuspawner.sessions.student_jobs")

RECENT = 100
"""How many of the latest jobs are read at once (the job service's page size limit)."""
REQUEST_TIMEOUT = 10.0


@dataclass(frozen=True)
class StudentJob:
    """One job as the course page shows it."""

    job_id: str
    owner: str
    name: str
    status: str
    flavor: str
    created: str
    """When it was created, ISO 8601 as the job service gives it (the page tells it in its
    reader's zone)."""


class JobsUnavailable(Exception):
    """The job service did not answer or refused: a sentence for the page."""


class StudentJobs:
    """The job service's ``api/jobs``, read with the sessions service's own token."""

    def __init__(self, service_url: str, token: str, http: AsyncHTTPClient | None = None):
        self.service_url = service_url.rstrip("/") + "/"
        self._token = token
        self._http = http or AsyncHTTPClient()

    async def recent(self, owners: set[str], limit: int = 20) -> list[StudentJob]:
        """The latest jobs of ``owners``, newest first, at most ``limit``."""
        if not owners:
            return []
        query = urlencode({"max_items": RECENT, "sort_by": "create_time", "sort_order": "desc"})
        request = HTTPRequest(
            f"{self.service_url}api/jobs?{query}",
            headers={"Authorization": f"token {self._token}", "Accept": "application/json"},
            request_timeout=REQUEST_TIMEOUT,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as error:
            raise JobsUnavailable(
                f"The job service did not answer ({error}); the jobs are not shown."
            ) from None
        if response.code != 200:
            log.warning("The job service answered %s: %s", response.code, response.body[:300])
            raise JobsUnavailable(
                f"The job service refused to list jobs ({response.code}); the hub admins can "
                "give the course-sessions service its read scope (sessions_service_role("
                'job_service="jupyter-to-job")).'
            )
        found = []
        for job in json.loads(response.body).get("jobs", []):
            if job.get("owner") not in owners:
                continue
            found.append(
                StudentJob(
                    job_id=str(job.get("job_id", "")),
                    owner=str(job.get("owner")),
                    name=str(job.get("name", "")),
                    status=str(job.get("status", "")),
                    flavor=str(job.get("flavor") or ""),
                    created=str(job.get("create_time", "")),
                )
            )
            if len(found) >= limit:
                break
        return found
