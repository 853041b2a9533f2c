"""The server extension's job routes, under ``{base_url}jupyter-to-job/api/``.

Design notes: docs/design/server-extension.md, "jupyter_to_job.extension.handlers".
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import PurePosixPath
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from pydantic import ValidationError
from tornado import web

from ..lab_handlers import URL_PREFIX, LabAPIHandler
from ..models import (
    CreateJob,
    NotebookParameter,
    NotebookParameters,
    SavedOutput,
    SaveOutput,
)
from ..pipeline_templates import (
    RunTemplate,
    SavedTemplate,
    SaveTemplate,
    TemplateError,
    check_template_path,
    parse_template,
    template_text,
    with_parameters,
)
from ..pipelines import CreatePipeline
from ..pipelines_api import parse_pipeline
from ..rest import (
    CREATE_BODY_SLACK,
    SMALL_BODY_LIMIT,
    ApiError,
    BoundedBodyMixin,
    body_too_large,
    change_bounds,
    check_notebook,
    json_object,
    notebook_too_deep,
    settings_bounds,
    too_large,
    validation_error,
)
from ..schedules_api import parse_schedule
from ..session_relay import session_handlers
from .relay import ServiceRelay
from .user_files import check_file_to_read, check_file_to_write, file_error, files_root

JOB_ID = r"(?P<job_id>[^/]+)"
SCHEDULE_ID = r"(?P<schedule_id>[^/]+)"
PIPELINE_ID = r"(?P<pipeline_id>[^/]+)"
FORMAT = r"(?P<fmt>ipynb|html)"
TRUE_WORDS = {"1", "true", "yes", "on"}


def post_bounds(method: str | None, what_to_send: str) -> tuple[int, ApiError] | None:
    """What a POST whose notebooks are read from the user's files takes: its fields only."""
    if method != "POST":
        return None
    return CREATE_BODY_SLACK, body_too_large(CREATE_BODY_SLACK, what_to_send)


class JobsExtensionHandler(LabAPIHandler):
    """Base: the relay to the job service, and the user's files read and checked."""

    @property
    def relay(self) -> ServiceRelay:
        return self.extensionapp.relay  # type: ignore[attr-defined]

    async def pass_on(
        self, *, body: bytes | None = None, stream: bool = False, follow: bool = False
    ) -> None:
        """Answer with the job service's answer to this request (same address under its
        ``api/``, same method and query; ``body`` when given)."""
        path = self.request.path.split(f"/{URL_PREFIX}/", 1)[1]
        await self.relay.pass_on(self, path, body=body, stream=stream, follow=follow)

    # -- the user's files ----------------------------------------------------------------

    def check_to_read(self, path: str, what: str) -> None:
        """A 4xx unless ``path`` is a file in the user's files this server can read (see
        :mod:`.user_files`); before the contents manager, whose OSErrors would be 500s."""
        root = files_root(self.contents_manager)
        if root is not None:
            check_file_to_read(root, path, what)

    def check_to_write(self, path: str, what: str) -> None:
        """A 4xx unless a ``what`` can be saved at ``path`` inside the user's files."""
        root = files_root(self.contents_manager)
        if root is not None:
            check_file_to_write(root, path, what)

    async def read_notebook(self, path: str) -> dict[str, Any]:
        """The SAVED notebook at ``path`` (relative to the server's root), checked."""
        contents = self.contents_manager
        missing = ApiError(
            404,
            f"There is no notebook {path!r} in your files. Save it, then run it as a job.",
            "no-such-file",
        )
        self.check_to_read(path, "notebook")
        try:
            model = await ensure_async(contents.get(path, content=False))
        except OSError as error:  # changed between the check and the read
            raise file_error(error, path, "notebook") from None
        except web.HTTPError as error:
            if error.status_code == 404:
                raise missing from None
            raise ApiError(
                400, f"The file {path!r} cannot be read ({error.log_message}).", "unreadable"
            ) from None
        if model.get("type") != "notebook":
            raise ApiError(
                400,
                f"The file {path!r} is not a notebook; only notebooks run as jobs.",
                "not-a-notebook",
            )
        limit = self.extensionapp.max_notebook_bytes
        if (model.get("size") or 0) > limit:
            raise too_large(f"The notebook {path!r}", limit)
        try:
            model = await ensure_async(contents.get(path, content=True, type="notebook"))
            notebook = json.loads(json.dumps(model["content"]))  # a plain dict, as on the wire
        except OSError as error:
            raise file_error(error, path, "notebook") from None
        except web.HTTPError as error:
            if error.status_code == 404:
                raise missing from None
            # The contents manager reports a notebook nbformat could not parse for its
            # depth as "Unreadable Notebook: ... RecursionError(...)".
            if "RecursionError" in (error.log_message or ""):
                raise notebook_too_deep(path) from None
            raise ApiError(
                400,
                f"The file {path!r} cannot be read as a notebook, so it cannot run as a job. "
                "Open it in JupyterLab, save it again, and retry.",
                "not-a-notebook",
            ) from None
        except RecursionError:  # nbformat and notebook signing recurse through the JSON
            raise notebook_too_deep(path) from None
        if len(json.dumps(notebook)) > limit:
            raise too_large(f"The notebook {path!r}", limit)
        return check_notebook(notebook, path)

    async def read_notebooks(self, pipeline: CreatePipeline) -> dict[str, dict[str, Any]]:
        """The saved notebook of each job of ``pipeline``, by its input path."""
        notebooks: dict[str, dict[str, Any]] = {}
        for stage in pipeline.stages:
            for job in stage.jobs:
                if job.input_path not in notebooks:
                    notebooks[job.input_path] = await self.read_notebook(job.input_path)
        return notebooks


