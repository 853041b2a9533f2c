"""The lab's questions about reclaim, relayed to the hub's course-sessions service.

``GET  {base_url}jupyter-to-job/api/reclaim``: ``{"warning": ...}``, this server's reclaim
warning (reason, when it stops, seconds left, whether its user may keep it once, a
sentence), or ``{"warning": null}``.

``POST {base_url}jupyter-to-job/api/reclaim/keep``: "I'm still using it". The server asks,
the service decides: it is sent with this server's own ``$JUPYTERHUB_API_TOKEN``, so the
service knows whose server it is, and refuses (403, with a sentence) once the user has
kept it already or when the reason cannot be kept off (an expired grant, the end of class).

The service's address comes from ``c.JobsExtensionApp.sessions_service_url``
(``$COURSE_SESSIONS_SERVICE_URL``, which the hub config sets for every server). Without
it, or outside a hub, there is never a warning.

Saving: the lab saves its open, modified documents when a warning is about to run out
(see ``reclaimWarning.ts``). The server has no general way to save what only the browser
holds, so a server nobody has open is stopped with what is on disk.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .handlers import URL_PREFIX, JobsExtensionHandler
from .session_relay import relay_of


class ReclaimWarningHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """This server's reclaim warning, or ``{"warning": null}``."""
        self.write_json(await relay_of(self.extensionapp).warning())


class KeepServerHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Ask the service to keep this server once ("I'm still using it")."""
        self.write_json(await relay_of(self.extensionapp).keep())


def reclaim_handlers() -> list[tuple[str, type]]:
    return [
        (f"{URL_PREFIX}/reclaim", ReclaimWarningHandler),
        (f"{URL_PREFIX}/reclaim/keep", KeepServerHandler),
    ]
