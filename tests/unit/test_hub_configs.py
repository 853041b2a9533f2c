"""The shipped configurations parse and name settings the code accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuspawner.backends import BACKENDS, make_backend
from gpuspawner.policy import load_catalog

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "hub_config" / "kubernetes"


@pytest.mark.parametrize("overlay", sorted((K8S / "backends").glob("*.yaml")), ids=lambda p: p.stem)
def test_each_backend_overlay_builds_its_sharing_backend(overlay):
    settings = yaml.safe_load(overlay.read_text())["hub"]["config"]["GPUAdmission"]
    assert settings["sharing_backend"] == overlay.stem
    backend = make_backend(
        settings["sharing_backend"], **settings.get("sharing_backend_config", {})
    )
    assert backend is not None


def test_there_is_an_overlay_for_every_backend():
    assert {p.stem for p in (K8S / "backends").glob("*.yaml")} == set(BACKENDS)


def test_the_z2jh_values_and_rbac_parse():
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    assert values["hub"]["config"]["JupyterHub"]["spawner_class"] == (
        "gpuspawner.kubernetes.GPUSpawner"
    )
    kinds = [doc["kind"] for doc in yaml.safe_load_all((K8S / "rbac.yaml").read_text())]
    assert kinds == ["ClusterRole", "ClusterRoleBinding", *["Role", "RoleBinding"] * 4]
    kinds = [doc["kind"] for doc in yaml.safe_load_all((K8S / "job-service.yaml").read_text())]
    assert kinds.count("Deployment") == kinds.count("ServiceAccount") == 1


def test_the_demo_catalog_is_valid():
    catalog = load_catalog(ROOT / "hub_config" / "local" / "catalog.yaml")
    assert {c.id for c in catalog.courses} == {"ml101"}
    assert {f.id for f in catalog.flavors} == {"cpu-job", "whole-gpu"}


def test_the_binder_example_is_a_notebook_with_a_parameters_cell_and_standalone_mode():
    import nbformat

    notebook = nbformat.read(ROOT / "binder" / "example.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert any("parameters" in cell.metadata.get("tags", []) for cell in notebook.cells)
    post_build = (ROOT / "binder" / "postBuild").read_text()
    assert 'c.JobsExtensionApp.mode = "standalone"' in post_build
    assert (ROOT / "binder" / "postBuild").stat().st_mode & 0o111


def test_the_z2jh_values_write_no_role_by_hand():
    # Every role comes from the helper that documents it (sessions_service_role,
    # job_service_roles, course_roles), called in hub.extraConfig; test_z2jh_values.py runs
    # the chart's hub configuration and compares the roles it yields with theirs.
    for path in [K8S / "values.yaml", K8S / "sso.yaml", *(K8S / "backends").glob("*.yaml")]:
        assert "loadRoles" not in yaml.safe_load(path.read_text())["hub"], path
    extra_config = yaml.safe_load((K8S / "values.yaml").read_text())["hub"]["extraConfig"]
    assert 'sessions_service_role(job_service="jupyter-to-job")' in extra_config["campus-gpu-hub"]


def test_the_z2jh_sso_overlay_names_settings_the_authenticator_has():
    from gpuspawner.sso import CampusOAuthenticator

    settings = yaml.safe_load((K8S / "sso.yaml").read_text())["hub"]["config"]
    assert settings["JupyterHub"]["authenticator_class"] == "gpuspawner.sso.CampusOAuthenticator"
    traits = CampusOAuthenticator.class_traits(config=True)
    assert set(settings["CampusOAuthenticator"]) <= set(traits)