@web.stream_request_body
class JobsBodyHandler(BoundedBodyMixin, JobsExtensionHandler):
    """Base of the handlers whose verbs take a body: streamed and bounded, so one over its
    limit is a 413 with a JSON sentence (Jupyter Server's own ``max_body_size`` would be a
    bare 400, or buffer up to 512 MiB)."""

    async def prepare(self) -> None:  # type: ignore[override]
        await super().prepare()  # Jupyter Server's checks: who is asking, XSRF, origin
        bounds = self.body_bounds()
        if bounds is not None:
            self.limit_body(*bounds)

    async def pass_on(
        self, *, body: bytes | None = None, stream: bool = False, follow: bool = False
    ) -> None:
        """As the base's, with the request's own body where its verb takes one."""
        if body is None and self.body_bounds() is not None:
            body = self.request_body()
        await super().pass_on(body=body, stream=stream, follow=follow)


class CreateFromFiles(JobsBodyHandler):
    """Base of a list that the service answers and whose POST creates from notebooks in the
    user's files: the POST takes the fields only (``fields_only`` says so, past the limit)."""

    fields_only = ""

    def body_bounds(self) -> tuple[int, ApiError] | None:
        return post_bounds(self.request.method, self.fields_only)

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.pass_on()


class JobsHandler(CreateFromFiles):
    fields_only = (
        "Send only the job's fields: the notebook is read from your files, and large "
        "inputs belong in a file next to it rather than in parameters."
    )

    async def check_rerun(self, job_id: str) -> None:
        """A rerun of another user's job is refused before the notebook is looked for in
        this user's files (where it is not): the job service says whose job it is."""
        job = await self.relay.describe(job_id)
        if not job.get("own", False):
            owner = str(job.get("owner") or "another user")
            raise ApiError(
                403,
                f"This is {owner}'s job; you can read it but not rerun it. Only {owner} can "
                "run it again, from their own files.",
                "not-yours",
            )

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Create a job from a saved notebook: the body is CreateJob (with ``input_path``)."""
        try:
            request = CreateJob.model_validate(json_object(self.request_body()))
        except ValidationError as error:
            raise validation_error(error) from None
        notebook = None
        if request.rerun_of is not None:
            # A rerun runs the earlier job's notebook snapshot, kept by the job service,
            # not the file as it is now (which may have changed or gone).
            await self.check_rerun(request.rerun_of)
        else:
            notebook = await self.read_notebook(request.input_path)
        payload = request.model_dump(mode="json", exclude_none=True)
        if notebook is not None:  # None: a rerun of the job's own snapshot
            payload["notebook"] = notebook
        await self.pass_on(body=json.dumps(payload).encode())


class ItemHandler(JobsBodyHandler):
    """One job, schedule or pipeline, by its id: read it, change it (stop, pause), delete it."""

    def body_bounds(self) -> tuple[int, ApiError] | None:
        (item,) = self.path_kwargs  # job_id, schedule_id or pipeline_id
        return change_bounds(self.request.method, item)

    @web.authenticated
    @authorized
    async def get(self, **_: str) -> None:
        await self.pass_on()

    @web.authenticated
    @authorized
    async def patch(self, **_: str) -> None:
        await self.pass_on()

    @web.authenticated
    @authorized
    async def delete(self, **_: str) -> None:
        await self.pass_on()


class JobLogHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        """``offset``/``limit`` or ``tail``; ``follow=1`` streams newline-delimited JSON."""
        follow = self.params().get("follow", "").lower() in TRUE_WORDS
        await self.pass_on(stream=follow, follow=follow)


class ReadHandler(JobsExtensionHandler):
    """What the service answers as it is: a job's notebook snapshot (what its rerun runs),
    its outputs, the user's flavors."""

    @web.authenticated
    @authorized
    async def get(self, **_: str) -> None:
        await self.pass_on()


