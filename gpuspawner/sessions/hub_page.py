"""The service's pages in the hub's own frame: JupyterHub's ``page.html`` (its header,
navigation, dark-mode toggle and sign-out), extended as the hub's own pages are.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.hub_page".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import (
    ChoiceLoader,
    Environment,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    select_autoescape,
)
from markupsafe import Markup, escape

from gpuspawner.local_times import time_element

from .hub_client import HubClient, HubUnavailable

log = logging.getLogger("gpuspawner.sessions.hub_page")


def _hub_templates() -> str:
    """The installed JupyterHub's own templates (its ``data_files_path``'s default)."""
    from jupyterhub.app import JupyterHub

    return str(Path(JupyterHub.class_traits()["data_files_path"].default()) / "templates")


templates = Environment(
    loader=ChoiceLoader(
        [
            PackageLoader("gpuspawner", "templates"),
            PrefixLoader({"templates": FileSystemLoader(_hub_templates())}),
        ]
    ),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def local_time(text: str) -> Markup:
    """A moment the hub wrote as ISO 8601 text (an audit entry's, a job's creation) as a
    ``<time>`` the page tells in its reader's zone: "2026-11-28 12:16 UTC" until then. A
    time without a zone is UTC; text that is no time stays as it is."""
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return escape(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return time_element(moment, f"{moment.astimezone(UTC):%Y-%m-%d %H:%M}", UTC)


templates.filters["local_time"] = local_time


@dataclass(frozen=True)
class PageUser:
    """The viewer as ``page.html`` reads them."""

    name: str

    @property
    def json_escaped_name(self) -> str:
        return json.dumps(self.name)[1:-1]


@dataclass(frozen=True)
class MenuService:
    """A service as the Services menu of ``page.html`` reads it."""

    name: str
    href: str
    info: dict[str, Any] = field(default_factory=dict)


def menu_services(listed: dict[str, dict], scopes: Iterable[str]) -> list[MenuService]:
    """The services of ``listed`` (the hub's service models) that a viewer holding
    ``scopes`` may open, as JupyterHub's own pages choose them
    (``BaseHandler.get_accessible_services``): with an address, shown, and
    ``access:services`` on all or on that service."""
    held = set(scopes)
    menu = []
    for name, model in sorted(listed.items()):
        href = model.get("prefix") or model.get("url")
        if not model.get("url") or not model.get("display") or not href:
            continue
        if not held & {"access:services", f"access:services!service={name}"}:
            continue
        menu.append(MenuService(name, href, dict(model.get("info") or {})))
    return menu


async def viewer_services(client: HubClient, viewer: dict[str, Any] | None) -> list[MenuService]:
    """The Services menu of ``viewer`` (the hub's model of them, from their OAuth token,
    whose ``scopes`` are the token's); empty when the hub does not answer, as the page
    can do without it."""
    if not viewer:
        return []
    try:
        listed = await client.list_services()
    except HubUnavailable as error:
        log.warning("The Services menu is left out: %s", error)
        return []
    return menu_services(listed, viewer.get("scopes") or ())


def page_vars(
    hub_prefix: str,
    viewer: dict[str, Any] | None,
    xsrf_token: str,
    services: Iterable[MenuService] = (),
) -> dict[str, Any]:
    """What ``page.html`` needs, for ``viewer`` (the hub's user model; None: signed out).
    ``hub_prefix``: the hub's pages, ``/hub/``; ``services``: the viewer's Services menu
    (:func:`viewer_services`)."""
    admin = bool(viewer and viewer.get("admin"))

    def static_url(path: str, include_version: bool = True) -> str:
        return f"{hub_prefix}static/{path}"

    return {
        "base_url": hub_prefix,
        "prefix": hub_prefix.removesuffix("hub/") or "/",
        "static_url": static_url,
        "user": PageUser(str(viewer["name"])) if viewer else None,
        "admin_access": admin,
        "parsed_scopes": {"admin-ui"} if admin else set(),
        "no_spawner_check": True,
        "xsrf_token": xsrf_token,
        "logout_url": f"{hub_prefix}logout",
        "login_url": f"{hub_prefix}login",
        "logo_url": f"{hub_prefix}home",
        "services": list(services),
    }
