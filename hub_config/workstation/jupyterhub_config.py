"""One shared GPU workstation in production: every person's server and jobs run as their own
system account, under their profile's CPU and memory limits.

Start it as root with ``sudo make demo-workstation`` (http://127.0.0.1:8000), which runs it
from a virtualenv of the system's Python in its runtime folder, made at the first start, so
that every account can run the hub's Python wherever the checkout's own lives. It is the
demo hub of hub_config/local (same users, courses, flavors and port variables), made safe
for a machine that several people share:

- **Accounts.** ``LocalGPUSpawner`` runs each server as the system account named like the
  hub user; the job service runs each job as the same account
  (``LocalExecutor.run_as = "owner"``), in the notebook's own folder. Accounts are made
  on first start for the demo users (``GPUSPAWNER_WORKSTATION_AUTH=demo``, the default);
  with ``pam`` people log in with the accounts the machine already has; with ``sso``
  through campus single sign-on (hub_config/sso and its variables), each person's account
  made at their first login.
- **Limits.** Profile and flavor ``resources`` become cgroups (``c.CgroupLimits``).
- **Secrets.** The hub, the job service and their files stay root's: the runtime folder
  can be crossed but not listed (0711), and everything in it is 0600/0700. The
  course-sessions service, which needs no root, runs as its own account
  (``gpuhub-services``) with a folder of its own; the experimental zone's daily wipe is
  done for it, as each person, by a root-owned helper it asks by user name.
- **GPUs.** NVML when the machine has GPUs, else the demo's simulated ones; one ledger for
  servers and jobs.

See hub_config/workstation/README.md for the account layout and the security model.
"""

import os
import sys
from pathlib import Path

from gpuspawner.core.accounts import ensure_account

c = get_config()  # noqa: F821

HERE = Path(__file__).resolve().parent
LOCAL_CONFIG = HERE.parent / "local" / "jupyterhub_config.py"
RUNTIME = Path(os.environ.get("GPUSPAWNER_DEMO_RUNTIME") or "/var/lib/campus-gpu-hub").resolve()
AUTH = os.environ.get("GPUSPAWNER_WORKSTATION_AUTH", "demo")
SERVICES_ACCOUNT = os.environ.get("GPUSPAWNER_SERVICES_ACCOUNT", "gpuhub-services")

if os.geteuid() != 0:
    sys.exit(
        "hub_config/workstation runs servers and jobs as each person's own system account, "
        "so the hub must run as root: sudo make demo-workstation. For a demo without root "
        "(and without isolation), use make demo."
    )
if AUTH not in ("demo", "pam", "sso"):
    sys.exit(f"GPUSPAWNER_WORKSTATION_AUTH must be 'demo', 'pam' or 'sso', not {AUTH!r}.")


def reachable_by_everyone(path: Path) -> Path | None:
    """The first folder above ``path`` that other accounts cannot cross, if any."""
    for folder in [path, *path.parents]:
        if folder.is_dir() and not folder.stat().st_mode & 0o001:
            return folder
    return None


# Servers and jobs run this Python and this project's code as the people themselves.
for needed in (Path(sys.executable).resolve().parent, Path(sys.prefix), HERE.parent.parent):
    blocked = reachable_by_everyone(needed)
    if blocked is not None:
        sys.exit(
            f"{needed} is inside {blocked}, which other accounts cannot enter, so no server "
            "or job could start. Start the hub from a virtualenv every account can read "
            "(sudo make demo-workstation builds one in its runtime folder from the system's "
            "Python; for the checkout itself, clone it outside root's home), or allow "
            f"entering that folder: chmod o+x {blocked}"
        )

# What the hub and the services make is theirs alone (the database, the cookie secret, the
# ledger, the job store, the pre-warm secret); the runtime folder can be crossed by the
# jobs (their own folders are inside it) but not listed.
os.umask(0o077)
RUNTIME.mkdir(parents=True, exist_ok=True)
RUNTIME.chmod(0o711)
os.environ["GPUSPAWNER_DEMO_RUNTIME"] = str(RUNTIME)

# -- the demo hub (with campus single sign-on: hub_config/sso over it), then what makes it
# safe to share. Each file runs on this same configuration object.
namespaces: list[dict] = []


def run_config(path: str | Path) -> None:
    namespace = {
        "get_config": get_config,  # noqa: F821
        "load_subconfig": run_config,
        "__file__": str(path),
        "__name__": "__config__",
    }
    namespaces.append(namespace)
    exec(compile(Path(path).read_text(), str(path), "exec"), namespace)


