"""The schedule API behind the REST handlers (``api/schedules``): each person's own schedules.

Design notes: docs/design/jobs.md, "jupyter_to_job.schedules_api".
"""

from __future__ import annotations

from typing import Any

from .access import Access, Caller
from .jobs_api import JobsAPI
from .pipelines.engine import home_of
from .pipelines.models import CreatePipeline
from .pipelines_api import pipeline_notebooks
from .rest import ApiError, check_notebook, check_notebooks_size, json_object, own_name, parse_model
from .schedules.engine import Scheduler
from .schedules.models import CreateSchedule, ListSchedulesResponse, Schedule, UpdateSchedule


def parse_schedule(data: dict[str, Any]) -> CreateSchedule:
    """A CreateSchedule from a request's JSON, or a 400 naming every wrong field."""
    return parse_model(CreateSchedule, data, "schedule")


class SchedulesAPI:
    """Schedule operations for identified callers; raises :class:`ApiError` and job errors."""

    def __init__(self, jobs: JobsAPI, scheduler: Scheduler):
        self.jobs = jobs
        self.scheduler = scheduler

    def _owner(self, caller: Caller, level: Access) -> str:
        """The caller's name, when they may read (or change) their own schedules."""
        return own_name(caller, level, "Schedules")

    async def create_schedule(self, caller: Caller, body: bytes) -> Schedule:
        """``POST api/schedules``: CreateSchedule fields plus ``notebook`` (its JSON content),
        or, for a pipeline, ``notebooks`` (each by its ``input_path``)."""
        limit = self.jobs.max_notebook_bytes
        data = json_object(body)
        notebook = data.pop("notebook", None)
        notebooks = data.pop("notebooks", None)
        check_notebooks_size(body, data, limit, "The notebook")
        request = parse_schedule(data)
        if request.pipeline is not None:
            checked = pipeline_notebooks(request.pipeline, notebooks, name_stage=False)
            return await self.create(caller, request, notebooks=checked)
        assert request.job is not None
        if notebook is None:
            raise ApiError(
                400, "The request carries no notebook: send its content as 'notebook'.", "invalid"
            )
        return await self.create(caller, request, check_notebook(notebook, request.job.input_path))

    async def create(
        self,
        caller: Caller,
        request: CreateSchedule,
        notebook: dict[str, Any] | None = None,
        *,
        notebooks: dict[str, dict[str, Any]] | None = None,
    ) -> Schedule:
        """Check the job (or each job of the pipeline) as a job create is checked, then save
        the schedule for ``caller``."""
        if request.pipeline is not None:
            pipeline, home = self._admitted_pipeline(caller, request.pipeline)
            return self.scheduler.create(
                caller.name,
                request.model_copy(update={"pipeline": pipeline}),
                notebooks=notebooks,
                working_dir=home,
            )
        assert request.job is not None
        job, working_dir = self.jobs.admitted_request(caller, request.job)
        return self._titled(
            self.scheduler.create(
                caller.name,
                request.model_copy(update={"job": job}),
                notebook=notebook,
                working_dir=working_dir,
            )
        )

    def _admitted_pipeline(
        self, caller: Caller, pipeline: CreatePipeline
    ) -> tuple[CreatePipeline, str | None]:
        """The pipeline with each job's flavor and deadline as admitted now, and the owner's
        root folder its jobs run under."""
        data = pipeline.model_dump(mode="json")
        home: str | None = None
        for stage_index, stage in enumerate(data["stages"]):
            for job_index, job in enumerate(stage["jobs"]):
                admitted, working_dir = self.jobs.admitted_request(
                    caller, pipeline.job_request(stage_index, job_index)
                )
                job["flavor"] = admitted.flavor
                job["deadline_seconds"] = admitted.deadline_seconds
                if working_dir is not None and home is None:
                    home = home_of(working_dir, admitted.input_path)
        return CreatePipeline.model_validate(data), home

    def _titled(self, schedule: Schedule) -> Schedule:
        """``schedule`` with its job's flavor title, for people to read."""
        if schedule.job is None or not schedule.job.flavor:
            return schedule
        title = self.jobs.flavor_titles().get(schedule.job.flavor)
        return schedule.model_copy(update={"flavor_title": title})

    def list_schedules(self, caller: Caller) -> ListSchedulesResponse:
        """``GET api/schedules``: the caller's schedules, newest first."""
        owner = self._owner(caller, Access.READ)
        return ListSchedulesResponse(
            schedules=[self._titled(s) for s in self.scheduler.list_schedules(owner)]
        )

    def describe(self, caller: Caller, schedule_id: str) -> Schedule:
        return self._titled(
            self.scheduler.describe(schedule_id, owner=self._owner(caller, Access.READ))
        )

    def update(self, caller: Caller, schedule_id: str, body: bytes) -> Schedule:
        """``PATCH api/schedules/<id>``: ``{"status": "PAUSED"}`` or ``{"status": "ACTIVE"}``."""
        owner = self._owner(caller, Access.WRITE)
        self.scheduler.describe(schedule_id, owner=owner)  # another's: 404 before the body
        wanted = parse_model(UpdateSchedule, json_object(body), "schedule change")
        return self._titled(self.scheduler.set_status(schedule_id, wanted.status, owner=owner))

    def delete(self, caller: Caller, schedule_id: str) -> None:
        """``DELETE api/schedules/<id>``: the schedule goes; the jobs it started stay."""
        self.scheduler.delete(schedule_id, owner=self._owner(caller, Access.WRITE))
