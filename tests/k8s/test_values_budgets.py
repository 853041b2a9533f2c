"""GPU-hour budgets under the shipped values (issue 23, defect 4).

The hub (z2jh 4.4.0's own configuration with values.yaml) and the job service (its rendered
ConfigMap and Deployment) each open the usage database at the address the values give it;
here that address leads to a real PostgreSQL server made as usage-db.yaml makes its own
(its user, database and password from the StatefulSet's environment and the Secret's key
both pods read), the way the cluster's Service would lead there.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest
from jupyterhub.spawner import SpawnException
from sqlalchemy.engine import make_url

from gpuspawner.accounting.intervals import UsageInterval, week_of
from gpuspawner.accounting.store import close_shared_usage_store
from gpuspawner.spawners.course_profiles import CourseProfilesMixin
from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job.service.app import JobServiceApp
from tests.support import eventually
from tests.support.k8s_spawners import without_a_hub
from tests.support.postgres import postgres_url_fixture
from tests.support.z2jh_chart import (
    K8S,
    ChartHub,
    catalog_mount_path,
    env_stand_in,
    job_service_config_file,
    job_service_environment,
    one,
    render_campus,
    shipped_values,
    z2jh_missing,
)

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(z2jh_missing() is not None, reason=z2jh_missing() or ""),
    pytest.mark.usefixtures("kubespawner_env"),
]

postgres_url = postgres_url_fixture()

NAMESPACE = "default"
TODAY = datetime.now(UTC)
# Tuesday 10:00 UTC of this week, and the job that ran from 07:00 to 09:00 that day.
TUESDAY = week_of(TODAY, UTC)[0] + timedelta(days=1, hours=10)


def budget_catalog(folder: Path) -> Path:
    """A course in class all week with a whole GPU per student and 1 GPU-hour a week."""
    folder.mkdir()
    (folder / "catalog.yaml").write_text(
        f"""\
courses:
  - id: cs101
    title: CS101
    enrolment: {{users: [ana, ben]}}
    gpu: {{count: 1}}
    budget: {{gpu_hours_per_student_per_week: 1}}
    schedule:
      timezone: UTC
      term: {{first_day: {(TODAY - timedelta(days=30)).date()}, last_day: {(TODAY + timedelta(days=30)).date()}}}
      windows: [{{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "00:00", end: "23:59"}}]
"""
    )
    return folder


def usage_database_on(postgres_url: str) -> dict[str, str]:
    """The usage database as usage-db.yaml's PostgreSQL makes it at its first start (its
    image makes POSTGRES_USER, with POSTGRES_PASSWORD, and POSTGRES_DB), on the test's
    server; returns where its Service answers and where the test's server does."""
    docs = render_campus()
    statefulset = one(docs, "StatefulSet", "gpu-usage-db")
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: env_stand_in(e["name"], e) for e in container["env"]}
    [port] = one(docs, "Service", "gpu-usage-db")["spec"]["ports"]
    server = make_url(postgres_url)
    with psycopg.connect(
        host=server.host, port=server.port, user=server.username, dbname="postgres"
    ) as connection:
        connection.autocommit = True
        connection.execute(f'DROP DATABASE IF EXISTS "{env["POSTGRES_DB"]}"')
        connection.execute(f'DROP ROLE IF EXISTS "{env["POSTGRES_USER"]}"')
        connection.execute(
            f"CREATE ROLE \"{env['POSTGRES_USER']}\" LOGIN PASSWORD '{env['POSTGRES_PASSWORD']}'"
        )
        connection.execute(f'CREATE DATABASE "{env["POSTGRES_DB"]}" OWNER "{env["POSTGRES_USER"]}"')
    return {
        "service": f"gpu-usage-db:{port['port']}",
        "server": f"{server.host}:{server.port}",
        "user": env["POSTGRES_USER"],
        "password": env["POSTGRES_PASSWORD"],
        "database": env["POSTGRES_DB"],
    }


