"""Pipeline templates: a pipeline saved as a small YAML or JSON file beside the notebooks.

A template holds the fields of :class:`~jupyter_to_job.pipelines.CreatePipeline` except
``template_path`` (where it was read from) and ``notify`` (each run says whom to tell).
Its name ends in ``.pipeline.yaml``, ``.pipeline.yml`` or ``.pipeline.json``. Running a
template with other ``parameters`` replaces those pipeline-wide values, keeping the rest.
YAML is read with ``yaml.safe_load`` (plain data only, never Python objects).
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import Field, JsonValue, ValidationError, field_validator

from .models import WireModel, check_relative_folder
from .pipelines.models import CreatePipeline

TEMPLATE_SUFFIXES = (".pipeline.yaml", ".pipeline.yml", ".pipeline.json")
MAX_TEMPLATE_BYTES = 256 * 1024
_NOT_IN_A_TEMPLATE = ("template_path", "notify")


class TemplateError(ValueError):
    """A file that is not a valid template; its message is a sentence for people."""


def check_template_path(path: str) -> str:
    """``path`` as a template's path below the owner's home, or TemplateError."""
    try:
        path = check_relative_folder(path, "the template path")
    except ValueError as error:
        raise TemplateError(f"{str(error)[:1].upper()}{str(error)[1:]}.") from None
    if not path.endswith(TEMPLATE_SUFFIXES):
        raise TemplateError(
            f"{path!r} is not a pipeline template: its name must end in "
            + ", ".join(TEMPLATE_SUFFIXES)
            + "."
        )
    return path


def parse_template(text: str | bytes, path: str) -> CreatePipeline:
    """The pipeline in the template file ``path`` (its content ``text``), with
    ``template_path`` set; TemplateError saying what is wrong otherwise."""
    path = check_template_path(path)
    if len(text) > MAX_TEMPLATE_BYTES:
        raise TemplateError(
            f"{path!r} is larger than {MAX_TEMPLATE_BYTES // 1024} KiB, too large for a "
            "pipeline template."
        )
    try:
        if path.endswith(".json"):
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        raise TemplateError(
            f"{path!r} cannot be read as {'JSON' if path.endswith('.json') else 'YAML'}{where}; "
            "fix the file or save the pipeline again."
        ) from None
    if not isinstance(data, dict):
        raise TemplateError(
            f"{path!r} does not hold a pipeline: expected a mapping with 'name' and 'stages'."
        )
    for key in _NOT_IN_A_TEMPLATE:
        data.pop(key, None)
    try:
        pipeline = CreatePipeline.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'the file'}: "
            f"{str(item['msg']).removeprefix('Value error, ')}"
            for item in error.errors(include_url=False, include_input=False)
        )
        raise TemplateError(f"{path!r} is not a valid pipeline template: {problems}.") from None
    return pipeline.model_copy(update={"template_path": path})


def template_text(pipeline: CreatePipeline, path: str) -> str:
    """The file content of ``pipeline`` saved as the template ``path`` (YAML or JSON by its
    name), without the fields a template does not keep."""
    data: dict[str, Any] = pipeline.model_dump(
        mode="json", exclude=set(_NOT_IN_A_TEMPLATE), exclude_none=True
    )
    if check_template_path(path).endswith(".json"):
        return json.dumps(data, indent=2) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def with_parameters(pipeline: CreatePipeline, parameters: dict[str, Any]) -> CreatePipeline:
    """``pipeline`` to run with ``parameters`` replacing its pipeline-wide entries."""
    return CreatePipeline.model_validate(
        {
            **pipeline.model_dump(mode="json"),
            "parameters": {**pipeline.parameters, **parameters},
        }
    )


class RunTemplate(WireModel):
    """Run a saved template: ``{"template_path": "x.pipeline.yaml", "parameters": {...}}``."""

    template_path: str = Field(description="The template file, relative to the user's root.")
    parameters: dict[str, JsonValue] = Field(
        default_factory=dict, description="Values replacing the template's pipeline-wide ones."
    )


class SaveTemplate(WireModel):
    """Save a pipeline as a template file beside the notebooks."""

    path: str = Field(description="'train.pipeline.yaml' (or .pipeline.yml, .pipeline.json).")
    pipeline: CreatePipeline
    overwrite: bool = False

    @field_validator("path")
    @classmethod
    def _template_path(cls, value: str) -> str:
        try:
            return check_template_path(value)
        except TemplateError as error:
            raise ValueError(str(error).rstrip(".")) from None


class SavedTemplate(WireModel):
    path: str
    size: int
