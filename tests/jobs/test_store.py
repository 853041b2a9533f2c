"""Scenarios for the job store, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from jupyter_to_job.errors import InvalidJobRequest
from jupyter_to_job.models import JobStatus, ListJobsQuery
from jupyter_to_job.store import DuplicateToken, JobRow, JobStore

T0 = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_url")
    job_store = JobStore(url)
    job_store.drop_tables()
    job_store.create_tables()
    yield job_store
    job_store.drop_tables()
    job_store.close()


def new_job(owner: str = "alice", name: str = "train", minutes: int = 0, **fields) -> JobRow:  # type: ignore[no-untyped-def]
    return JobRow(
        job_id=str(uuid.uuid4()),
        owner=owner,
        name=name,
        status=fields.pop("status", JobStatus.QUEUED.value),
        input_path=f"{name}.ipynb",
        parameters=fields.pop("parameters", {}),
        output_formats=["ipynb"],
        create_time=T0 + timedelta(minutes=minutes),
        cells_completed=0,
        **fields,
    )


def test_a_job_round_trips_with_json_and_aware_utc_times(store: JobStore) -> None:
    job = store.add(
        new_job(parameters={"layers": [64, 32], "opts": {"lr": 0.1}}, gpu={"device_ids": ["g0"]})
    )

    loaded = store.get(job.job_id)

    assert loaded is not None
    assert loaded.parameters == {"layers": [64, 32], "opts": {"lr": 0.1}}
    assert loaded.gpu == {"device_ids": ["g0"]}
    assert loaded.create_time == T0 and loaded.create_time.tzinfo is not None
    assert loaded.job_status is JobStatus.QUEUED


def test_an_idempotency_token_is_unique_per_owner(store: JobStore) -> None:
    first = store.add(new_job(idempotency_token="click-1"))

    with pytest.raises(DuplicateToken) as duplicate:
        store.add(new_job(idempotency_token="click-1"))

    assert duplicate.value.existing.job_id == first.job_id
    store.add(new_job(owner="bob", idempotency_token="click-1"))  # another owner: fine
    store.add(new_job())
    store.add(new_job())  # no token: any number


def test_a_transition_happens_once(store: JobStore) -> None:
    job = store.add(new_job())

    assert store.transition(job.job_id, [JobStatus.QUEUED], JobStatus.RUNNING, pid=123)
    assert not store.transition(job.job_id, [JobStatus.QUEUED], JobStatus.RUNNING)

    loaded = store.get(job.job_id)
    assert loaded is not None
    assert (loaded.status, loaded.pid) == ("RUNNING", 123)


def test_queue_order_and_positions_follow_creation(store: JobStore) -> None:
    jobs = [store.add(new_job(name=f"job{i}", minutes=i)) for i in range(3)]
    store.transition(jobs[0].job_id, [JobStatus.QUEUED], JobStatus.RUNNING)

    queued = store.with_status(JobStatus.QUEUED)

    assert [j.name for j in queued] == ["job1", "job2"]
    assert [store.queue_position(j) for j in queued] == [1, 2]
    assert store.count(JobStatus.RUNNING, JobStatus.STOPPING) == 1


def test_listing_filters_sorts_and_pages_with_an_opaque_token(store: JobStore) -> None:
    for i in range(7):
        store.add(new_job(name=f"Train {i}", minutes=i))
    store.add(new_job(name="evaluate", minutes=10))
    store.add(new_job(owner="bob", name="train bob", minutes=11))

    query = ListJobsQuery(owner="alice", name="TRAIN", max_items=3)
    pages = []
    while True:
        page = store.list(query)
        pages.append([row.name for row in page.rows])
        assert page.total_count == 7
        if page.next_token is None:
            break
        query = query.model_copy(update={"next_token": page.next_token})

    assert pages == [
        ["Train 6", "Train 5", "Train 4"],
        ["Train 3", "Train 2", "Train 1"],
        ["Train 0"],
    ]

    by_name = store.list(ListJobsQuery(owner="alice", sort_by="name", sort_order="asc"))
    assert by_name.rows[0].name == "Train 0" and by_name.rows[-1].name == "evaluate"
    assert store.list(ListJobsQuery(status=JobStatus.FAILED)).total_count == 0


def test_a_name_filter_treats_wildcards_literally(store: JobStore) -> None:
    store.add(new_job(name="100% done"))
    store.add(new_job(name="1000 done"))

    assert [r.name for r in store.list(ListJobsQuery(name="0%")).rows] == ["100% done"]


def test_a_forged_or_mismatched_page_token_is_refused(store: JobStore) -> None:
    for i in range(3):
        store.add(new_job(minutes=i))
    token = store.list(ListJobsQuery(max_items=1)).next_token
    assert token is not None

    with pytest.raises(InvalidJobRequest, match="page token is not valid"):
        store.list(ListJobsQuery(max_items=1, sort_by="name", next_token=token))
    with pytest.raises(InvalidJobRequest, match="page token is not valid"):
        store.list(ListJobsQuery(next_token="not-base64!!"))


def test_delete_removes_the_row(store: JobStore) -> None:
    job = store.add(new_job())

    assert store.delete(job.job_id)
    assert store.get(job.job_id) is None
    assert not store.delete(job.job_id)


def test_a_listing_can_be_limited_to_the_owners_a_caller_may_read(store: JobStore) -> None:
    for owner, minutes in [("alice", 0), ("bob", 1), ("carl", 2), ("bob", 3)]:
        store.add(new_job(owner=owner, minutes=minutes))

    page = store.list(ListJobsQuery(max_items=1), owners={"bob", "carl"})
    following = store.list(
        ListJobsQuery(max_items=5, next_token=page.next_token), owners={"bob", "carl"}
    )

    assert page.total_count == 3
    assert [row.owner for row in page.rows + following.rows] == ["bob", "carl", "bob"]
    assert store.list(ListJobsQuery(), owners=set()).total_count == 0
    assert store.list(ListJobsQuery(owner="alice"), owners={"bob"}).total_count == 0


def test_a_store_made_before_pipelines_gains_their_columns_and_keeps_its_jobs(
    store: JobStore,
) -> None:
    # Given a store whose jobs table predates pipeline_id, schedule_id and environment
    old = store.add(new_job(name="old"))
    with store.engine.begin() as connection:
        for column in ("pipeline_id", "schedule_id"):
            connection.execute(text(f"DROP INDEX ix_jobs_{column}"))
        for column in ("pipeline_id", "schedule_id", "environment"):
            connection.execute(text(f"ALTER TABLE jobs DROP COLUMN {column}"))
    assert "pipeline_id" not in {c["name"] for c in inspect(store.engine).get_columns("jobs")}

    # When the job service starts on it
    store.create_tables()

    # Then its jobs are there, and new jobs record their pipeline and environment
    loaded = store.get(old.job_id)
    assert loaded is not None and loaded.name == "old" and loaded.pipeline_id is None
    made = store.add(
        new_job(name="new", pipeline_id="p-1", schedule_id="s-1", environment={"A": "1"})
    )
    again = store.get(made.job_id)
    assert again is not None
    assert (again.pipeline_id, again.schedule_id, again.environment) == ("p-1", "s-1", {"A": "1"})
    indexes = {index["name"] for index in inspect(store.engine).get_indexes("jobs")}
    assert {"ix_jobs_pipeline_id", "ix_jobs_schedule_id"} <= indexes
