"""The pipeline API behind the REST handlers (``api/pipelines``): each person's own pipelines.

Design notes: docs/design/jobs.md, "jupyter_to_job.pipelines_api".
"""

from __future__ import annotations

from typing import Any

from .access import Access, Caller
from .jobs_api import JobsAPI
from .models import CreateJob, FieldProblem
from .pipelines.engine import Pipelines
from .pipelines.models import (
    CreatePipeline,
    DescribePipeline,
    ListPipelinesResponse,
    UpdatePipeline,
)
from .rest import (
    ApiError,
    check_notebook,
    check_notebooks_size,
    json_object,
    own_name,
    parse_model,
)

_REFUSED_FIELD = {"deadline-too-long": "deadline_seconds", "webhook-secret-missing": "notify"}
"""The job field a refusal of JobsAPI.admitted_request is about (else its flavor)."""


def parse_pipeline(data: dict[str, Any]) -> CreatePipeline:
    """A CreatePipeline from a request's JSON, or a 400 naming every wrong field."""
    return parse_model(CreatePipeline, data, "pipeline")


def pipeline_notebooks(
    pipeline: CreatePipeline, notebooks: Any, *, name_stage: bool = True
) -> dict[str, dict[str, Any]]:
    """Each job's notebook, checked, from a request's ``notebooks`` (by ``input_path``); a 400
    that names the missing one (and, with ``name_stage``, its stage)."""
    if not isinstance(notebooks, dict):
        raise ApiError(
            400,
            "The request carries no notebooks: send each job's notebook as "
            "'notebooks': {\"<input_path>\": <notebook JSON>}.",
            "invalid",
        )
    checked: dict[str, dict[str, Any]] = {}
    for stage in pipeline.stages:
        for job in stage.jobs:
            if job.input_path not in notebooks:
                where = f" (stage {stage.name!r})" if name_stage else ""
                raise ApiError(
                    400,
                    f"The request carries no notebook for {job.input_path!r}{where}; send it "
                    "in 'notebooks'.",
                    "invalid",
                )
            checked[job.input_path] = check_notebook(notebooks[job.input_path], job.input_path)
    return checked


class PipelinesAPI:
    """Pipeline operations for identified callers; raises :class:`ApiError` and job errors."""

    def __init__(self, jobs: JobsAPI, pipelines: Pipelines):
        self.jobs = jobs
        self.pipelines = pipelines

    def _owner(self, caller: Caller, level: Access) -> str:
        """The caller's name, when they may read (or change) their own pipelines."""
        return own_name(caller, level, "Pipelines")

    async def create_pipeline(self, caller: Caller, body: bytes) -> DescribePipeline:
        """``POST api/pipelines``: CreatePipeline fields plus ``notebooks`` (each job's
        notebook JSON by its ``input_path``)."""
        self._owner(caller, Access.WRITE)
        data = json_object(body)
        notebooks = data.pop("notebooks", None)
        check_notebooks_size(body, data, self.jobs.max_notebook_bytes, "The notebooks")
        request = parse_pipeline(data)
        return await self.create(caller, request, pipeline_notebooks(request, notebooks))

    async def create(
        self, caller: Caller, request: CreatePipeline, notebooks: dict[str, dict[str, Any]]
    ) -> DescribePipeline:
        """Check every job as a job create is checked, then save and start the pipeline."""
        self._owner(caller, Access.WRITE)

        def admit(job: CreateJob, stage_index: int, job_index: int) -> tuple[CreateJob, str | None]:
            field = f"stages.{stage_index}.jobs.{job_index}"
            stage = request.stages[stage_index]
            label = stage.jobs[job_index].label
            try:
                return self.jobs.admitted_request(caller, job)
            except ApiError as refusal:
                where = f"{field}.{_REFUSED_FIELD.get(refusal.reason, 'flavor')}"
                raise ApiError(
                    refusal.status,
                    f"Stage {stage.name!r}, job {label!r}: {refusal.message}",
                    refusal.reason,
                    errors=[FieldProblem(field=where, message=refusal.message)],
                ) from None

        return self._titled(
            await self.pipelines.create(caller.name, request, notebooks=notebooks, admit=admit)
        )

    def _titled(self, pipeline: DescribePipeline) -> DescribePipeline:
        """``pipeline`` with each job's flavor title, for people to read."""
        titles = self.jobs.flavor_titles()
        stages = [
            stage.model_copy(
                update={
                    "jobs": [
                        job.model_copy(update={"flavor_title": titles.get(job.flavor or "")})
                        for job in stage.jobs
                    ]
                }
            )
            for stage in pipeline.stages
        ]
        return pipeline.model_copy(update={"stages": stages})

    def list_pipelines(self, caller: Caller) -> ListPipelinesResponse:
        """``GET api/pipelines``: the caller's pipelines, newest first."""
        owner = self._owner(caller, Access.READ)
        return ListPipelinesResponse(
            pipelines=[self._titled(p) for p in self.pipelines.list_pipelines(owner)]
        )

    def describe(self, caller: Caller, pipeline_id: str) -> DescribePipeline:
        return self._titled(
            self.pipelines.describe(pipeline_id, owner=self._owner(caller, Access.READ))
        )

    async def update(self, caller: Caller, pipeline_id: str, body: bytes) -> DescribePipeline:
        """``PATCH api/pipelines/<id>``: ``{"status": "STOPPED"}`` stops it."""
        owner = self._owner(caller, Access.WRITE)
        self.pipelines.describe(pipeline_id, owner=owner)  # another's: 404 before the body
        parse_model(UpdatePipeline, json_object(body), "pipeline change")
        return self._titled(await self.pipelines.stop(pipeline_id, owner=owner))

    def delete(self, caller: Caller, pipeline_id: str) -> None:
        """``DELETE api/pipelines/<id>``: a finished pipeline goes; its jobs stay."""
        self.pipelines.delete(pipeline_id, owner=self._owner(caller, Access.WRITE))
