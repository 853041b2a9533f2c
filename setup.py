"""Packaging for the campus GPU hub.

One distribution installs both Python packages: ``gpuspawner`` (the hub side: policy,
spawners, sessions service, spawn page) and ``jupyter_to_job`` (Run as Job). Tool
configuration (ruff, pytest, mypy) lives in pyproject.toml.

What to install where:

- a user's server image: ``pip install 'campus-gpu-hub[singleuser]'``: the server extension,
  the in-job runner, the JupyterLab extension, JupyterLab and ``jupyterhub-singleuser``; no
  KubeSpawner, no kubernetes_asyncio, no database drivers;
- the hub: ``pip install 'campus-gpu-hub[hub]'`` (add ``sso`` for campus single sign-on):
  the spawners, the job service and the course-sessions service.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# The JupyterLab extension is built from labextension/ into jupyter_to_job/labextension/
# (`make labextension`, or by this file when a wheel is built from a clean source tree) and
# shipped prebuilt: JupyterLab finds it in share/jupyter/labextensions/.
LABEXTENSION_NAME = "@campus-gpu-hub/jupyter-to-job"
LABEXTENSION_SOURCES = Path("labextension")
LABEXTENSION_BUILD = Path("jupyter_to_job", "labextension")
MINIMUM_NODE_MAJOR = 20

# Enables the jupyter_to_job server extension in every Jupyter server of this environment
# (jupyterhub-singleuser included).
SERVER_EXTENSION_CONFIG = (
    "etc/jupyter/jupyter_server_config.d",
    ["jupyter-config/jupyter_server_config.d/jupyter_to_job.json"],
)

# JupyterLab's defaults for this hub's servers (the user image, binder, the demo): the
# theme follows the system's light or dark scheme, as the hub's pages do, and no "Jupyter
# news?" popup. Each person can still change both in Settings.
LAB_SETTINGS_OVERRIDES = (
    "share/jupyter/lab/settings/overrides.d",
    ["jupyter-config/lab/settings/overrides.d/campus-gpu-hub.json"],
)


def labextension_is_built() -> bool:
    return (LABEXTENSION_BUILD / "package.json").is_file()


def labextension_data_files() -> list[tuple[str, list[str]]]:
    """Map the built extension, and its install.json, under share/jupyter/labextensions/."""
    dest_root = Path("share", "jupyter", "labextensions", LABEXTENSION_NAME)
    by_dest: dict[str, list[str]] = {str(dest_root): [str(LABEXTENSION_SOURCES / "install.json")]}
    for path in sorted(LABEXTENSION_BUILD.rglob("*")):
        if path.is_file():
            dest = dest_root / path.parent.relative_to(LABEXTENSION_BUILD)
            by_dest.setdefault(str(dest), []).append(str(path))
    return sorted(by_dest.items())


def data_files() -> list[tuple[str, list[str]]]:
    """The built extension, when there is one yet, the server extension's config and
    JupyterLab's settings overrides."""
    built = labextension_data_files() if labextension_is_built() else []
    return [*built, SERVER_EXTENSION_CONFIG, LAB_SETTINGS_OVERRIDES]


def node_major_version(node: str) -> int:
    """The major version of the Node.js at ``node`` (0 when it cannot say)."""
    done = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    found = re.match(r"v(\d+)\.", done.stdout.strip())
    return int(found.group(1)) if found else 0


def build_labextension() -> None:
    """Build the JupyterLab extension as `make labextension` does (jlpm build:prod)."""
    node = shutil.which("node")
    if node is None or node_major_version(node) < MINIMUM_NODE_MAJOR:
        found = "no Node.js" if node is None else f"Node.js {node_major_version(node)}"
        raise SystemExit(
            f"campus-gpu-hub's JupyterLab extension ({LABEXTENSION_BUILD}) is not built, and "
            f"building it needs Node.js {MINIMUM_NODE_MAJOR} or newer; this machine has "
            f"{found} on its PATH. Install Node.js {MINIMUM_NODE_MAJOR}+ and run pip again, "
            "or install a released wheel of campus-gpu-hub, which carries the built extension."
        )
    # jlpm comes with jupyter_builder, which pyproject.toml lists as a build requirement.
    jlpm = shutil.which("jlpm") or shutil.which("jlpm", path=str(Path(sys.executable).parent))
    if jlpm is None:
        raise SystemExit(
            "Building campus-gpu-hub's JupyterLab extension needs jlpm, which comes with the "
            "jupyter_builder package: `pip install jupyter_builder` (or build with pip's "
            "default build isolation, which installs it) and run pip again."
        )
    print(f"Building the JupyterLab extension in {LABEXTENSION_SOURCES}/ with {jlpm}")
    if not (LABEXTENSION_SOURCES / "node_modules").is_dir():
        subprocess.run([jlpm, "install", "--immutable"], cwd=LABEXTENSION_SOURCES, check=True)
    subprocess.run([jlpm, "build:prod"], cwd=LABEXTENSION_SOURCES, check=True)
    if not labextension_is_built():
        raise SystemExit(
            f"`jlpm build:prod` in {LABEXTENSION_SOURCES}/ finished without writing "
            f"{LABEXTENSION_BUILD}/package.json; run it by hand to see what went wrong."
        )


