"""Environments to choose from, on a real JupyterHub with LocalGPUSpawner and real servers.

A course offers two Python environments: the hub's own and a course venv made here with
``python -m venv --system-site-packages``. Ana picks the second on the spawn card, and her
server runs on that venv's Python (its process, and a kernel of it, say so); an environment
the course does not offer is refused with a sentence, through the form and the REST API.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from datetime import timedelta
from pathlib import Path

import pytest

from ..support.course_catalogs import catalog, course, minute, now, spawner_config, write_catalog
from ..support.hub_pages import cards, page_error
from ..support.kernels import run_in_kernel

pytestmark = pytest.mark.integration

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'
HUB_PYTHON = Path(sys.prefix)


def course_venv(folder: Path) -> Path:
    """A real venv for the course: made by ``venv`` with the system site-packages, and given
    the hub's packages (JupyterHub, JupyterLab) through a ``.pth`` file instead of an install
    (the test machine has no package index), with the ``jupyterhub-singleuser`` launcher pip
    would write and JupyterLab's data and settings folders (links to the hub's). Its own
    ``bin/python`` runs it, so ``sys.prefix`` is the venv."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
        check=True,
    )
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "hub-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    launcher = folder / "bin" / "jupyterhub-singleuser"
    launcher.write_text(
        f"#!{python}\nimport sys\nfrom jupyterhub.singleuser import main\nsys.exit(main())\n"
    )
    launcher.chmod(0o755)
    # JupyterLab's pages and its server extension's settings, as an install would put them.
    for shared in ("share/jupyter", "etc/jupyter"):
        (folder / shared).parent.mkdir(parents=True, exist_ok=True)
        (folder / shared).symlink_to(Path(sys.prefix, shared), target_is_directory=True)
    return folder


def environments_catalog(catalog_dir: Path, venv: Path) -> None:
    """ML101 in class now for Ana, offering the hub's Python first and the course venv second."""
    t = minute(now())
    text = catalog(
        course(
            "ml101", start=t - timedelta(minutes=5), end=t + timedelta(minutes=90), students=["ana"]
        )
        + "    environments: [hub-python, course-venv]\n"
    )
    text += f"""\
environments:
  - id: hub-python
    title: Hub Python
    description: The Python the hub runs on.
    contains: [JupyterLab 4]
    python: {HUB_PYTHON}
  - id: course-venv
    title: Course venv
    description: The course's own virtual environment.
    contains: [NumPy, JupyterLab 4]
    python: {venv}
"""
    write_catalog(catalog_dir, text)


def server_command_line(hub, user: str) -> list[str]:
    state = hub.api("GET", f"/users/{user}").json()["servers"][""]["state"]
    raw = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def test_a_student_picks_the_second_environment_and_the_server_runs_its_python(
    start_hub, browserless_user, tmp_path
):
    # Given ML101, in class now, offering the hub's Python and a course venv
    venv = course_venv(tmp_path / "course-venv")
    catalog_dir = tmp_path / "catalog"
    environments_catalog(catalog_dir, venv)
    hub = start_hub(spawner_config(catalog_dir, ONE_GPU))
    ana = browserless_user(hub, "ana")
    ana.login()

    # When Ana opens the spawn page
    page = ana.get_spawn_page().text

    # Then the ML101 card offers both, by title and description, the first chosen
    assert cards(page)["ml101"]["available"] is True
    offered = re.findall(r'name="environment-ml101" value="([^"]+)"\s*(checked)?', page)
    assert offered == [("hub-python", "checked"), ("course-venv", "")]
    text = cards(page)["ml101"]["text"]
    assert "Course venv" in text and "The course's own virtual environment." in text

    # When she picks the second and starts
    started = ana.post_spawn_form(
        {"profile": "ml101", "environment-ml101": "course-venv", "environment-cpu": "x"}
    )
    assert started.status_code == 200, page_error(started.text)
    ana.wait_ready()

    # Then her server's process is the venv's Python, and so is a kernel of it
    command = server_command_line(hub, "ana")
    assert command[:2] == [
        str(venv / "bin" / "python"),
        str(venv / "bin" / "jupyterhub-singleuser"),
    ]
    printed = run_in_kernel(ana.server_url(), ana.token, "import sys; print(sys.prefix)")
    assert printed.strip() == str(venv)
    # And it serves JupyterLab
    lab = ana.get_from_server("lab")
    assert lab.status_code == 200 and "JupyterLab" in lab.text
    # And the hub recorded the choice with the server
    assert (
        hub.api("GET", "/users/ana").json()["servers"][""]["state"]["gpuspawner"]["environment"]
        == "course-venv"
    )

    # When she stops it and starts again without choosing (the REST API)
    ana.stop_server()
    assert ana.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    ana.wait_ready()

    # Then the first environment runs: the venv's choice did not stick to her server
    assert server_command_line(hub, "ana")[1] == str(HUB_PYTHON / "bin" / "jupyterhub-singleuser")
    ana.stop_server()


def test_an_environment_the_course_does_not_offer_is_refused_with_a_sentence(
    start_hub, browserless_user, tmp_path
):
    # Given ML101 offering two environments
    catalog_dir = tmp_path / "catalog"
    environments_catalog(catalog_dir, tmp_path / "not-made-venv")
    hub = start_hub(spawner_config(catalog_dir, ONE_GPU))
    ana = browserless_user(hub, "ana")
    ana.login()

    # When Ana edits the form to ask for another environment
    page = ana.post_spawn_form({"profile": "ml101", "environment-ml101": "root-shell"})

    # Then the start is refused with what to choose instead
    assert page.status_code == 403
    assert page_error(page.text).endswith(
        "ML101 does not offer the environment 'root-shell'. Choose one of its environments "
        "on the start page: Hub Python (hub-python), Course venv (course-venv)."
    )

    # And through the REST API: an id not offered, an image in place of an id, or an
    # environment for a profile without a choice
    for options, status, words in [
        ({"profile": "ml101", "environment": "root-shell"}, 403, "does not offer the environment"),
        ({"profile": "ml101", "environment": {"image": "evil"}}, 400, "environment ids"),
        ({"profile": "cpu", "environment": "course-venv"}, 400, "offers no choice of environment"),
    ]:
        response = ana.spawn_via_api(options)
        assert response.status_code == status, (options, response.text)
        assert words in response.json()["message"], (options, response.text)
    assert ana.model()["servers"] == {}
