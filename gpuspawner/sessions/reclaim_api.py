"""The owners' side of reclaim: "your server will be stopped", and "I'm still using it".

Design notes: docs/design/sessions.md, "gpuspawner.sessions.reclaim_api".
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tornado import web

from .course_api import CourseAPI, CourseHandler, Refused
from .plan import session_end_of
from .service import KeepRefused, ReclaimWarning, SessionsService
from .zone_wipe import ZoneWarning

REASON_TITLES = {
    "idle": "Idle GPU",
    "grant-expired": "Research allocation expired",
    "unopened-prewarm": "Server not opened",
    "class-ended": "Class over",
}


def keep_sentence(kept: ReclaimWarning) -> str:
    label = "Your server" if not kept.server else f"Your server {kept.server!r}"
    return (
        f"{label} keeps running. If it stays unused, it will be stopped after a new "
        "warning, and it cannot be kept again."
    )


def warnings_json(warnings: list[ReclaimWarning], now: datetime) -> dict[str, Any]:
    return {"warnings": [warning.to_json(now) for warning in warnings]}


async def _owner_model(service: SessionsService, name: str) -> dict:
    model = await service.client.get_user(name)
    if model is None:
        raise Refused(404, f"The hub has no user named {name!r}.", "no-user")
    return model


class ReclaimTokenHandler(CourseHandler):
    """Base of the token API: a user's token (their server's), never a service's."""

    scope_refusal = (
        "This token may not read reclaim warnings: use your server's own token, which the "
        "hub lets reach the course-sessions service (Spawner.server_token_scopes)."
    )

    async def prepare(self) -> None:
        await super().prepare()
        if self.caller_model.get("kind", "user") != "user":
            raise Refused(
                403, "Only a user's own token can read or keep that user's servers.", "not-a-user"
            )


class ReclaimWarningsHandler(ReclaimTokenHandler):
    async def get(self) -> None:
        service = self.api.service
        catalog = self.api.current_catalog()
        model = await _owner_model(service, self.caller.name)
        answer = warnings_json(service.warnings_for(catalog, model), service.clock())
        # When each course server is stopped now, extensions included: the lab's countdown.
        answer["session_ends"] = {
            name: end.astimezone(UTC).isoformat().replace("+00:00", "Z")
            for name in (model.get("servers") or {})
            if (end := session_end_of(catalog, model, name)) is not None
        }
        self.write_json(200, answer)


class KeepHandler(ReclaimTokenHandler):
    async def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("server", ""), str):
            raise Refused(
                400,
                'Send {"server": "<server name>"} ("" for your default server).',
                "invalid",
            )
        service = self.api.service
        catalog = self.api.current_catalog()
        model = await _owner_model(service, self.caller.name)
        kept = service.keep(catalog, model, body.get("server", ""))
        self.write_json(
            200,
            {
                "message": keep_sentence(kept),
                **warnings_json(service.warnings_for(catalog, model), service.clock()),
            },
        )


def reclaim_token_handlers(prefix: str, api: CourseAPI) -> list[tuple[str, type, dict]]:
    """The token API's routes under the service's prefix."""
    base = prefix.rstrip("/") + "/api/reclaim"
    return [
        (base, ReclaimWarningsHandler, {"api": api}),
        (f"{base}/keep", KeepHandler, {"api": api}),
    ]


def render_warnings(
    warnings: list[ReclaimWarning],
    now: datetime,
    xsrf: str,
    action: str,
    zone: Sequence[ZoneWarning] = (),
) -> str:
    """The home page's part: one Bootstrap alert per warning, a keep form where allowed;
    ``zone``: the experimental zone's coming wipe, for someone who holds data there."""
    items = []
    for warning in warnings:
        data = warning.to_json(now)
        form = ""
        if warning.can_keep:
            form = (
                f'<form method="post" action="{html.escape(action)}" class="d-inline ms-2">'
                f'<input type="hidden" name="_xsrf" value="{html.escape(xsrf)}">'
                f'<input type="hidden" name="server" value="{html.escape(warning.server)}">'
                '<button type="submit" class="btn btn-sm btn-warning" data-action="keep">'
                "I'm still using it</button></form>"
            )
        items.append(
            '<div class="alert alert-warning d-flex flex-wrap align-items-center gap-2" '
            f'role="alert" data-reason="{html.escape(data["reason"])}" '
            f'data-server="{html.escape(warning.server)}" data-stop-at="{data["stop_at"]}">'
            f"<strong>{html.escape(REASON_TITLES.get(data['reason'], 'Server'))}:</strong> "
            f'<span class="reclaim-message">{html.escape(warning.message)}</span> '
            f'<span class="reclaim-left" data-seconds-left="{data["seconds_left"]}"></span>'
            f"{form}</div>"
        )
    for coming in zone:
        seconds = max(0, int((coming.wipe_at - now).total_seconds()))
        items.append(
            '<div class="alert alert-warning d-flex flex-wrap align-items-center gap-2" '
            'role="alert" data-reason="experimental-zone" '
            f'data-wipe-at="{coming.wipe_at.astimezone(UTC).isoformat()}">'
            "<strong>Experimental zone:</strong> "
            f'<span class="reclaim-message">{html.escape(coming.message)}</span> '
            f'<span class="reclaim-left" data-seconds-left="{seconds}"></span></div>'
        )
    return '<div id="reclaim-warnings">' + "".join(items) + "</div>"


def reclaim_page_handlers(prefix: str, api: CourseAPI, hub_auth: Any) -> list[tuple]:
    """The page the hub's home page embeds, and the OAuth callback it needs."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

    class ReclaimPage(HubOAuthenticated, web.RequestHandler):
        """``GET``: the signed-in user's warnings; ``POST`` (form): keep one server."""

        def initialize(self) -> None:
            self.hub_auth = hub_auth

        async def _model(self) -> tuple[Any, dict]:
            user = self.current_user
            try:
                catalog = api.current_catalog()
            except Refused as refusal:
                raise web.HTTPError(refusal.status, refusal.message) from None
            model = await api.service.client.get_user(user["name"])
            if model is None:
                raise web.HTTPError(404, "The hub does not know you.")
            return catalog, model

        @web.authenticated
        async def get(self) -> None:
            catalog, model = await self._model()
            now = api.service.clock()
            body = render_warnings(
                api.service.warnings_for(catalog, model),
                now,
                self.xsrf_token.decode(),
                self.request.path,
                api.service.zone_warnings_for(model["name"]),
            )
            self.set_header("Cache-Control", "no-store")
            self.finish(f"<!doctype html><html><body>{body}</body></html>")

        @web.authenticated
        async def post(self) -> None:
            catalog, model = await self._model()
            try:
                api.service.keep(catalog, model, self.get_body_argument("server", ""))
            except KeepRefused:
                # Kept already, or nothing left to keep: the home page shows where the
                # server stands now (its warning without a keep button, or none).
                pass
            # Back to the hub's home page, which shows what remains.
            self.redirect(hub_auth.hub_prefix + "home", status=303)

    base = prefix.rstrip("/")
    return [
        (f"{base}/reclaim", ReclaimPage),
        (f"{base}/oauth_callback", HubOAuthCallbackHandler),
    ]