run_config(HERE.parent / "sso" / "jupyterhub_config.py" if AUTH == "sso" else LOCAL_CONFIG)
demo = next(namespace for namespace in namespaces if "JOB_SERVICE" in namespace)

c.JupyterHub.template_vars = {}  # the demo's "no isolation" warning does not apply here

# -- people and their accounts ---------------------------------------------------------------
if AUTH == "pam":
    c.JupyterHub.authenticator_class = "pam"
    c.Authenticator.allowed_users = set()
    c.Authenticator.admin_users = set(os.environ.get("GPUSPAWNER_ADMINS", "").split(",")) - {""}
elif AUTH == "sso":
    # Each person's account is made at their first login (hub_config/sso configures the rest).
    c.JupyterHub.authenticator_class = "gpuspawner.sso.LocalCampusOAuthenticator"
else:
    for name in sorted(c.Authenticator.allowed_users):
        ensure_account(name)

# -- servers: as their owner, within their profile's limits ---------------------------------
# The demo's admission (c.GPUAdmission: catalog, GPUs, ledger) serves this spawner as it is.
c.JupyterHub.spawner_class = "gpuspawner.local.LocalGPUSpawner"
c.GPUAdmission.gpu_inventory = "auto"  # NVML when there are GPUs, else the simulated ones
c.CgroupLimits.enforce = os.environ.setdefault("GPUSPAWNER_CGROUPS", "auto")

# Instructors and services read the catalog; nobody but the hub writes it.
catalog = Path(c.GPUAdmission.catalog_path)
catalog.chmod(0o755)
for file in catalog.iterdir():
    file.chmod(0o644)

# -- jobs: as their owner, beside their notebook --------------------------------------------
jobs = demo["JOB_SERVICE"]
jobs["environment"]["JUPYTER_TO_JOB_RUN_AS"] = "owner"
# Notebook paths start in each owner's home (their server's folder), not a demo folder.
jobs["environment"].pop("JUPYTER_TO_JOB_NOTEBOOK_DIR", None)
jobs["environment"]["GPUSPAWNER_CGROUPS"] = c.CgroupLimits.enforce

# -- the course-sessions service: no root, its own account and folder ------------------------
sessions = demo["SESSIONS_SERVICE"]
account = ensure_account(SERVICES_ACCOUNT, service=True)
sessions_dir = RUNTIME / "course-sessions"
sessions_dir.mkdir(exist_ok=True)
os.chown(sessions_dir, account.uid, account.gid)
sessions_dir.chmod(0o700)
sessions["user"] = SERVICES_ACCOUNT
sessions["cwd"] = str(sessions_dir)
command = sessions["command"]
command[command.index("--audit-log") + 1] = str(sessions_dir / "course-sessions.jsonl")
# The GPU ledger is root's alone (0600), so this account cannot tell which server holds
# which GPU: no idle reclaim here (expired grants, unopened pre-warms and class ends are
# still reclaimed, with warnings). Giving it read access would show it every holder.
for flag in ("--allocation-ledger", "--gpu-readings"):
    if flag in command:
        del command[command.index(flag) : command.index(flag) + 2]
# Nor may it read the experimental zone: each person's folder there is theirs alone (0700).
# A root-owned helper started by the hub warns about and empties each folder as its owner,
# asked by this account through a socket only it may open, with a user name, never a path
# (gpuspawner/zone_wipe_helper.py says why this design). The service gets the socket
# instead of the folder.
if "--experimental-root" in command:
    del command[command.index("--experimental-root") : command.index("--experimental-root") + 2]
ZONE = Path(c.GPUAdmission.experimental_root)
ZONE.mkdir(exist_ok=True)
ZONE.chmod(0o711)  # crossed by every owner to reach their folder, listed by none
ZONE_WIPE_SOCKET = RUNTIME / "zone-wipe" / "wipe.sock"
command += ["--experimental-wipe-helper", str(ZONE_WIPE_SOCKET)]
c.JupyterHub.services.append(
    {
        "name": "experimental-zone-wipe",
        # As root (the hub's account); it drops to each person for the work in their folder.
        "command": [
            sys.executable,
            "-m",
            "gpuspawner.zone_wipe_helper",
            *("--root", str(ZONE), "--socket", str(ZONE_WIPE_SOCKET)),
            *("--client-account", SERVICES_ACCOUNT, "--catalog", str(catalog)),
        ],
    }
)
