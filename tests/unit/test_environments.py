"""Scenarios: a course offers environments to choose from; the student's pick is what runs,
and a pick the course does not offer, or one its GPU cannot run, is refused with a sentence."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from gpuspawner.cli import main
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import (
    Allocation,
    CapacityPool,
    CatalogError,
    GPUDevice,
    Refusal,
    UserIdentity,
    admit,
    evaluate,
    load_catalog,
)
from gpuspawner.spawners.spawn_page import ProfileCard, render_profile_cards

from .conftest import at, dedent

ENVIRONMENTS = """\
    settings:
      timezone: Europe/Zurich
    standing:
      - id: cpu
        title: CPU only
        default: true
    environments:
      - id: pytorch
        title: PyTorch 2.4
        description: For the deep learning labs.
        contains: [PyTorch 2.4, torchvision, JupyterLab 4]
        image: quay.io/campus/pytorch:2.4
        python: /opt/envs/pytorch
      - id: tensorflow
        title: TensorFlow 2.17
        description: For the Keras exercises.
        contains: [TensorFlow 2.17, Keras 3]
        image: quay.io/campus/tensorflow:2.17
        python: /opt/envs/tensorflow
        requires: {cuda: "12.3", driver: "535.104"}
    courses:
      - id: ml101
        title: Machine Learning 101
        enrolment: {users: [ana]}
        gpu: {fraction: 1/4}
        environments: [pytorch, tensorflow]
        environment: {variables: {DATA: /data}}
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Mon, start: "10:00", end: "12:00"}]
      - id: stats
        title: Statistics
        enrolment: {users: [ana]}
        environment: {image: quay.io/campus/r:4.4}
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Mon, start: "10:00", end: "12:00"}]
"""

CLASS_TIME = at("2024-03-18 10:30")
ANA = UserIdentity("ana")


def gpu(cuda: str | None = None, driver: str | None = None) -> GPUDevice:
    return GPUDevice("GPU-0", 0, "RTX 4090", 24 * 1024, cuda=cuda, driver=driver)


@pytest.fixture
def catalog(catalog_from):
    return catalog_from(ENVIRONMENTS)


def start(catalog, pool, profile="ml101", **options):
    return admit(catalog, pool, ANA, profile, key="server:ana/", now=CLASS_TIME, **options)


def refusal(catalog, pool, profile="ml101", **options) -> Refusal:
    with pytest.raises(Refusal) as error:
        start(catalog, pool, profile, **options)
    return error.value


# -- the catalog ---------------------------------------------------------------------------


def test_a_course_offers_its_environments_in_the_order_written_and_others_offer_none(catalog):
    profiles = {e.profile.id: e.profile for e in evaluate(catalog, ANA, CLASS_TIME)}

    assert [e.id for e in profiles["ml101"].environments] == ["pytorch", "tensorflow"]
    assert profiles["ml101"].environments[1].requires.describe() == (
        "CUDA 12.3 or newer, NVIDIA driver 535.104 or newer"
    )
    # A profile without environments keeps its own image, as before
    assert profiles["stats"].environments == ()
    assert profiles["stats"].environment.image == "quay.io/campus/r:4.4"
    assert profiles["cpu"].environments == ()


def _only_problem(write_yaml, text: str):
    with pytest.raises(CatalogError) as error:
        load_catalog(write_yaml(text))
    assert len(error.value.problems) == 1, error.value
    return error.value.problems[0]


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(dedent(text).splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("change", "needle", "field", "words"),
    [
        pytest.param(
            ("environments: [pytorch, tensorflow]", "environments: [pytorch, tensorfow]"),
            "environments: [pytorch, tensorfow]",
            "courses[0].environments[1]",
            ["no environment with the id 'tensorfow'", "pytorch, tensorflow", "fix the id"],
            id="unknown-environment",
        ),
        pytest.param(
            ("environments: [pytorch, tensorflow]", "environments: [pytorch, pytorch]"),
            "environments: [pytorch, pytorch]",
            "courses[0].environments",
            ["lists pytorch more than once"],
            id="listed-twice",
        ),
        pytest.param(
            ('requires: {cuda: "12.3", driver: "535.104"}', "requires: {cuda: twelve}"),
            "requires: {cuda: twelve}",
            "environments[1].requires.cuda",
            ["expected a version of numbers and dots", "'twelve'"],
            id="bad-version",
        ),
        pytest.param(
            ("python: /opt/envs/pytorch", "python: envs/pytorch"),
            "python: envs/pytorch",
            "environments[0].python",
            ["absolute folder of a Python environment"],
            id="relative-python",
        ),
        pytest.param(
            (
                "environment: {variables: {DATA: /data}}",
                "environment: {image: quay.io/campus/old:1}",
            ),
            "environments: [pytorch, tensorflow]",
            "courses[0].environments",
            ["may not set image or python too"],
            id="own-image-and-a-choice",
        ),
    ],
)
def test_an_instructors_mistake_with_environments_is_located_and_explained(
    write_yaml, change, needle, field, words
):
    text = ENVIRONMENTS.replace(*change)
    problem = _only_problem(write_yaml, text)

    assert problem.field == field
    assert problem.line == _line_of(text, needle)
    for word in words:
        assert word in problem.message


def test_an_environment_with_nothing_to_run_is_refused(write_yaml):
    text = ENVIRONMENTS.replace(
        "        image: quay.io/campus/pytorch:2.4\n        python: /opt/envs/pytorch\n", ""
    )
    problem = _only_problem(write_yaml, text)

    assert problem.field == "environments[0]"
    assert "give an image (for Kubernetes) and/or python" in problem.message


def test_two_files_defining_the_same_environment_are_refused(tmp_path: Path):
    folder = tmp_path / "catalog"
    folder.mkdir()
    (folder / "a.yaml").write_text(dedent(ENVIRONMENTS))
    (folder / "b.yaml").write_text("environments:\n  - {id: pytorch, title: Again, image: x}\n")
    with pytest.raises(CatalogError) as error:
        load_catalog(folder)

    (problem,) = error.value.problems
    assert problem.path.name == "b.yaml" and problem.line == 2
    assert "environment id 'pytorch' is already used at" in problem.message


# -- admission: the pick, checked ---------------------------------------------------------


def test_the_student_picks_the_second_environment_and_the_start_runs_it(catalog):
    decision = start(catalog, CapacityPool([gpu()]), environment="tensorflow")

    assert decision.environment is not None
    assert decision.environment.image == "quay.io/campus/tensorflow:2.17"


def test_without_a_pick_the_first_environment_runs(catalog):
    assert start(catalog, CapacityPool([gpu()])).environment.id == "pytorch"
    assert start(catalog, CapacityPool([gpu()]), environment="").environment.id == "pytorch"


def test_a_profile_without_a_choice_runs_its_own_environment(catalog):
    assert start(catalog, CapacityPool([gpu()]), "stats").environment is None


@pytest.mark.parametrize(
    ("profile", "asked", "status", "words"),
    [
        ("ml101", "gpu-unlimited", 403, "Machine Learning 101 does not offer the environment"),
        ("ml101", "PyTorch", 403, "PyTorch 2.4 (pytorch), TensorFlow 2.17 (tensorflow)"),
        ("ml101", {"image": "evil:latest"}, 400, "must be one of the environment ids"),
        ("ml101", "x" * 5000, 400, "must be one of the environment ids"),
        ("stats", "pytorch", 400, "Statistics offers no choice of environment"),
    ],
)
def test_a_tampered_environment_is_refused_with_a_sentence_and_holds_nothing(
    catalog, profile, asked, status, words
):
    pool = CapacityPool([gpu()])
    refused = refusal(catalog, pool, profile, environment=asked)

    assert refused.status == status
    assert words in refused.message
    assert refused.message.endswith(".")
    assert not pool.held_by("ana")


def test_an_environment_no_gpu_here_can_run_is_refused_before_anything_is_booked(catalog):
    pool = CapacityPool([gpu(cuda="12.2", driver="535.104.05")])
    refused = refusal(catalog, pool, environment="tensorflow")

    assert refused.status == 409
    assert refused.message == (
        "The environment TensorFlow 2.17 needs CUDA 12.3 or newer, NVIDIA driver 535.104 or "
        "newer, and none of the GPUs Machine Learning 101 can use here can run it (GPU 0 "
        "(RTX 4090, 24 GiB): its driver supports CUDA 12.2). Choose another environment on "
        "the start page, or ask the hub admins which GPUs have a newer driver."
    )
    assert not pool.held_by("ana")
    # The other environment runs on the same GPU
    assert start(catalog, pool, environment="pytorch").allocation is not None


def test_the_pick_goes_to_a_gpu_whose_driver_can_run_it(catalog):
    # Given a GPU with an old driver, half used by Ben (where a quarter would pack best),
    # and an idle one with a newer driver
    old = GPUDevice("GPU-old", 0, "RTX 4090", 24 * 1024, cuda="12.2")
    new = GPUDevice("GPU-new", 1, "RTX 4090", 24 * 1024, cuda="12.4")
    pool = CapacityPool([old, new])
    bens = Allocation(
        "server:ben/", "ben", "ml101", "ml101", ("GPU-old",), Fraction(1, 2), 12 * 1024, 0
    )
    assert pool.restore(bens) == []
    # (a quarter without a requirement goes next to Ben's half)
    assert start(catalog, pool, environment="pytorch").allocation.device_ids == ("GPU-old",)
    pool.release("server:ana/")

    # When Ana picks TensorFlow (CUDA 12.3)
    tensorflow = start(catalog, pool, environment="tensorflow")

    # Then it goes to the newer GPU, where it can run
    assert tensorflow.allocation.device_ids == ("GPU-new",)


def test_a_gpu_that_meets_the_requirement_or_whose_versions_are_unknown_runs_it(catalog):
    assert start(
        catalog, CapacityPool([gpu(cuda="12.4", driver="550.54.15")]), environment="tensorflow"
    )
    assert start(catalog, CapacityPool([gpu()]), environment="tensorflow")


# -- the grant: what runs -----------------------------------------------------------------


@pytest.mark.parametrize("target", ["kubernetes", "local"])
def test_the_grant_runs_the_picked_environment_with_the_profiles_variables(write_yaml, target):
    admission = GPUAdmission(
        catalog_path=str(write_yaml(ENVIRONMENTS)),
        target=target,
        sharing_backend="time-slicing",
        sharing_backend_config={"replicas": 4, "gfd_labels": False},
    )
    grant = admission.grant_server(
        CapacityPool([gpu()]),
        ANA,
        "ml101",
        key="server:ana/",
        now=CLASS_TIME,
        environment="tensorflow",
    )

    assert (grant.image, grant.python) == ("quay.io/campus/tensorflow:2.17", "/opt/envs/tensorflow")
    assert grant.environment_id == "tensorflow"
    assert grant.variables == {"DATA": "/data"}
    assert grant.describe.startswith("Machine Learning 101 (TensorFlow 2.17): ")


# -- the spawn card -----------------------------------------------------------------------


def _cards(catalog, devices):
    return [ProfileCard.build(e, None, devices) for e in evaluate(catalog, ANA, CLASS_TIME)]


def test_the_card_offers_each_environment_with_its_title_and_description(catalog):
    page = render_profile_cards(_cards(catalog, [gpu()]), selected="ml101")

    group = re.search(
        r'<fieldset class="gpus-environments" data-environments="ml101">(.*?)</fieldset>',
        page,
        re.S,
    )
    assert group is not None
    radios = re.findall(
        r'<input type="radio" name="environment-ml101" value="([^"]+)"\s*(checked)?', group.group(1)
    )
    assert radios == [("pytorch", "checked"), ("tensorflow", "")]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", group.group(1)))
    assert (
        "PyTorch 2.4 For the deep learning labs. Contains PyTorch 2.4, torchvision, JupyterLab 4."
        in text
    )
    assert "Needs CUDA 12.3 or newer, NVIDIA driver 535.104 or newer." in text
    # Each radio is named by its title and described by its description, for screen readers
    assert 'aria-labelledby="gpus-env-title-ml101-tensorflow"' in group.group(1)
    assert 'id="gpus-env-about-ml101-tensorflow"' in group.group(1)
    # A profile without a choice shows none
    assert 'data-environments="stats"' not in page and 'name="environment-stats"' not in page


def test_the_last_pick_is_checked_again_and_one_no_gpu_here_can_run_is_disabled(catalog):
    page = render_profile_cards(
        _cards(catalog, [gpu()]), selected="ml101", selected_environment="tensorflow"
    )
    assert re.search(r'value="tensorflow"\s*checked', page)

    old_driver = render_profile_cards(
        _cards(catalog, [gpu(cuda="11.8")]), selected="ml101", selected_environment="tensorflow"
    )
    assert re.search(r'value="pytorch"\s*checked', old_driver)
    assert re.search(r'value="tensorflow"\s*disabled', old_driver)
    assert "Not available on this hub&#39;s GPUs: its driver supports CUDA 11.8." in old_driver


# -- gpuspawner check ---------------------------------------------------------------------


def test_check_lists_the_environments_and_who_offers_them(write_yaml, capsys):
    status = main(["check", str(write_yaml(ENVIRONMENTS)), "--from", "2024-03-18"])

    out, err = capsys.readouterr()
    assert status == 0
    assert "Environments: pytorch (the default), tensorflow" in out
    assert "  tensorflow: TensorFlow 2.17\n    Contains:    TensorFlow 2.17, Keras 3\n" in out
    assert "    Needs:       CUDA 12.3 or newer, NVIDIA driver 535.104 or newer\n" in out
    assert "    Offered by:  ml101\n" in out
    # /opt/envs/... are not on this machine: said once for each, at its python line
    text = dedent(ENVIRONMENTS)
    line = _line_of(text, "python: /opt/envs/tensorflow")
    assert (
        f":{line}: warning: environments[1].python: /opt/envs/tensorflow/bin/"
        "jupyterhub-singleuser is not on this machine"
    ) in err


def test_check_warns_about_a_gpu_requirement_on_a_profile_without_a_gpu(write_yaml, capsys):
    text = ENVIRONMENTS.replace(
        "        default: true\n", "        default: true\n        environments: [tensorflow]\n", 1
    )
    status = main(["check", str(write_yaml(text))])

    err = capsys.readouterr().err
    assert status == 0
    line = _line_of(text, "environments: [tensorflow]")
    assert (
        f":{line}: warning: standing[0].environments[0]: offers tensorflow, which needs CUDA "
        "12.3 or newer, NVIDIA driver 535.104 or newer, but gives no GPU"
    ) in err