def check_save_path(path: str, fmt: str) -> str:
    """A path inside the server's root for a saved output, or a 400 that says why not."""
    pure = PurePosixPath(path)
    if not path or "\\" in path or "\x00" in path:
        raise ApiError(400, "Give a file name such as 'results/train-run.ipynb'.", "bad-path")
    if pure.is_absolute() or path.startswith("~") or ".." in pure.parts:
        raise ApiError(
            400,
            f"The path {path!r} is outside your files: give one relative to your home folder, "
            "without '..'.",
            "outside-root",
        )
    if pure.suffix != f".{fmt}":
        raise ApiError(400, f"Save the {fmt} output under a name ending in .{fmt}.", "bad-path")
    return pure.as_posix()


def cannot_save(error: web.HTTPError, path: str, what: str) -> ApiError:
    """The contents manager's refusal to save ``path``, as a 4xx; what it did not expect
    stays a 500 (a full disk, say), with the file system's own words."""
    cause = error.__cause__
    if isinstance(cause, OSError) and (error.status_code >= 500 or error.status_code == 403):
        mapped = file_error(cause, path, what, writing=True)
        if mapped.reason != "unusable-path":
            return mapped
    return ApiError(
        400 if error.status_code < 500 else 500,
        f"The file {path!r} cannot be written ({error.log_message}).",
        "cannot-save",
    )