class BuildPyWithLabextension(build_py):
    """Build the JupyterLab extension first when the source tree has no build of it.

    The same rule as the JupyterLab extension template's build hook: an existing build is
    used as it is (`make labextension` keeps it fresh), a missing one is built.
    """

    def run(self) -> None:
        if not labextension_is_built():
            build_labextension()
            self.distribution.data_files = data_files()
        super().run()


# The shared core and the job side: what every environment needs, a user's server included.
# The server extension, the in-job runner, the policy modules and the job store.
CORE_REQUIRES = [
    "pyyaml>=6",
    "pydantic>=2.7,<3",
    "tzdata",
    "traitlets",
    "tornado",
    # Run as Job: notebook execution, stores and wire models.
    "papermill>=2.6,<3",
    "nbclient>=0.10,<0.12",
    "nbconvert>=7",
    "nbformat>=5",
    "SQLAlchemy>=2,<3",
    "jupyter_server>=2.14,<3",
    "jupyter_client>=8",
    "psutil>=5.9",
    # Schedules: the slots of a cron expression (jupyter_to_job/schedules/).
    "croniter>=6,<8",
]

JUPYTERHUB = "jupyterhub>=6.1,<7"
JUPYTERLAB = "jupyterlab>=4.6,<5"
OAUTHENTICATOR = "oauthenticator>=17.4,<18"
POSTGRES_DRIVER = "psycopg[binary]>=3.1"

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
        "jupyter_to_job": ["service/templates/*.html"],
    },
    # The built extension is installed under share/ (data_files), not inside the package.
    exclude_package_data={"jupyter_to_job": ["labextension/*"]},
    data_files=data_files(),
    cmdclass={"build_py": BuildPyWithLabextension},
    python_requires=">=3.11",
    install_requires=CORE_REQUIRES,
    extras_require={
        # A user's server: JupyterLab with the Run as Job extension, started by the hub,
        # and TensorBoard behind the server's login (jupyter_to_job/extension/tensorboard.py):
        # jupyter-server-proxy's handler, TensorBoard itself, and tensorboardX, the summary
        # writer without TensorFlow or torch that notebooks (and the browser test) write with.
        "singleuser": [
            JUPYTERHUB,
            JUPYTERLAB,
            "jupyter-server-proxy>=4.6,<5",
            "tensorboard>=2.21,<3",
            "tensorboardX>=2.6,<3",
        ],
        # The hub: spawners, the job service, the course-sessions service, the spawn page.
        "hub": [
            JUPYTERHUB,
            "jinja2",
            # NVML discovery of local GPUs; the import is guarded so machines without
            # an NVIDIA driver still work.
            "nvidia-ml-py",
            # GPUSpawner builds on KubeSpawner's public traits; pinned to its major version.
            "jupyterhub-kubespawner>=7.1,<8",
            "kubernetes_asyncio",
            # The job service's store on PostgreSQL (c.JobServiceApp.db_url).
            POSTGRES_DRIVER,
            # Metrics of the hub side and the job service (gpuspawner/metrics.py,
            # jupyter_to_job/metrics.py); JupyterHub brings it too, the job service uses it.
            "prometheus_client",
        ],
        # Campus single sign-on (gpuspawner.sso, hub_config/sso/).
        "sso": [JUPYTERHUB, OAUTHENTICATOR],
        # JupyterLab alone, for standalone Run as Job on a laptop or Binder.
        "lab": [JUPYTERLAB],
        "test": [
            "pytest",
            "pytest-asyncio",
            "requests",
            "ruff",
            "mypy",
            "types-PyYAML",
            # The typed modules reach psutil (the ledger's slice holders, through the metrics).
            "types-psutil",
            # `make lint` checks the import contracts in pyproject.toml with lint-imports.
            "import-linter>=2.17,<3",
            # Rendered manifests are checked against the real Kubernetes OpenAPI schemas.
            "kubernetes-validate",
            POSTGRES_DRIVER,
            OAUTHENTICATOR,
            # A real SMTP server receives the job service's finish mails in tests.
            "aiosmtpd",
            # What Zero to JupyterHub's hub image (k8s-hub) brings beside JupyterHub, which the
            # chart's own hub configuration uses: the test cluster's node runs the hub image
            # from this virtualenv (tests/support/cluster/images.py).
            "pycurl",
            "jupyterhub-idle-culler",
        ],
    },
    entry_points={
        "console_scripts": [
            "gpuspawner = gpuspawner.cli:main",
        ],
        "jupyterhub.authenticators": [
            "campus = gpuspawner.sso:CampusOAuthenticator",
        ],
        "jupyterhub.spawners": [
            "localgpu = gpuspawner.spawners.local:LocalGPUSpawner",
            "simplelocalgpu = gpuspawner.spawners.local:SimpleLocalGPUSpawner",
            "gpu = gpuspawner.spawners.kubernetes:GPUSpawner",
        ],
    },
    classifiers=[
        "Framework :: Jupyter",
        "Framework :: Jupyter :: JupyterLab :: 4",
        "Programming Language :: Python :: 3",
    ],
)
