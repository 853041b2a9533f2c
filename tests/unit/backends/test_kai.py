"""Scenarios: KAI-scheduler places slices, queues pods per course and keeps servers unpreempted."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare, UserIdentity
from jupyter_to_job.k8s_objects import make_job

from ...support.course_catalogs import catalog, course, minute, now
from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, WHOLE

QUARTER_ENV = {
    "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
    "GPUSPAWNER_GPU_FRACTION": "1/4",
    "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
    "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
    "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
}
WHOLE_ENV = {
    "GPUSPAWNER_GPU_SHARE": "1 whole NVIDIA A100-SXM4-80GB, 80 GiB",
    "GPUSPAWNER_GPU_FRACTION": "1/1",
    "GPUSPAWNER_GPU_MEMORY_MIB": "81920",
}
ON_A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def plan(
    *,
    labels: dict,
    annotations: dict | None = None,
    limits: dict | None = None,
    environment: dict,
    unhonoured: list | None = None,
) -> dict:
    """A KAI plan on an A100 80GB node: the parts every KAI plan shares, filled in."""
    return {
        "resource_limits": limits or {},
        "resource_requests": {},
        "annotations": annotations or {},
        "labels": labels,
        "node_selector": ON_A100,
        "tolerations": [],
        "scheduler_name": "kai-scheduler",
        "environment": environment,
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": unhonoured or [],
    }


def render(share: GPUShare, **context: str | None) -> dict:
    backend = make_backend("kai", queue="{course}")
    return backend.render(
        share, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x", **context
    ).to_dict()


def test_given_a_students_quarter_gpu_server_then_a_fraction_in_the_courses_queue_unpreempted():
    assert render(QUARTER, workload="server", course="ml101") == plan(
        labels={"kai.scheduler/queue": "ml101", "priorityClassName": "build"},
        annotations={"gpu-fraction": "0.25"},
        environment=QUARTER_ENV,
        unhonoured=[
            "GPU memory is not isolated by KAI-scheduler: the 10 GiB limit is applied only "
            "through PyTorch, JAX and TensorFlow settings, which a notebook can change.",
            "A compute minimum of 25% is not guaranteed: KAI-scheduler shares a GPU by its "
            "memory, and the servers on it take turns for compute.",
        ],
    )


def test_given_a_half_gpu_job_then_a_preemptible_fraction_in_the_queue_for_everyone():
    half = GPUShare(fraction=Fraction(1, 2))

    assert render(half, workload="job") == plan(
        labels={"kai.scheduler/queue": "default-queue", "priorityClassName": "train"},
        annotations={"gpu-fraction": "0.5"},
        environment={
            "GPUSPAWNER_GPU_SHARE": "1/2 of an NVIDIA A100-SXM4-80GB, 40 GiB",
            "GPUSPAWNER_GPU_FRACTION": "1/2",
            "GPUSPAWNER_GPU_MEMORY_MIB": "40960",
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.500",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.500",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        },
        unhonoured=[
            "GPU memory is not isolated by KAI-scheduler: the 40 GiB limit is applied only "
            "through PyTorch, JAX and TensorFlow settings, which a notebook can change."
        ],
    )


def test_given_a_memory_only_share_then_gpu_memory_in_mib():
    ten_gib = GPUShare(memory_mib=10 * 1024)

    assert render(ten_gib, workload="server", course="ml101") == plan(
        labels={"kai.scheduler/queue": "ml101", "priorityClassName": "build"},
        annotations={"gpu-memory": "10240"},
        environment={
            "GPUSPAWNER_GPU_SHARE": "a slice of an NVIDIA A100-SXM4-80GB, 10 GiB",
            "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        },
        unhonoured=[
            "GPU memory is not isolated by KAI-scheduler: the 10 GiB limit is applied only "
            "through PyTorch, JAX and TensorFlow settings, which a notebook can change."
        ],
    )


@pytest.mark.parametrize(
    "workload, course, labels",
    [
        ("server", "ml101", {"kai.scheduler/queue": "ml101", "priorityClassName": "build"}),
        ("server", None, {"kai.scheduler/queue": "default-queue", "priorityClassName": "build"}),
        ("job", None, {"kai.scheduler/queue": "default-queue", "priorityClassName": "train"}),
    ],
)
def test_given_a_whole_gpu_then_an_nvidia_gpu_limit_and_no_fraction(workload, course, labels):
    assert render(WHOLE, workload=workload, course=course) == plan(
        labels=labels, limits={"nvidia.com/gpu": "1"}, environment=WHOLE_ENV
    )


def test_given_a_fraction_with_more_memory_than_its_part_then_it_asks_by_memory():
    # 1/4 of 80 GiB is 20 GiB: 30 GiB is what limits how many fit
    share = GPUShare(fraction=Fraction(1, 4), memory_mib=30 * 1024)

    rendered = render(share, workload="server", course="ml101")

    assert rendered["annotations"] == {"gpu-memory": "30720"}
    assert rendered["resource_limits"] == {}


def test_given_a_third_then_the_fraction_is_rounded_down_to_hundredths_and_said():
    rendered = render(GPUShare(fraction=Fraction(1, 3)), workload="server", course="ml101")

    assert rendered["annotations"] == {"gpu-fraction": "0.33"}
    assert rendered["unhonoured"][0] == (
        "KAI-scheduler takes GPU fractions in hundredths, so this share is placed as 0.33 of a GPU."
    )


def test_given_all_of_a_gpu_with_a_memory_limit_then_one_whole_gpu_not_a_fraction_of_one():
    # KAI refuses gpu-fraction 1.0: the whole GPU is asked for, the memory kept softly
    share = GPUShare(fraction=Fraction(1), memory_mib=40 * 1024)

    rendered = render(share, workload="job")

    assert rendered["annotations"] == {}
    assert rendered["resource_limits"] == {"nvidia.com/gpu": "1"}
    assert rendered["environment"]["GPUSPAWNER_TORCH_MEMORY_FRACTION"] == "0.500"


def test_given_a_fixed_queue_and_other_priority_classes_then_they_are_used_for_every_pod():
    backend = make_backend(
        "kai", queue="campus", server_priority_class="inference", job_priority_class=None
    )

    server = backend.render(WHOLE, name="x", workload="server", course="ml101")
    job = backend.render(WHOLE, name="x", workload="job")

    assert server.labels == {"kai.scheduler/queue": "campus", "priorityClassName": "inference"}
    assert job.labels == {"kai.scheduler/queue": "campus"}


def test_given_a_queue_pattern_per_course_then_each_course_gets_its_own_queue():
    backend = make_backend("kai", queue="course-{course}", queue_without_course="research")

    assert backend.render(WHOLE, name="x", course="ml101").labels["kai.scheduler/queue"] == (
        "course-ml101"
    )
    assert backend.render(WHOLE, name="x").labels["kai.scheduler/queue"] == "research"


def test_given_a_course_whose_queue_name_is_too_long_then_the_start_is_refused_in_a_sentence():
    backend = make_backend("kai", queue="course-queue-for-{course}")

    with pytest.raises(UnsupportedShare) as refused:
        backend.render(WHOLE, name="x", course="c" * 50)

    assert refused.value.message.startswith("The KAI-scheduler queue 'course-queue-for-ccc")
    assert "Ask the hub admins to shorten the queue pattern or the course id." in (
        refused.value.message
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"queue": "{user}"}, "The KAI-scheduler queue may name only {course}"),
        ({"queue": "ML 101"}, "The KAI-scheduler queue must be a lowercase name"),
        ({"server_priority_class": "Build"}, "server_priority_class must be a lowercase name"),
        ({"queue_without_course": ""}, "queue_without_course must be a lowercase name"),
    ],
)
def test_given_invalid_settings_then_the_error_says_which(settings, message):
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        make_backend("kai", **settings)


def test_given_a_slice_of_an_unknown_gpu_then_no_soft_limit_and_it_is_said():
    plan = make_backend("kai").render(GPUShare(fraction=Fraction(1, 4)), name="x")

    assert plan.annotations == {"gpu-fraction": "0.25"}
    assert plan.node_selector == {}
    assert plan.unhonoured == [
        "GPU memory is not isolated by KAI-scheduler, and no memory limit is set for PyTorch, "
        "JAX or TensorFlow because the GPU's memory size is unknown."
    ]


def test_the_hubs_admission_renders_servers_and_jobs_with_their_queue_and_priority(tmp_path):
    # Given ml101 in class now with ana at a quarter GPU, a job flavor, on a KAI cluster
    start = minute(now())
    text = catalog(
        course(
            "ml101",
            start=start - timedelta(minutes=10),
            end=start + timedelta(minutes=80),
            students=["ana"],
            gpu="{fraction: 1/4}",
        )
    )
    flavors = """
