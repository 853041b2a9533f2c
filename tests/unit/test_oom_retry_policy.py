"""Scenarios: an admin lets a job flavor retry a job that ran out of memory with more
(``oom_retry_memory``); the catalog refuses a value that could not help, and the retry
decision (pure, :mod:`jupyter_to_job.retries`) starts a job again only when it helps."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuspawner.policy import CatalogError, load_catalog
from jupyter_to_job.executors.base import JobOutcome, StopReason
from jupyter_to_job.models import JobStatus
from jupyter_to_job.retries import attempt_memory, oom_retry, retry_reason, separator
from jupyter_to_job.runfiles import RunnerStatus

GiB = 1024**3


def catalog(tmp_path: Path, flavor: str) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            flavors:
              - id: train
                title: Training
            """
        )
        + textwrap.indent(textwrap.dedent(flavor), "    ")
    )
    return path


def test_a_flavor_with_oom_retry_memory_keeps_it_in_bytes(tmp_path: Path) -> None:
    path = catalog(tmp_path, "resources: {memory: 16Gi}\noom_retry_memory: 48Gi\n")

    flavor = load_catalog(path).flavors_by_id["train"]

    assert flavor.oom_retry_memory == 48 * GiB


@pytest.mark.parametrize(
    ("flavor", "words"),
    [
        pytest.param(
            "resources: {memory: 16Gi}\noom_retry_memory: 16Gi\n",
            ["oom_retry_memory (16 GiB) must be larger than the flavor's memory (16 GiB)"],
            id="not-larger",
        ),
        pytest.param(
            "oom_retry_memory: 48Gi\n",
            ["oom_retry_memory needs resources.memory"],
            id="no-memory-to-run-out-of",
        ),
    ],
)
def test_an_oom_retry_memory_that_could_not_help_is_refused_with_what_to_change(
    tmp_path: Path, flavor: str, words: list[str]
) -> None:
    path = catalog(tmp_path, flavor)

    with pytest.raises(CatalogError) as error:
        load_catalog(path)

    text = str(error.value)
    assert str(path) in text and "flavors[0]" in text
    for word in words:
        assert word in text


def out_of_memory(limit: int, state: JobStatus | None = JobStatus.FAILED) -> JobOutcome:
    status = None if state is None else RunnerStatus(job_id="j1", state=state)
    return JobOutcome(status, exit_code=None, oom_killed=True, memory_limit=limit)


def test_a_job_out_of_its_memory_starts_again_with_the_flavors_larger_memory() -> None:
    retry = oom_retry(out_of_memory(16 * GiB), 48 * GiB)

    assert retry is not None
    assert retry.memory_bytes == 48 * GiB
    assert separator(2, 3, retry.reason, retry.memory_bytes) == (
        "---- attempt 2 of 3: the job ran out of its 16 GiB of memory; "
        "starting again with 48 GiB from its checkpoint ----"
    )


@pytest.mark.parametrize(
    ("outcome", "retry_memory"),
    [
        pytest.param(out_of_memory(16 * GiB), None, id="flavor-without-the-setting"),
        pytest.param(out_of_memory(48 * GiB), 48 * GiB, id="ran-out-of-the-larger-memory-too"),
        pytest.param(out_of_memory(16 * GiB, JobStatus.COMPLETED), 48 * GiB, id="completed"),
        pytest.param(
            JobOutcome(
                None, oom_killed=True, memory_limit=16 * GiB, stop_reason=StopReason.REQUEST
            ),
            48 * GiB,
            id="stopped-by-its-owner",
        ),
        pytest.param(JobOutcome(None, exit_code=-9), 48 * GiB, id="not-out-of-memory"),
    ],
)
def test_no_retry_with_more_memory_where_it_would_not_help(
    outcome: JobOutcome, retry_memory: int | None
) -> None:
    assert oom_retry(outcome, retry_memory) is None


def test_an_out_of_memory_kill_is_never_a_disruption() -> None:
    assert retry_reason(out_of_memory(16 * GiB, None)) is None


def test_the_attempts_after_an_out_of_memory_retry_keep_the_larger_memory() -> None:
    history = [
        {
            "attempt": 1,
            "reason": "the job ran out of its 16 GiB of memory",
            "memory_bytes": 48 * GiB,
        },
        {"attempt": 2, "reason": "its pod was evicted"},
    ]

    assert attempt_memory(history) == 48 * GiB
    assert attempt_memory(history[1:]) is None
