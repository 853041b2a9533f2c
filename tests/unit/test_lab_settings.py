"""Scenarios: JupyterLab in this hub's servers (the user image, binder, the demo) follows
the system's light or dark scheme, as the hub's pages do, and asks no "Jupyter news?".

The defaults are JupyterLab settings overrides that the package installs into
``share/jupyter/lab/settings/overrides.d/``, where JupyterLab reads them for every server of
the environment (jupyterlab_server's ``get_settings``, as its settings API answers). The
browser side is tests/ui/hub-tests/lab-scheme.spec.ts.
"""

from __future__ import annotations

import distutils.core
import json
import shutil
from pathlib import Path

from jupyterlab.commands import get_app_dir
from jupyterlab_server.settings_utils import get_settings

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES = "campus-gpu-hub.json"
THEMES = "@jupyterlab/apputils-extension:themes"
NOTIFICATIONS = "@jupyterlab/apputils-extension:notification"


def composite(app_settings_dir: Path, user_settings_dir: Path, plugin: str) -> dict:
    """The settings of ``plugin`` in force: the schema's defaults as JupyterLab's settings
    API gives them to the page (with the overrides applied), under the person's own."""
    schemas = Path(get_app_dir()) / "schemas"
    answer, _warnings = get_settings(
        str(app_settings_dir), str(schemas), str(user_settings_dir), schema_name=plugin
    )
    defaults = {
        name: field["default"]
        for name, field in answer["schema"]["properties"].items()
        if "default" in field
    }
    return {**defaults, **answer["settings"]}


def installed_prefix(tmp_path: Path, monkeypatch) -> Path:
    """What installing the package puts under a fresh prefix, from setup.py's data_files
    (all but the built extension)."""
    monkeypatch.chdir(ROOT)
    dist = distutils.core.run_setup(str(ROOT / "setup.py"), stop_after="init")
    prefix = tmp_path / "prefix"
    for destination, files in dist.data_files:
        if "labextensions" in destination:
            continue
        (prefix / destination).mkdir(parents=True, exist_ok=True)
        for file in files:
            shutil.copy(ROOT / file, prefix / destination)
    return prefix


def test_an_installed_jupyterlab_follows_the_systems_scheme_and_fetches_no_news(
    tmp_path, monkeypatch
):
    # Given the package installed into an environment, and a person with no settings yet
    prefix = installed_prefix(tmp_path, monkeypatch)
    app_settings = prefix / "share" / "jupyter" / "lab" / "settings"
    nobody = tmp_path / "user-settings"

    # When their JupyterLab reads its settings
    themes = composite(app_settings, nobody, THEMES)
    notifications = composite(app_settings, nobody, NOTIFICATIONS)

    # Then the theme follows the system (light or dark), and the news is never fetched
    assert themes["adaptive-theme"] is True
    assert themes["preferred-dark-theme"] == "JupyterLab Dark"
    assert themes["preferred-light-theme"] == "JupyterLab Light"
    assert notifications["fetchNews"] == "false"
    assert notifications["checkForUpdates"] is False


def test_a_persons_own_choice_still_wins(tmp_path, monkeypatch):
    # Given someone who chose the dark theme, always, and to be asked about news
    prefix = installed_prefix(tmp_path, monkeypatch)
    user_settings = tmp_path / "user-settings" / "@jupyterlab" / "apputils-extension"
    user_settings.mkdir(parents=True)
    (user_settings / "themes.jupyterlab-settings").write_text(
        json.dumps({"adaptive-theme": False, "theme": "JupyterLab Dark"})
    )
    (user_settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "none"})
    )

    # When their JupyterLab reads its settings
    app_settings = prefix / "share" / "jupyter" / "lab" / "settings"
    themes = composite(app_settings, tmp_path / "user-settings", THEMES)
    notifications = composite(app_settings, tmp_path / "user-settings", NOTIFICATIONS)

    # Then theirs are kept: the overrides are defaults, not locks
    assert themes["adaptive-theme"] is False and themes["theme"] == "JupyterLab Dark"
    assert notifications["fetchNews"] == "none"


def test_the_demos_jupyterlab_reads_the_same_overrides():
    # The demo's servers run from this environment (`make setup` puts the file there, as
    # an install from the wheel does): the file JupyterLab reads is the package's.
    installed = Path(get_app_dir()) / "settings" / "overrides.d" / OVERRIDES
    shipped = ROOT / "jupyter-config" / "lab" / "settings" / "overrides.d" / OVERRIDES
    assert installed.is_file(), f"{installed} is missing: run make setup"
    assert json.loads(installed.read_text()) == json.loads(shipped.read_text())