class SaveOutputHandler(JobsBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        if self.request.method != "POST":
            return None
        return SMALL_BODY_LIMIT, body_too_large(
            SMALL_BODY_LIMIT, 'Send {"path": ..., "overwrite": false}.'
        )

    @web.authenticated
    @authorized
    async def post(self, job_id: str, fmt: str) -> None:
        """Write the job's output into the user's files: ``{"path": ..., "overwrite": false}``."""
        try:
            request = SaveOutput.model_validate(json_object(self.request_body()))
        except ValidationError as error:
            raise validation_error(error) from None
        path = check_save_path(request.path, fmt)
        self.check_to_write(path, "job output")
        contents = self.contents_manager
        if await ensure_async(contents.exists(path)) and not request.overwrite:
            raise ApiError(
                409,
                f"The file {path!r} already exists. Choose another name, or save with overwrite.",
                "already-exists",
            )
        output = await self.relay.output(job_id, fmt)
        if fmt == "ipynb":
            import nbformat

            try:
                content = nbformat.reads(output.content.decode("utf-8"), as_version=4)
            except (ValueError, RecursionError):  # the job wrote something else, or too deep
                raise ApiError(
                    422,
                    "The job's output is not a notebook that can be saved (it may be damaged "
                    "or nested too deeply). Download it instead.",
                    "bad-output",
                ) from None
            model = {"type": "notebook", "format": "json", "content": content}
        else:
            model = {
                "type": "file",
                "format": "text",
                "content": output.content.decode("utf-8", "replace"),
            }
        try:
            await self._make_parents(path)
            saved = await ensure_async(contents.save(model, path))
        except OSError as error:
            raise file_error(error, path, "job output", writing=True) from None
        except web.HTTPError as error:
            raise cannot_save(error, path, "job output") from None
        self.write_json(SavedOutput(path=saved["path"], size=saved.get("size") or 0), 201)

    async def _make_parents(self, path: str) -> None:
        contents = self.contents_manager
        parents = list(PurePosixPath(path).parents)[:-1]  # without "."
        for parent in reversed(parents):
            folder = parent.as_posix()
            if not await ensure_async(contents.dir_exists(folder)):
                await ensure_async(contents.save({"type": "directory"}, folder))


class SchedulesHandler(CreateFromFiles):
    fields_only = "Send only the schedule's fields: the notebook is read from your files."

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Schedule a saved notebook (the body is CreateSchedule with ``job.input_path``) or a
        pipeline (with ``pipeline``); the notebooks are read from the user's files."""
        request = parse_schedule(json_object(self.request_body()))
        payload = request.model_dump(mode="json", exclude_none=True)
        if request.pipeline is not None:
            payload["notebooks"] = await self.read_notebooks(request.pipeline)
        else:
            assert request.job is not None
            payload["notebook"] = await self.read_notebook(request.job.input_path)
        await self.pass_on(body=json.dumps(payload).encode())


class NotificationSettingsHandler(JobsBodyHandler):
    """The user's default notifications (mail, webhook, which endings), kept by the job
    service in hub mode and by the embedded manager when standalone."""

    def body_bounds(self) -> tuple[int, ApiError] | None:
        return settings_bounds(self.request.method)

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.pass_on()

    @web.authenticated
    @authorized
    async def put(self) -> None:
        await self.pass_on()


class TemplateFiles(JobsBodyHandler):
    """Handlers that read pipeline templates from the user's files."""

    async def read_template(self, path: str) -> CreatePipeline:
        """The template at ``path`` as a CreatePipeline; a 4xx with a sentence otherwise."""
        try:
            path = check_template_path(path)
        except TemplateError as error:
            raise ApiError(400, str(error), "not-a-template") from None
        self.check_to_read(path, "pipeline template")
        try:
            model = await ensure_async(
                self.contents_manager.get(path, content=True, type="file", format="text")
            )
        except OSError as error:  # changed between the check and the read
            raise file_error(error, path, "pipeline template") from None
        except web.HTTPError as error:
            if error.status_code == 404:
                raise ApiError(
                    404, f"There is no pipeline template {path!r} in your files.", "no-such-file"
                ) from None
            raise ApiError(
                400,
                f"The file {path!r} cannot be read as a pipeline template ({error.log_message}).",
                "not-a-template",
            ) from None
        try:
            return parse_template(model.get("content") or "", path)
        except TemplateError as error:
            raise ApiError(400, str(error), "not-a-template") from None


class PipelinesHandler(CreateFromFiles, TemplateFiles):
    fields_only = "Send only the pipeline's fields: the notebooks are read from your files."

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Run a pipeline: the body is a CreatePipeline, or ``{"template_path", "parameters"}``
        to run a saved template with new pipeline-wide values. The notebooks are read from
        the user's files (saved versions)."""
        data = json_object(self.request_body())
        if "stages" not in data and "template_path" in data:
            try:
                run = RunTemplate.model_validate(data)
            except ValidationError as error:
                raise validation_error(error, "template run") from None
            template = await self.read_template(run.template_path)
            try:
                request = with_parameters(template, run.parameters)
            except ValidationError as error:
                raise validation_error(error, "pipeline") from None
        else:
            request = parse_pipeline(data)
        payload = request.model_dump(mode="json", exclude_none=True)
        payload["notebooks"] = await self.read_notebooks(request)
        await self.pass_on(body=json.dumps(payload).encode())


class PipelineTemplatesHandler(TemplateFiles):
    """``GET ?path=x.pipeline.yaml``: the template; ``POST``: save a pipeline as one."""

    def body_bounds(self) -> tuple[int, ApiError] | None:
        return post_bounds(
            self.request.method,
            'Send {"path": ..., "pipeline": {...}, "overwrite": false}.',
        )

    @web.authenticated
    @authorized
    async def get(self) -> None:
        path = self.params().get("path")
        if not path:
            raise ApiError(400, "Say which template to read: ?path=train.pipeline.yaml.", "invalid")
        self.write_json(await self.read_template(path))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            request = SaveTemplate.model_validate(json_object(self.request_body()))
        except ValidationError as error:
            raise validation_error(error, "template") from None
        self.check_to_write(request.path, "pipeline template")
        contents = self.contents_manager
        if await ensure_async(contents.exists(request.path)) and not request.overwrite:
            raise ApiError(
                409,
                f"The file {request.path!r} already exists. Choose another name, or save "
                "with overwrite.",
                "already-exists",
            )
        model = {
            "type": "file",
            "format": "text",
            "content": template_text(request.pipeline, request.path),
        }
        try:
            saved = await ensure_async(contents.save(model, request.path))
        except OSError as error:
            raise file_error(error, request.path, "pipeline template", writing=True) from None
        except web.HTTPError as error:
            raise cannot_save(error, request.path, "pipeline template") from None
        self.write_json(SavedTemplate(path=saved["path"], size=saved.get("size") or 0), 201)


class ConfigHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        config = await self.relay.json("GET", "config")
        config.setdefault("features", {})["save_outputs"] = True  # this extension's own
        self.write_json(config)


class ParametersHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """``?path=nb.ipynb``: the variables of the notebook's cell tagged 'parameters';
        ``?job_id=ID``: those of the notebook snapshot that job ran (its rerun's)."""
        job_id = self.get_argument("job_id", "")
        path = self.get_argument("path", "")
        if job_id:
            notebook = await self.relay.input_notebook(job_id)
            path = str((await self.relay.describe(job_id)).get("input_path") or job_id)
        else:
            try:
                path = CreateJob(input_path=path).input_path  # the same path rules as a job
            except ValidationError as error:
                raise validation_error(error, "notebook path") from None
            notebook = await self.read_notebook(path)
        from papermill import inspect_notebook  # heavy: only when asked

        with tempfile.TemporaryDirectory(prefix="jupyter-to-job-") as folder:
            copy = os.path.join(folder, "notebook.ipynb")
            with open(copy, "w", encoding="utf-8") as stream:
                json.dump(notebook, stream)
            try:
                found = inspect_notebook(copy)
            except Exception as error:  # a kernel language papermill cannot parse, say
                self.log.info("No parameters inferred for %s: %s", path, error)
                found = {}
        parameters = [
            NotebookParameter(
                name=str(p.get("name", name)),
                inferred_type_name=str(p.get("inferred_type_name") or "None"),
                default=str(p.get("default") or ""),
                help=str(p.get("help") or ""),
            )
            for name, p in found.items()
        ]
        self.write_json(NotebookParameters(path=path, parameters=parameters))


def extension_handlers() -> list[tuple[str, type]]:
    """The routes, relative to the server's base URL: the jobs', then the course
    session's (:mod:`jupyter_to_job.session_relay`), which this extension serves too."""
    jobs = f"{URL_PREFIX}/jobs"
    return [
        (jobs, JobsHandler),
        (f"{jobs}/{JOB_ID}", ItemHandler),
        (f"{jobs}/{JOB_ID}/logs", JobLogHandler),
        (f"{jobs}/{JOB_ID}/input", ReadHandler),
        (f"{jobs}/{JOB_ID}/outputs/{FORMAT}", ReadHandler),
        (f"{jobs}/{JOB_ID}/outputs/{FORMAT}/save", SaveOutputHandler),
        (f"{URL_PREFIX}/schedules", SchedulesHandler),
        (f"{URL_PREFIX}/schedules/{SCHEDULE_ID}", ItemHandler),
        (f"{URL_PREFIX}/notification-settings", NotificationSettingsHandler),
        (f"{URL_PREFIX}/pipelines", PipelinesHandler),
        (f"{URL_PREFIX}/pipelines/{PIPELINE_ID}", ItemHandler),
        (f"{URL_PREFIX}/pipeline-templates", PipelineTemplatesHandler),
        (f"{URL_PREFIX}/flavors", ReadHandler),
        (f"{URL_PREFIX}/config", ConfigHandler),
        (f"{URL_PREFIX}/parameters", ParametersHandler),
        *session_handlers(),
    ]
