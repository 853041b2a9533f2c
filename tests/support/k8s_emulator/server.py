"""The HTTP face of the emulator: Kubernetes REST paths, JSON bodies, watch and log streams.

Paths: discovery (/api, /apis, /apis/{group}, /api/v1, /apis/{group}/{version}, /version),
collections (/api/v1/pods, /api/v1/namespaces/{ns}/pods, also under /watch/), objects and
their subresources (status, binding, eviction, log, finalize). Authentication is not checked.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tornado import web
from tornado.iostream import StreamClosedError

from . import errors, pod_exec, resources
from .apiserver import ApiServer
from .logs import LogBook, LogQuery, check_log_options, container_log, log_since_time, stream_log
from .resources import POD, ResourceType
from .store import Watcher

if TYPE_CHECKING:
    from .kubelet import Kubelet

log = logging.getLogger(__name__)


@dataclass
class ServerSettings:
    """Knobs read on every request, so tests may change them while the emulator runs."""

    bookmark_interval: float = 60.0
    # The Kubernetes minor version played: /version, and which resource.k8s.io versions are served.
    kubernetes_minor: int = 34


@dataclass
class Route:
    """A parsed request path."""

    discovery: dict[str, Any] | None = None
    resource: ResourceType | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    watch: bool = False


def parse_path(path: str, server_address: str, minor: int = 34) -> Route:
    segments = [s for s in path.split("/") if s]
    not_found = errors.ApiError(
        404, "NotFound", "the server could not find the requested resource", {}
    )
    if segments == ["version"]:
        return Route(
            discovery={
                **resources.version_info(minor),
                "gitCommit": "emulator",
                "gitTreeState": "clean",
                "buildDate": "2025-01-01T00:00:00Z",
                "goVersion": "go1.24",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )
    if segments == ["api"]:
        return Route(discovery=resources.api_versions(server_address))
    if segments == ["apis"]:
        return Route(discovery=resources.api_group_list(minor))
    if len(segments) >= 2 and segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    elif len(segments) == 2 and segments[0] == "apis":
        document = resources.api_group(segments[1], minor)
        if document is None:
            raise not_found
        return Route(discovery=document)
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        raise not_found
    if not rest:
        document = resources.api_resource_list(group, version, minor)
        if document is None:
            raise not_found
        return Route(discovery=document)
    if not resources.served(group, version, minor):
        raise not_found
    watch = rest[0] == "watch"
    if watch:
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rt = resources.lookup(group, version, rest[2])
        if rt is not None and rt.namespaced:
            if len(rest) > 5:
                raise not_found
            return Route(
                resource=rt,
                namespace=rest[1],
                name=rest[3] if len(rest) > 3 else None,
                subresource=rest[4] if len(rest) > 4 else None,
                watch=watch,
            )
    if not rest or len(rest) > 3:
        raise not_found
    rt = resources.lookup(group, version, rest[0])
    if rt is None:
        raise not_found
    name = rest[1] if len(rest) > 1 else None
    if rt.namespaced and name is not None:
        raise not_found  # namespaced objects are only addressed inside a namespace
    subresource = rest[2] if len(rest) > 2 else None
    return Route(resource=rt, name=name, subresource=subresource, watch=watch)


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


class ApiHandler(web.RequestHandler):
    SUPPORTED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

    def initialize(self, api: ApiServer, logs: LogBook, knobs: ServerSettings) -> None:
        self.api = api
        self.logs = logs
        self.knobs = knobs  # RequestHandler.settings is the tornado application's
        self._disconnected = asyncio.Event()
        self._watcher: Watcher | None = None

    def compute_etag(self) -> None:
        return None

    def on_connection_close(self) -> None:
        self._disconnected.set()
        if self._watcher is not None:
            self._watcher.queue.put_nowait(None)

    # --- plumbing -----------------------------------------------------------------------

    def _server_address(self) -> str:
        return self.request.host

    def _route(self, path: str) -> Route:
        return parse_path(path, self._server_address(), self.knobs.kubernetes_minor)

    def _reply(self, body: Any, code: int = 200, warnings: list[str] | None = None) -> None:
        self.set_status(code)
        self.set_header("Content-Type", "application/json")
        for warning in warnings or []:
            self.add_header("Warning", f'299 - "{warning}"')
        self.finish(json.dumps(body))

    def _fail(self, error: errors.ApiError) -> None:
        if self._finished:
            return
        if self._headers_written:  # a stream already under way can only be ended
            self._end_stream()
            return
        self._reply(error.status(), error.code)

    def _body(self) -> Any:
        if not self.request.body:
            return None
        try:
            return json.loads(self.request.body)
        except ValueError as error:
            raise errors.bad_request(
                f"couldn't get version/kind; json parse error: {error}"
            ) from None

    def _arg(self, name: str) -> str | None:
        return self.get_query_argument(name, None)

    def _dry_run(self) -> bool:
        values = self.get_query_arguments("dryRun")
        for value in values:
            if value != "All":
                raise errors.invalid(
                    "DryRun",
                    "",
                    [("dryRun", f'Unsupported value: "{value}": supported values: "All"')],
                )
        return bool(values)

    def _int_arg(self, name: str) -> int | None:
        value = self._arg(name)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except ValueError:
            raise errors.bad_request(f'invalid value for {name}: "{value}"') from None

    async def _dispatch(self, method: str, path: str) -> None:
        try:
            route = self._route(path)
            if route.discovery is not None:
                if method != "GET":
                    raise errors.method_not_allowed(
                        f"the server does not allow this method on the requested resource ({method})"
                    )
                self._reply(route.discovery)
                return
            await getattr(self, f"_{method.lower()}")(route)
        except errors.ApiError as error:
            self._fail(error)
        except StreamClosedError:
            pass
        except Exception as error:  # an emulator bug: answer as the API server would, and log it
            log.exception("emulator failed on %s %s", method, self.request.uri)
            self._fail(errors.ApiError(500, "InternalError", f"Internal error occurred: {error!r}"))

    async def get(self, path: str) -> None:
        await self._dispatch("GET", path)

    async def post(self, path: str) -> None:
        await self._dispatch("POST", path)

    async def put(self, path: str) -> None:
        await self._dispatch("PUT", path)

    async def patch(self, path: str) -> None:
        await self._dispatch("PATCH", path)

    async def delete(self, path: str) -> None:
        await self._dispatch("DELETE", path)

    # --- verbs --------------------------------------------------------------------------

    def _check_subresource(self, route: Route, allowed: tuple[str, ...]) -> None:
        rt = route.resource
        assert rt is not None
        if route.subresource is not None and (
            route.subresource not in rt.subresources or route.subresource not in allowed
        ):
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource", {}
            )

    async def _get(self, route: Route) -> None:
        rt = route.resource
        assert rt is not None
        if route.name is None:
            if route.watch or _truthy(self._arg("watch")):
                await self._watch(route)
            else:
                self._reply(
                    self.api.list(
                        rt,
                        route.namespace,
                        label_selector=self._arg("labelSelector"),
                        field_selector=self._arg("fieldSelector"),
                        limit=self._int_arg("limit"),
                        continue_token=self._arg("continue"),
                    )
                )
            return
        if route.watch:  # the legacy /watch/.../{name} path: a watch selecting that name
            await self._watch(route, f"metadata.name={route.name}")
            return
        if route.subresource == "log" and rt is POD:
            await self._pod_log(route)
            return
        self._check_subresource(route, ("status",))
        self._reply(self.api.get(rt, route.namespace, route.name))

    async def _post(self, route: Route) -> None:
        rt = route.resource
        assert rt is not None
        if route.name is None:
            self._reply(self.api.create(rt, route.namespace, self._body(), self._dry_run()), 201)
        elif route.subresource == "binding" and rt is POD:
            self._reply(self.api.bind(route.namespace or "", route.name, self._body()), 201)
        elif route.subresource == "eviction" and rt is POD:
            self._reply(self.api.evict(route.namespace or "", route.name, self._body()), 201)
        else:
            raise errors.method_not_allowed(
                f"the server does not allow this method on the requested resource (post {rt.plural})"
            )

    async def _put(self, route: Route) -> None:
        rt = route.resource
        assert rt is not None
        if route.name is None:
            raise errors.method_not_allowed(
                f"the server does not allow this method on the requested resource (put {rt.plural})"
            )
        self._check_subresource(route, ("status", "finalize"))
        self._reply(
            self.api.update(
                rt, route.namespace, route.name, self._body(), route.subresource, self._dry_run()
            )
        )

    async def _patch(self, route: Route) -> None:
        rt = route.resource
        assert rt is not None
        if route.name is None:
            raise errors.method_not_allowed(
                f"the server does not allow this method on the requested resource (patch {rt.plural})"
            )
        self._check_subresource(route, ("status",))
        content_type = self.request.headers.get("Content-Type", "")
        self._reply(
            self.api.patch(
                rt,
                route.namespace,
                route.name,
                self.request.body,
                content_type,
                route.subresource,
                self._dry_run(),
            )
        )

    def _delete_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        grace = self._int_arg("gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if self._arg("propagationPolicy"):
            options["propagationPolicy"] = self._arg("propagationPolicy")
        if self._arg("orphanDependents") is not None:
            options["orphanDependents"] = _truthy(self._arg("orphanDependents"))
        body = self._body()
        if isinstance(body, dict):
            options.update(
                {k: v for k, v in body.items() if v is not None and k not in ("kind", "apiVersion")}
            )
        return options

    async def _delete(self, route: Route) -> None:
        rt = route.resource
        assert rt is not None
        if route.subresource is not None:
            raise errors.method_not_allowed(
                f"the server does not allow this method on the requested resource (delete {rt.plural}/{route.subresource})"
            )
        options = self._delete_options()
        if route.name is None:
            body, warnings = self.api.delete_collection(
                rt,
                route.namespace,
                options,
                label_selector=self._arg("labelSelector"),
                field_selector=self._arg("fieldSelector"),
            )
        else:
            body, warnings = self.api.delete(
                rt, route.namespace, route.name, options, self._dry_run()
            )
        self._reply(body, 200, warnings)

    # --- streams ------------------------------------------------------------------------

    async def _watch(self, route: Route, name_selector: str | None = None) -> None:
        rt = route.resource
        assert rt is not None
        loop = asyncio.get_running_loop()
        timeout = self._int_arg("timeoutSeconds")
        deadline = loop.time() + timeout if timeout else None
        bookmarks = _truthy(self._arg("allowWatchBookmarks"))
        send_initial = _truthy(self._arg("sendInitialEvents"))
        self.set_header("Content-Type", "application/json")
        try:
            watcher, initial = self.api.watch(
                rt,
                route.namespace,
                label_selector=self._arg("labelSelector"),
                field_selector=",".join(
                    s for s in (self._arg("fieldSelector"), name_selector) if s
                ),
                resource_version=self._arg("resourceVersion"),
                send_initial_events=send_initial,
            )
        except errors.ApiError as error:
            if error.code != 410:
                raise
            # A compacted resourceVersion ends the stream with an ERROR event, as the watch cache does.
            self.finish(json.dumps({"type": "ERROR", "object": error.status()}) + "\n")
            return
        self._watcher = watcher
        try:
            chunk = [json.dumps({"type": t, "object": o}) for t, o in initial]
            if send_initial:
                chunk.append(
                    json.dumps(
                        {"type": "BOOKMARK", "object": self._bookmark(rt, initial_events_end=True)}
                    )
                )
            if chunk:
                self.write("\n".join(chunk) + "\n")
            await self.flush()
            next_bookmark = loop.time() + self.knobs.bookmark_interval
            while not self._disconnected.is_set():
                wait = next_bookmark - loop.time() if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    wait = left if wait is None else min(wait, left)
                try:
                    item = await asyncio.wait_for(
                        watcher.queue.get(), max(wait, 0) if wait is not None else None
                    )
                except TimeoutError:
                    if bookmarks and loop.time() >= next_bookmark:
                        self.write(
                            json.dumps({"type": "BOOKMARK", "object": self._bookmark(rt)}) + "\n"
                        )
                        await self.flush()
                        next_bookmark = loop.time() + self.knobs.bookmark_interval
                    continue
                if item is None:
                    break
                lines = [json.dumps({"type": item[0], "object": item[1]})]
                while not watcher.queue.empty():
                    queued = watcher.queue.get_nowait()
                    if queued is None:
                        self._disconnected.set()
                        break
                    lines.append(json.dumps({"type": queued[0], "object": queued[1]}))
                self.write("\n".join(lines) + "\n")
                await self.flush()
        finally:
            self.api.store.unwatch(watcher)
            self._watcher = None
        self._end_stream()

    def _end_stream(self) -> None:
        if not self._finished:
            try:
                self.finish()
            except StreamClosedError:
                pass

    def _bookmark(self, rt: ResourceType, initial_events_end: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "resourceVersion": str(self.api.store.resource_version),
            "creationTimestamp": None,
        }
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}

    async def _pod_log(self, route: Route) -> None:
        # PodLogOptions are validated first, before the pod is looked at.
        since = self._int_arg("sinceSeconds")
        since_time = log_since_time(self._arg("sinceTime"))
        check_log_options(
            route.name or "",
            since,
            since_time,
            self._int_arg("tailLines"),
            self._int_arg("limitBytes"),
        )
        pod = self.api.get(POD, route.namespace, route.name or "")
        name = pod["metadata"]["name"]
        spec = pod["spec"]
        containers = [c["name"] for c in spec.get("containers") or []]
        init_containers = [c["name"] for c in spec.get("initContainers") or []]
        container = self._arg("container")
        if not container:
            if len(containers) != 1:
                message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
                if init_containers:
                    message += f" or one of the init containers: [{' '.join(init_containers)}]"
                raise errors.bad_request(message)
            container = containers[0]
        elif container not in containers and container not in init_containers:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        self.set_header("Content-Type", "text/plain")
        if not spec.get("nodeName"):
            self.finish("")
            return
        book = container_log(self.logs, pod, container, _truthy(self._arg("previous")))
        query = LogQuery(
            since_seconds=since,
            since_time=since_time,
            tail_lines=self._int_arg("tailLines"),
            timestamps=_truthy(self._arg("timestamps")),
            limit_bytes=self._int_arg("limitBytes"),
            follow=_truthy(self._arg("follow")),
        )
        await stream_log(book, query, self.write, self.flush, self._disconnected)
        self._end_stream()


def make_app(
    api: ApiServer, logs: LogBook, settings: ServerSettings, kubelet: Kubelet | None = None
) -> web.Application:
    # pods/exec is a WebSocket upgrade (pod_exec.py), so it has a handler of its own.
    exec_routes = [(pod_exec.ROUTE, pod_exec.PodExecHandler, {"api": api, "kubelet": kubelet})]
    return web.Application(
        [
            *(exec_routes if kubelet is not None else []),
            (
                r"/(.*)",
                ApiHandler,
                {"api": api, "logs": logs, "knobs": settings},
            ),
        ],
        log_function=lambda handler: None,
    )
