"""Scenarios: what a Run as Job request may contain, and what the API answers look like."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jupyter_to_job.models import CreateJob, JobStatus, ListJobsQuery, json_schemas


def test_a_plain_request_gets_a_name_and_both_outputs() -> None:
    request = CreateJob(input_path="project/train.ipynb")

    assert request.name == "train"
    assert request.output_formats == ["ipynb", "html"]
    assert request.parameters == {}


def test_the_executed_notebook_is_always_kept() -> None:
    assert CreateJob(input_path="a.ipynb", output_formats=["html"]).output_formats == [
        "ipynb",
        "html",
    ]
    assert CreateJob(input_path="a.ipynb", output_formats=[]).output_formats == ["ipynb"]


@pytest.mark.parametrize(
    ("path", "complaint"),
    [
        ("/home/alice/train.ipynb", "relative to your home folder"),
        ("~/train.ipynb", "relative to your home folder"),
        ("project/../../etc/passwd.ipynb", "must not contain '..'"),
        ("train.py", "only notebooks"),
        ("project\\train.ipynb", "use / to separate folders"),
        ("", "empty"),
        (".ipynb", "only notebooks"),
    ],
)
def test_notebook_paths_outside_the_users_folder_are_refused(path: str, complaint: str) -> None:
    with pytest.raises(ValidationError, match=complaint):
        CreateJob(input_path=path)


def test_paths_are_normalised() -> None:
    assert CreateJob(input_path="./project//train.ipynb").input_path == "project/train.ipynb"


@pytest.mark.parametrize(
    ("parameters", "complaint"),
    [
        ({"1st": 1}, "not a valid variable name"),
        ({"class": 1}, "not a valid variable name"),
        ({"x": float("nan")}, "plain JSON values"),
        ({"blob": "x" * 70_000}, "64 KiB"),
        ({f"p{i}": i for i in range(101)}, "at most 100 parameters"),
    ],
)
def test_parameters_must_be_small_json_values_with_variable_names(
    parameters: dict, complaint: str
) -> None:
    with pytest.raises(ValidationError, match=complaint):
        CreateJob(input_path="a.ipynb", parameters=parameters)


def test_nested_json_parameters_are_accepted() -> None:
    request = CreateJob(
        input_path="a.ipynb", parameters={"layers": [64, 32], "opts": {"lr": 0.1, "nesterov": True}}
    )
    assert request.parameters["opts"] == {"lr": 0.1, "nesterov": True}


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "x" * 101},
        {"name": "bad\nname"},
        {"flavor": "gpu large"},
        {"idempotency_token": "has space"},
        {"deadline_seconds": 0},
        {"cell_timeout_seconds": -5},
        {"output_formats": ["pdf"]},
        {"unknown_field": 1},
    ],
)
def test_malformed_fields_are_refused(fields: dict) -> None:
    with pytest.raises(ValidationError):
        CreateJob(input_path="a.ipynb", **fields)


def test_a_listing_asks_for_at_most_100_jobs() -> None:
    with pytest.raises(ValidationError):
        ListJobsQuery(max_items=101)
    assert ListJobsQuery().sort_by == "create_time"


def test_final_statuses() -> None:
    assert {s for s in JobStatus if s.is_final} == {"COMPLETED", "FAILED", "STOPPED"}
    assert JobStatus.STOPPING.is_active and not JobStatus.QUEUED.is_active


def test_schemas_are_exported_for_every_wire_model() -> None:
    schemas = json_schemas()

    assert set(schemas) >= {"CreateJob", "DescribeJob", "ListJobsQuery", "ListJobsResponse"}
    assert schemas["JobStatus"]["enum"] == [
        "CREATED",
        "QUEUED",
        "RUNNING",
        "STOPPING",
        "COMPLETED",
        "FAILED",
        "STOPPED",
    ]
    assert "queue_position" in schemas["DescribeJob"]["properties"]
    assert schemas["CreateJob"]["additionalProperties"] is False