def reached(url: str, usage_database: dict[str, str]) -> str:
    """``url`` as the cluster's Service routes it: the usage database's address, sent on
    to the test's server. Fails when ``url`` names another address or account."""
    parsed = make_url(url)
    assert f"{parsed.host}:{parsed.port}" == usage_database["service"], url
    assert (parsed.username, parsed.password, parsed.database) == (
        usage_database["user"],
        usage_database["password"],
        usage_database["database"],
    )
    host, port = usage_database["server"].split(":")
    return parsed.set(host=host, port=int(port)).render_as_string(hide_password=False)


async def test_a_students_jobs_count_against_her_server_start_under_the_shipped_values(
    k8s_controls, tmp_path, monkeypatch, postgres_url
):
    GPUSpawner._inventories.clear()
    CourseProfilesMixin._usage_reconciled.clear()
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    catalog = budget_catalog(tmp_path / "course-catalog")

    # Given the hub configured by the shipped values, with CS101's catalog mounted
    values = shipped_values()
    hub_config = ChartHub(tmp_path / "hub", monkeypatch).run(
        values, mounts={catalog_mount_path(values): catalog}, namespace=NAMESPACE
    )
    hub_config.GPUAdmission.catalog_path = str(catalog)
    assert "usage_db_url" in hub_config.GPUAdmission, (
        "the shipped values give the hub no GPU-hour usage record: budgets are not enforced"
    )
    # reaching the usage database usage-db.yaml makes (here on the test's server)
    usage_database = usage_database_on(postgres_url)
    hub_url = reached(hub_config.GPUAdmission.usage_db_url, usage_database)
    hub_config.GPUAdmission.usage_db_url = hub_url
    # and the job service configured by its rendered ConfigMap and Deployment
    docs = render_campus(K8S / "backends" / "whole.yaml")
    for name, value in job_service_environment(docs).items():
        monkeypatch.setenv(name, value)
    job_service = JobServiceApp()
    config_file = job_service_config_file(tmp_path, K8S / "backends" / "whole.yaml", docs)
    job_service.initialize([f"--JobServiceApp.config_file={config_file}"])
    assert reached(job_service.admission.usage_db_url, usage_database) == hub_url
    job_service.admission.usage_db_url = hub_url
    try:
        # When Ana's CS101 job held a whole GPU for two hours this Tuesday, as the job
        # service records a job it runs
        record = job_service.admission.usage_record()
        assert record is not None, "the job service keeps no GPU-hour record"
        record.open(
            UsageInterval(
                key="job:j1",
                kind="job",
                owner="ana",
                name="j1",
                profile="cs101-gpu",
                share=Fraction(1),
                started=TUESDAY - timedelta(hours=3),
                course="cs101",
            ),
            ["GPU-0"],
            fresh=True,
        )
        record.close_interval("job:j1", TUESDAY - timedelta(hours=1))

        # and she starts her CS101 server at the hub at 10:00
        spawner = without_a_hub(GPUSpawner, "ana", hub_config)
        spawner.user_options = {"profile": "cs101"}
        spawner.now = lambda: TUESDAY
        start = asyncio.ensure_future(spawner.start())
        await eventually(
            lambda: start.done() or k8s_controls.get("pods", spawner.pod_name, NAMESPACE),
            what="the hub to refuse or start Ana's server",
        )
        made = k8s_controls.get("pods", spawner.pod_name, NAMESPACE)
        if not start.done():
            start.cancel()
            await asyncio.gather(start, return_exceptions=True)
            await spawner.stop(now=True)

        # Then the hub refuses it with a sentence, before making any pod: her job used her
        # week's GPU-hour
        assert made is None, "the hub started Ana's server past her week's GPU-hours"
        with pytest.raises(SpawnException) as refused:
            start.result()
        assert refused.value.status_code == 403
        assert refused.value.message.startswith(
            "You have used 2.0 of your 1 GPU-hours for CS101 this week;"
        )
    finally:
        close_shared_usage_store(hub_url)
        GPUSpawner._inventories.clear()
        CourseProfilesMixin._usage_reconciled.clear()
