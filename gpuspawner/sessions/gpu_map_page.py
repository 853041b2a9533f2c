"""The GPU map page of the course-sessions service: every GPU, who holds which slice.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.gpu_map_page".
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from tornado import web

from gpuspawner.core.telemetry import DeviceReading
from gpuspawner.gpu_map import gpu_map_json, map_viewer
from gpuspawner.holder_use import use_by_holder
from gpuspawner.policy import Catalog

from .course_api import CourseAPI, identity_of
from .gpu_pools import GPUPoolSource
from .hub_page import page_vars, templates, viewer_services

log = logging.getLogger("gpuspawner.sessions.gpu_map")

POLL_SECONDS = 5


def catalog_titles(catalog: Catalog | None) -> dict[str, str]:
    """Titles of courses, research allocations, standing profiles and job flavors by id:
    the labels of anonymous slices."""
    if catalog is None:
        return {}
    titles: dict[str, str] = {}
    for profile in [*catalog.flavors, *catalog.standing, *catalog.research, *catalog.courses]:
        titles[profile.id] = profile.title  # a course's title wins over a flavor's
    return titles


class GPUMap:
    """What the handlers share: the catalog (through the course API) and the pool source."""

    def __init__(self, api: CourseAPI, source: GPUPoolSource | None):
        self.api = api
        self.source = source
        self._readings: tuple[float, list[DeviceReading]] | None = None

    async def readings(self) -> list[DeviceReading]:
        """The source's GPU readings, read again at most once per refresh period (NVML or
        Prometheus is not asked once per viewer); none without telemetry, or on failure."""
        telemetry = self.source.telemetry if self.source is not None else None
        if telemetry is None:
            return []
        now = time.monotonic()
        if self._readings is None or now - self._readings[0] >= POLL_SECONDS:
            try:
                found = await asyncio.to_thread(telemetry.read)
            except (OSError, RuntimeError, ValueError) as error:
                log.warning("GPU map: the GPUs' readings could not be read: %s", error)
                found = []
            self._readings = (now, found)
        return self._readings[1]

    def catalog(self) -> Catalog | None:
        return self.api.service.catalog.current(self.api.service.clock())

    async def picture(self, user: dict[str, Any]) -> dict[str, Any]:
        """The map as ``user`` (a hub user model) may see it."""
        if self.source is None:
            raise web.HTTPError(
                404,
                "This hub shows no GPU map: the course-sessions service knows neither the "
                "allocation ledger (one machine) nor a Kubernetes namespace. The hub admins "
                "can give it one (course_sessions_service(allocation_ledger=...) or "
                "kubernetes_namespace=...).",
            )
        catalog = self.catalog()
        pool = await self.source.read()
        readings = await self.readings()
        picture = gpu_map_json(
            pool,
            map_viewer(catalog, identity_of(user)),
            titles=catalog_titles(catalog),
            readings=readings,
            uses=use_by_holder(readings, pool),
        )
        picture["where"] = self.source.where
        picture["refresh_seconds"] = POLL_SECONDS
        picture["generated_at"] = self.api.service.clock().isoformat()
        return picture


def gpu_map_handlers(prefix: str, gpu_map: GPUMap, hub_auth: Any) -> list[tuple]:
    """The page, its JSON API and the service root's way to the page, under ``prefix``.

    The OAuth callback is registered with the reclaim page's handlers.
    """
    from jupyterhub.services.auth import HubOAuthenticated

    base = prefix.rstrip("/")

    class GPUMapAPI(HubOAuthenticated, web.RequestHandler):
        """``GET``: the JSON picture; 401/403 with a sentence, never a login redirect."""

        def initialize(self) -> None:
            self.hub_auth = hub_auth

        def _refuse(self, status: int, message: str, reason: str) -> None:
            self.set_status(status)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"status": status, "message": message, "reason": reason}))

        async def get(self) -> None:
            user = self.current_user
            if user is None:
                if self.hub_auth.get_token(self):
                    self._refuse(
                        403,
                        "This request may not read the GPU map: its token or account has "
                        "no access to the course-sessions service, or (a page's script) it "
                        "lacks the page's XSRF token. Reload the page, or ask the hub "
                        "admins for access.",
                        "missing-scope",
                    )
                else:
                    self._refuse(
                        401,
                        "Sign in to the hub, or send a hub token: Authorization: token "
                        "<your token> (make one on the hub's Token page).",
                        "no-token",
                    )
                return
            try:
                picture = await gpu_map.picture(user)
            except web.HTTPError as error:
                self._refuse(error.status_code, error.log_message or "", "no-gpu-map")
                return
            self.set_header("Content-Type", "application/json")
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps(picture))

    class GPUMapPage(HubOAuthenticated, web.RequestHandler):
        """``GET``: the page, drawn from the same JSON the page then polls."""

        def initialize(self) -> None:
            self.hub_auth = hub_auth

        @web.authenticated
        async def get(self) -> None:
            picture = await gpu_map.picture(self.current_user)
            # In a <script> element: no "<" may end it early.
            initial = json.dumps(picture).replace("<", "\\u003c")
            self.set_header("Cache-Control", "no-store")
            self.finish(
                templates.get_template("gpu_map_page.html").render(
                    **page_vars(
                        hub_auth.hub_prefix,
                        self.current_user,
                        self.xsrf_token.decode(),
                        await viewer_services(gpu_map.api.service.client, self.current_user),
                    ),
                    initial=initial,
                    api_url=f"{base}/api/gpus",
                    hub_prefix=hub_auth.hub_prefix,
                    refresh_seconds=POLL_SECONDS,
                    # The hub's OAuth lets a script's fetch use the cookie only with it.
                    xsrf=self.xsrf_token.decode(),
                )
            )

        def write_error(self, status_code: int, **kwargs: Any) -> None:
            error = kwargs.get("exc_info", (None, None))[1]
            message = getattr(error, "log_message", None) or (
                "You may not see the GPU map." if status_code == 403 else "The GPU map failed."
            )
            self.finish(
                templates.get_template("gpu_map_page.html").render(
                    **page_vars(hub_auth.hub_prefix, self.current_user, ""),
                    error=message,
                    hub_prefix=hub_auth.hub_prefix,
                )
            )

    return [
        (f"{base}/?", web.RedirectHandler, {"url": f"{base}/gpus"}),
        (f"{base}/gpus", GPUMapPage),
        (f"{base}/api/gpus", GPUMapAPI),
    ]