flavors:
  - {id: quarter-job, title: Quarter job, gpu: {fraction: 1/4}, access: {everyone: true}}
"""
    path = tmp_path / "catalog.yaml"
    path.write_text(text + flavors)
    admission = GPUAdmission(
        catalog_path=str(path),
        target="kubernetes",
        sharing_backend="kai",
        sharing_backend_config={"queue": "{course}"},
    )
    pool = CapacityPool([GPUDevice("gpu-node-0/0", 0, "A100-SXM4-80GB", 81920)])
    ana = UserIdentity("ana")

    # When her class server and her job are granted
    server = admission.grant_server(pool, ana, "ml101", key="server:ana/", now=now())
    job = admission.grant_job(
        pool, ana, "quarter-job", key="job:j1", now=now(), running_jobs=[], object_name="j1"
    )

    # Then the server waits in the course's queue, unpreemptible; the job in the common one
    assert server.plan is not None and job.plan is not None
    assert server.plan.labels == {"kai.scheduler/queue": "ml101", "priorityClassName": "build"}
    assert job.plan.labels == {"kai.scheduler/queue": "default-queue", "priorityClassName": "train"}
    assert server.plan.annotations == job.plan.annotations == {"gpu-fraction": "0.25"}

    # And the job's pod, as the executor builds it, carries them as they are
    pod = make_job(job_id="j1", owner="ana", image="python:3.12", plan=job.plan)["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.25"
    labels = pod["metadata"]["labels"]
    assert (labels["kai.scheduler/queue"], labels["priorityClassName"]) == (
        "default-queue",
        "train",
    )
