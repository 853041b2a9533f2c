"""Packaging for the campus GPU hub.

One distribution installs both Python packages: ``gpuspawner`` (the hub side: policy,
spawners, sessions service, spawn page) and ``jupyter_to_job`` (Run as Job). Tool
configuration (ruff, pytest, mypy) lives in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

# The JupyterLab extension is built by `make labextension` (labextension/ -> jupyter_to_job/
# labextension/) and shipped prebuilt: JupyterLab finds it in share/jupyter/labextensions/.
LABEXTENSION_NAME = "@campus-gpu-hub/jupyter-to-job"
LABEXTENSION_BUILD = Path("jupyter_to_job", "labextension")


def labextension_data_files() -> list[tuple[str, list[str]]]:
    """Map the built extension, and its install.json, under share/jupyter/labextensions/."""
    if not (LABEXTENSION_BUILD / "package.json").is_file():
        raise SystemExit(
            f"The JupyterLab extension is not built ({LABEXTENSION_BUILD} is missing). "
            "Run `make labextension` (or `cd labextension && jlpm install && jlpm build:prod`) "
            "and install again."
        )
    dest_root = Path("share", "jupyter", "labextensions", LABEXTENSION_NAME)
    by_dest: dict[str, list[str]] = {str(dest_root): ["labextension/install.json"]}
    for path in sorted(LABEXTENSION_BUILD.rglob("*")):
        if path.is_file():
            dest = dest_root / path.parent.relative_to(LABEXTENSION_BUILD)
            by_dest.setdefault(str(dest), []).append(str(path))
    return sorted(by_dest.items())


setup(
    name="campus-gpu-hub",
    version="0.1.0",
    description=(
        "JupyterHub front door that shares a few GPUs among many students: "
        "course-time GPU profiles, GPU shares and Run as Job."
    ),
    license="BSD-3-Clause",
    packages=find_packages(include=["gpuspawner*", "jupyter_to_job*"]),
    include_package_data=True,
    package_data={
        "gpuspawner": ["templates/*.html", "share_hooks/*.py"],
    },
    # The built extension is installed under share/ (data_files), not inside the package.
    exclude_package_data={"jupyter_to_job": ["labextension/*"]},
    data_files=[
        *labextension_data_files(),
        # Enables the jupyter_to_job server extension in every Jupyter server of this
        # environment (jupyterhub-singleuser included).
        (
            "etc/jupyter/jupyter_server_config.d",
            ["jupyter-config/jupyter_server_config.d/jupyter_to_job.json"],
        ),
    ],
    python_requires=">=3.11",
    install_requires=[
        "jupyterhub>=6.1,<7",
        "pyyaml>=6",
        "pydantic>=2.7,<3",
        "tzdata",
        "traitlets",
        "tornado",
        "jinja2",
        # NVML discovery of local GPUs; the import is guarded so machines without
        # an NVIDIA driver still work.
        "nvidia-ml-py",
        # GPUSpawner builds on KubeSpawner's public traits; pinned to its major version.
        "jupyterhub-kubespawner>=7.1,<8",
        "kubernetes_asyncio",
        # Run as Job: notebook execution, stores and wire models.
        "papermill>=2.6,<3",
        "nbclient>=0.10,<0.12",
        "nbconvert>=7",
        "nbformat>=5",
        "SQLAlchemy>=2,<3",
        "jupyter_server>=2.14,<3",
        "jupyter_client>=8",
        "psutil>=5.9",
    ],
    extras_require={
        "test": [
            "pytest",
            "pytest-asyncio",
            "requests",
            "ruff",
            "mypy",
            "types-PyYAML",
            "psycopg[binary]>=3.1",
            "oauthenticator>=17.4,<18",
        ],
        "lab": ["jupyterlab>=4.6,<5"],
        # Campus single sign-on (gpuspawner.sso, hub_config/sso/).
        "sso": ["oauthenticator>=17.4,<18"],
    },
    entry_points={
        "console_scripts": [
            "gpuspawner = gpuspawner.cli:main",
        ],
        "jupyterhub.authenticators": [
            "campus = gpuspawner.sso:CampusOAuthenticator",
        ],
        "jupyterhub.spawners": [
            "localgpu = gpuspawner.local:LocalGPUSpawner",
            "simplelocalgpu = gpuspawner.local:SimpleLocalGPUSpawner",
            "gpu = gpuspawner.kubernetes:GPUSpawner",
        ],
    },
    classifiers=[
        "Framework :: Jupyter",
        "Framework :: Jupyter :: JupyterLab :: 4",
        "Programming Language :: Python :: 3",
    ],
)
