"""Objects keyed by resource, namespace and name; one resourceVersion counter; watch fan-out.

Everything here runs on the emulator's event loop and never awaits, so a watch's snapshot
of current objects and its subscription to later changes happen atomically (the same
guarantee a lock around both would give), and no change can fall between them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .resources import ResourceType
from .selectors import FieldRequirement, LabelRequirement, fields_match, labels_match

Object = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One write, as watchers see it. Stored objects are never mutated after they are stored."""

    resource_version: int
    resource: ResourceType
    type: str  # ADDED, MODIFIED or DELETED
    object: Object
    old: Object | None
    at: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class Watcher:
    """The filter and the queue of one watch stream."""

    resource: ResourceType
    namespace: str | None
    labels: tuple[LabelRequirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()
    queue: asyncio.Queue[tuple[str, Object] | None] = field(default_factory=asyncio.Queue)

    def selects(self, obj: Object | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return labels_match(self.labels, meta.get("labels")) and fields_match(self.fields, obj)

    def translate(self, change: Change) -> tuple[str, Object] | None:
        """The event this watcher sees for a change: objects entering or leaving the
        selection are ADDED or DELETED, as with the real API server."""
        if change.resource is not self.resource:
            return None
        now = self.selects(change.object)
        if change.type == "ADDED":
            return ("ADDED", change.object) if now else None
        if change.type == "DELETED":
            return ("DELETED", change.object) if now else None
        before = self.selects(change.old)
        if before and now:
            return ("MODIFIED", change.object)
        if now:
            return ("ADDED", change.object)
        if before:
            return ("DELETED", change.object)
        return None


class ResourceVersionTooOld(Exception):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")


class Store:
    """The emulator's etcd: current objects, a bounded history of changes, and watchers."""

    def __init__(self, history_limit: int = 10_000, history_seconds: float | None = None) -> None:
        self._objects: dict[ResourceType, dict[tuple[str, str], Object]] = {}
        self._uids: dict[str, tuple[ResourceType, str, str]] = {}
        self._owner_index: dict[str, set[tuple[ResourceType, str, str]]] = {}
        self._history: deque[Change] = deque()
        self.history_limit = history_limit
        # Changes older than this many seconds are forgotten too (None: kept by count only),
        # as the API server's watch cache and etcd compaction forget them in minutes.
        self.history_seconds = history_seconds
        self._compacted = 0  # changes at or below this resourceVersion are forgotten
        self._watchers: set[Watcher] = set()
        self._listeners: list[Any] = []
        self.resource_version = 0

    # --- reads --------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Object | None:
        return self._objects.get(rt, {}).get((namespace, name))

    def items(self, rt: ResourceType, namespace: str | None = None) -> list[Object]:
        """Current objects in key order, as etcd returns them."""
        objects = self._objects.get(rt, {})
        keys = sorted(k for k in objects if not namespace or k[0] == namespace)
        return [objects[k] for k in keys]

    def by_uid(self, uid: str) -> Object | None:
        located = self._uids.get(uid)
        return self.get(*located) if located else None

    def dependents(self, owner_uid: str) -> list[tuple[ResourceType, Object]]:
        found = []
        for rt, namespace, name in sorted(
            self._owner_index.get(owner_uid, ()), key=lambda k: (k[0].plural, k[1], k[2])
        ):
            obj = self.get(rt, namespace, name)
            if obj is not None:
                found.append((rt, obj))
        return found

    def owner_uids(self) -> list[str]:
        return list(self._owner_index)

    def all_items(self) -> Iterator[tuple[ResourceType, Object]]:
        for rt, objects in list(self._objects.items()):
            for obj in list(objects.values()):
                yield rt, obj

    # --- writes -------------------------------------------------------------------------

    def next_resource_version(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def put(self, rt: ResourceType, obj: Object) -> Object:
        """Store a new version of ``obj`` (ADDED or MODIFIED) under a fresh resourceVersion."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        old = self._objects.get(rt, {}).get(key)
        rv = self.next_resource_version()
        meta["resourceVersion"] = str(rv)
        self._objects.setdefault(rt, {})[key] = obj
        self._uids[meta["uid"]] = (rt, *key)
        self._index_owners(rt, key, old, obj)
        self._record(Change(rv, rt, "MODIFIED" if old is not None else "ADDED", obj, old))
        return obj

    def remove(self, rt: ResourceType, namespace: str, name: str) -> Object:
        """Delete the object for good; watchers get DELETED with a fresh resourceVersion."""
        old = self._objects[rt].pop((namespace, name))
        final = {**old, "metadata": {**old["metadata"]}}
        rv = self.next_resource_version()
        final["metadata"]["resourceVersion"] = str(rv)
        self._uids.pop(old["metadata"]["uid"], None)
        self._index_owners(rt, (namespace, name), old, None)
        self._record(Change(rv, rt, "DELETED", final, old))
        return final

    def _index_owners(
        self, rt: ResourceType, key: tuple[str, str], old: Object | None, new: Object | None
    ) -> None:
        for obj, add in ((old, False), (new, True)):
            for ref in (obj or {}).get("metadata", {}).get("ownerReferences") or []:
                dependents = self._owner_index.setdefault(ref["uid"], set())
                if add:
                    dependents.add((rt, *key))
                else:
                    dependents.discard((rt, *key))
                    if not dependents:
                        del self._owner_index[ref["uid"]]

    def _record(self, change: Change) -> None:
        self._history.append(change)
        self._forget_old()
        for watcher in self._watchers:
            event = watcher.translate(change)
            if event is not None:
                watcher.queue.put_nowait(event)
        for listener in self._listeners:
            listener(change)

    def _forget_old(self) -> None:
        """Drop changes beyond the history window (by count, and by age when set)."""
        while len(self._history) > self.history_limit:
            self._compacted = self._history.popleft().resource_version
        if self.history_seconds is not None:
            cutoff = time.monotonic() - self.history_seconds
            while self._history and self._history[0].at < cutoff:
                self._compacted = self._history.popleft().resource_version
            if not self._history:
                self._compacted = self.resource_version

    def compact(self) -> None:
        """Forget all history, as etcd compaction does: older resourceVersions get 410 Gone."""
        self._history.clear()
        self._compacted = self.resource_version

    # --- watching -----------------------------------------------------------------------

    def add_listener(self, callback: Any) -> None:
        """Call ``callback(change)`` synchronously after every write (for in-process controllers)."""
        self._listeners.append(callback)

    def watch(self, watcher: Watcher, since: int | None) -> list[tuple[str, Object]]:
        """Subscribe ``watcher``; return the events it must see first.

        ``since=None`` means "current state, then changes": one ADDED per selected object.
        Otherwise the changes after ``since`` are replayed from history.
        """
        if since is None:
            initial = [
                ("ADDED", obj)
                for obj in self.items(watcher.resource, watcher.namespace)
                if watcher.selects(obj)
            ]
        else:
            self._forget_old()
            if since < self._compacted:
                raise ResourceVersionTooOld(since, self._compacted + 1)
            initial = []
            for change in self._history:
                if change.resource_version > since:
                    event = watcher.translate(change)
                    if event is not None:
                        initial.append(event)
        self._watchers.add(watcher)
        return initial

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def close_watchers(self) -> None:
        for watcher in list(self._watchers):
            watcher.queue.put_nowait(None)
        self._watchers.clear()
