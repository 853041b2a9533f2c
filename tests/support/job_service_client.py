"""A typed client of the job service's API, for scenarios that call it as a user's server
does: the server extension's own relay (its token, its errors), with one method a call.

The extension itself passes the lab's requests through whole (``ServiceRelay.pass_on``);
these methods only name the calls the scenarios make.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from jupyter_to_job.extension.relay import ServiceRelay, job_path
from jupyter_to_job.pipelines import CreatePipeline
from jupyter_to_job.schedules import CreateSchedule


def _schedule(schedule_id: str) -> str:
    return "schedules/" + quote(schedule_id, safe="")


def _pipeline(pipeline_id: str) -> str:
    return "pipelines/" + quote(pipeline_id, safe="")


class JobServiceClient(ServiceRelay):
    """The relay, with a method for each call of the job service's API."""

    async def list_jobs(self, params: dict[str, str]) -> dict[str, Any]:
        return await self.json("GET", "jobs", params=params)

    async def flavors(self) -> dict[str, Any]:
        return await self.json("GET", "flavors")

    async def delete(self, job_id: str) -> None:
        await self.fetch("DELETE", job_path(job_id))

    async def list_schedules(self) -> dict[str, Any]:
        return await self.json("GET", "schedules")

    async def create_schedule(
        self,
        request: CreateSchedule,
        notebook: dict[str, Any] | None,
        notebooks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        payload = request.model_dump(mode="json", exclude_none=True)
        if request.pipeline is not None:
            payload["notebooks"] = notebooks
        else:
            payload["notebook"] = notebook
        return await self.json("POST", "schedules", body=json.dumps(payload).encode())

    async def describe_schedule(self, schedule_id: str) -> dict[str, Any]:
        return await self.json("GET", _schedule(schedule_id))

    async def delete_schedule(self, schedule_id: str) -> None:
        await self.fetch("DELETE", _schedule(schedule_id))

    async def list_pipelines(self) -> dict[str, Any]:
        return await self.json("GET", "pipelines")

    async def create_pipeline(
        self, request: CreatePipeline, notebooks: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        payload = {**request.model_dump(mode="json", exclude_none=True), "notebooks": notebooks}
        return await self.json("POST", "pipelines", body=json.dumps(payload).encode())

    async def describe_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return await self.json("GET", _pipeline(pipeline_id))

    async def notification_settings(self) -> dict[str, Any]:
        return await self.json("GET", "notification-settings")

    async def put_notification_settings(self, body: bytes) -> dict[str, Any]:
        return await self.json("PUT", "notification-settings", body=body)
