"""API semantics over the store: server-set metadata, defaulting and validation, optimistic
concurrency, the three PATCH formats, graceful deletion and finalizers, and the garbage
collector and namespace controller (which in Kubernetes run in kube-controller-manager,
but whose behaviour clients observe as part of deleting)."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import json
import logging
import secrets
import uuid
from typing import Any

from . import errors
from .defaults import fold_string_data, normalize, prepare_for_create
from .patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from .resources import JOB, NAMESPACE, POD, RESOURCE_TYPES, ResourceType
from .selectors import (
    FieldRequirement,
    SelectorError,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from .store import Change, Object, ResourceVersionTooOld, Store, Watcher
from .timestamps import now, rfc3339
from .validation import validate, validate_update

log = logging.getLogger(__name__)

JOB_DELETE_WARNING = (
    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
    "to remove them or set propagationPolicy=Orphan to suppress this warning"
)
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_FIELD_ALIASES = {"source": "source.component"}
_SERVER_SET_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "resourceVersion",
)


def _strip_type(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def status_success(rt: ResourceType, obj: Object) -> Object:
    meta = obj["metadata"]
    details = {"name": meta["name"], "kind": rt.plural, "uid": meta["uid"]}
    if rt.group:
        details["group"] = rt.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


class ApiServer:
    """Everything the REST layer calls; raises errors.ApiError for error responses."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._terminating: set[tuple[ResourceType, str, str]] = set()
        self._gc_wakeup = asyncio.Event()
        self._gc_task: asyncio.Task[None] | None = None
        store.add_listener(self._on_change)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._gc_task = asyncio.create_task(self._garbage_collector(), name="emulator-gc")

    async def stop(self) -> None:
        if self._gc_task:
            self._gc_task.cancel()
            await asyncio.gather(self._gc_task, return_exceptions=True)
        self.store.close_watchers()

    # --- reads --------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Object:
        obj = self.store.get(rt, namespace or "" if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return obj

    def _selectors(
        self, rt: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> tuple[Any, tuple[FieldRequirement, ...]]:
        try:
            labels = parse_label_selector(label_selector)
            fields = parse_field_selector(field_selector, rt.allows_field)
        except SelectorError as error:
            raise errors.bad_request(str(error)) from None
        fields = tuple(
            FieldRequirement(_FIELD_ALIASES.get(f.path, f.path), f.value, f.negated) for f in fields
        )
        return labels, fields

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Object:
        labels, fields = self._selectors(rt, label_selector, field_selector)
        items = self.store.items(rt, namespace if rt.namespaced else None)
        selected = [
            o
            for o in items
            if labels_match(labels, o["metadata"].get("labels")) and fields_match(fields, o)
        ]
        metadata: dict[str, Any] = {"resourceVersion": str(self.store.resource_version)}
        if continue_token:
            try:
                start = json.loads(base64.urlsafe_b64decode(continue_token))["start"]
            except (ValueError, KeyError, TypeError):
                raise errors.bad_request("invalid continue token") from None
            selected = [
                o
                for o in selected
                if [o["metadata"].get("namespace", ""), o["metadata"]["name"]] > start
            ]
        if limit and len(selected) > limit:
            last = selected[limit - 1]["metadata"]
            token = json.dumps({"start": [last.get("namespace", ""), last["name"]]}).encode()
            metadata["continue"] = base64.urlsafe_b64encode(token).decode()
            metadata["remainingItemCount"] = len(selected) - limit
            selected = selected[:limit]
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": metadata,
            "items": [_strip_type(o) for o in selected],
        }

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        send_initial_events: bool = False,
    ) -> tuple[Watcher, list[tuple[str, Object]]]:
        """Subscribe to changes; raises ApiError 410 (Expired) when the version was compacted."""
        labels, fields = self._selectors(rt, label_selector, field_selector)
        since: int | None = None
        if resource_version not in (None, "", "0") and not send_initial_events:
            try:
                since = int(resource_version)  # type: ignore[arg-type]
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{resource_version}"') from None
        watcher = Watcher(rt, namespace if rt.namespaced else None, labels, fields)
        try:
            initial = self.store.watch(watcher, since)
        except ResourceVersionTooOld as error:
            raise errors.gone(str(error)) from None
        return watcher, initial

    # --- create -------------------------------------------------------------------------

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        ns = self.store.get(NAMESPACE, "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                f'{rt.plural} "{name}" is forbidden: unable to create new content in namespace {namespace} because it is being terminated',
                rt.plural,
                name,
            )

    def create(
        self, rt: ResourceType, namespace: str | None, body: Any, dry_run: bool = False
    ) -> Object:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a {rt.kind} object")
        obj = copy.deepcopy(body)
        if obj.get("kind") not in (None, "", rt.kind) or obj.get("apiVersion") not in (
            None,
            "",
            rt.api_version,
        ):
            raise errors.bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the expected API version ({rt.api_version})"
                if obj.get("apiVersion") != rt.api_version
                else f"the kind in the data ({obj.get('kind')}) does not match the expected kind ({rt.kind})"
            )
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.get("metadata") or {}
        obj["metadata"] = meta
        for key in _SERVER_SET_META:
            meta.pop(key, None)
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(
                    rt.kind,
                    "",
                    [("metadata.name", "Required value: name or generateName is required")],
                    rt.group,
                )
            meta["name"] = self._generated_name(rt, namespace or "", meta["generateName"])
        if rt.namespaced:
            self._check_namespace(rt, namespace or "", meta["name"])
        if self.store.get(rt, meta.get("namespace", ""), meta["name"]) is not None:
            raise errors.already_exists(rt.plural, meta["name"], rt.group)
        uid = str(uuid.uuid4())
        meta["uid"] = uid
        meta["creationTimestamp"] = rfc3339()
        if rt.kind in ("Pod", "Job", "Service", "PersistentVolumeClaim", "ResourceClaim"):
            meta["generation"] = 1
        prepare_for_create(rt.kind, obj, uid)
        causes = validate(rt, obj)
        if causes:
            raise errors.invalid(rt.kind, meta["name"], causes, rt.group)
        return obj if dry_run else self.store.put(rt, obj)

    def _generated_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix[:58] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            if self.store.get(rt, namespace if rt.namespaced else "", name) is None:
                return name
        raise errors.ApiError(
            500, "AlreadyExists", f"could not generate a unique name from {prefix!r}"
        )

    # --- update and patch ---------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Object:
        old = self.get(rt, namespace, name)
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise errors.bad_request(
                f"the body of the request must be a {rt.kind} object with metadata"
            )
        if body["metadata"].get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({body['metadata']['name']}) does not match the name on the URL ({name})"
            )
        return self._apply_update(rt, old, copy.deepcopy(body), subresource, dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        raw: bytes,
        content_type: str,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Object:
        media_type = (content_type or "").split(";")[0].strip().lower()
        if media_type not in (
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            raise errors.unsupported_media_type(media_type or "(no content type)")
        old = self.get(rt, namespace, name)
        try:
            patch = json.loads(raw or b"null")
        except ValueError as error:
            raise errors.bad_request(f"error decoding patch: {error}") from None
        try:
            if media_type == "application/json-patch+json":
                patched = json_patch(old, patch)
            elif media_type == "application/merge-patch+json":
                patched = merge_patch(old, patch)
            else:
                patched = strategic_merge_patch(old, patch, rt.kind)
        except PatchError as error:
            raise errors.ApiError(422, "Invalid", str(error)) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.ApiError(422, "Invalid", "the patch removed the object's metadata")
        return self._apply_update(rt, old, patched, subresource, dry_run)

    def _apply_update(
        self,
        rt: ResourceType,
        old: Object,
        new: Object,
        subresource: str | None,
        dry_run: bool = False,
    ) -> Object:
        old_meta, meta = old["metadata"], new["metadata"]
        requested_version = meta.get("resourceVersion")
        if requested_version and requested_version != old_meta["resourceVersion"]:
            raise errors.conflict(rt.plural, old_meta["name"], rt.group)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise errors.conflict(
                rt.plural,
                old_meta["name"],
                rt.group,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}",
            )
        if subresource == "status":
            result = copy.deepcopy(old)
            result["status"] = new.get("status", {})
        elif subresource == "finalize":
            result = copy.deepcopy(old)
            result.setdefault("spec", {})["finalizers"] = (new.get("spec") or {}).get(
                "finalizers"
            ) or []
        else:
            result = new
            result["apiVersion"], result["kind"] = rt.api_version, rt.kind
            for key in (
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            if rt.has_status:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            if rt is NAMESPACE:
                result["spec"] = copy.deepcopy(old.get("spec", {}))
            if rt.kind == "Secret":
                fold_string_data(result)
            if old_meta.get("deletionTimestamp"):
                added = [
                    f
                    for f in meta.get("finalizers") or []
                    if f not in (old_meta.get("finalizers") or [])
                ]
                if added:
                    raise errors.invalid(
                        rt.kind,
                        old_meta["name"],
                        [
                            (
                                "metadata.finalizers",
                                f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added}",
                            )
                        ],
                        rt.group,
                    )
            causes = validate_update(rt, old, result)
            if causes:
                raise errors.invalid(rt.kind, old_meta["name"], causes, rt.group)
            if "generation" in old_meta and old.get("spec") != result.get("spec"):
                meta["generation"] = old_meta["generation"] + 1
        result["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        normalize(rt.kind, result)
        if result == old:
            return old  # a no-op write does not bump the resourceVersion, as with etcd
        if dry_run:
            return result
        return self._store_update(rt, result)

    def _store_update(self, rt: ResourceType, obj: Object) -> Object:
        meta = obj["metadata"]
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            if rt is not NAMESPACE or not (obj.get("spec") or {}).get("finalizers"):
                return self.store.remove(rt, meta.get("namespace", ""), meta["name"])
        return self.store.put(rt, obj)

    def bind(self, namespace: str, name: str, body: Any) -> Object:
        """POST pods/{name}/binding: what the scheduler does to place a pod on a node."""
        pod = self.get(POD, namespace, name)
        target = (body or {}).get("target") or {}
        if not target.get("name"):
            raise errors.invalid("Binding", name, [("target.name", "Required value")])
        if pod["spec"].get("nodeName"):
            raise errors.conflict(
                "pods/binding",
                name,
                why=f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding",
                name,
                why=f"pod {name} is being deleted, cannot be assigned to a host",
            )
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = target["name"]
        annotations = ((body or {}).get("metadata") or {}).get("annotations")
        if annotations:
            bound["metadata"].setdefault("annotations", {}).update(annotations)
        conditions = [
            c for c in bound["status"].get("conditions", []) if c["type"] != "PodScheduled"
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(),
            }
        )
        bound["status"]["conditions"] = conditions
        self.store.put(POD, bound)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def evict(self, namespace: str, name: str, body: Any) -> Object:
        """POST pods/{name}/eviction (policy/v1 Eviction), as the API server's eviction REST
        does with no PodDisruptionBudget in the way (none are served here): a pod that has
        not ended gets the condition DisruptionTarget (reason EvictionByEvictionAPI) and is
        then deleted with the Eviction's deleteOptions; an ended pod is only deleted."""
        eviction = body if isinstance(body, dict) else {}
        meta = eviction.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.ApiError(
                400, "BadRequest", "name in URL does not match name in Eviction object", {}
            )
        pod = self.get(POD, namespace, name)
        options = dict(eviction.get("deleteOptions") or {})
        options.pop("kind", None)
        options.pop("apiVersion", None)
        terminal = pod["status"].get("phase") in ("Succeeded", "Failed")
        if not terminal and not pod["metadata"].get("deletionTimestamp"):
            marked = copy.deepcopy(pod)
            conditions = [
                c
                for c in marked["status"].get("conditions") or []
                if c["type"] != "DisruptionTarget"
            ]
            conditions.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(),
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }
            )
            marked["status"]["conditions"] = conditions
            self._store_update(POD, marked)
        self.delete(POD, namespace, name, options)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}

    # --- delete -------------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        options: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Object, list[str]]:
        """Delete, honouring grace periods, finalizers and propagation; returns (body, warnings).

        A dry run checks the preconditions and options and returns the object unchanged."""
        options = options or {}
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        preconditions = options.get("preconditions") or {}
        if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
            raise errors.conflict(
                rt.plural,
                name,
                rt.group,
                f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in object meta: {meta['uid']}",
            )
        if (
            preconditions.get("resourceVersion")
            and preconditions["resourceVersion"] != meta["resourceVersion"]
        ):
            raise errors.conflict(
                rt.plural,
                name,
                rt.group,
                f"Precondition failed: ResourceVersion in precondition: {preconditions['resourceVersion']}, ResourceVersion in object meta: {meta['resourceVersion']}",
            )
        policy = options.get("propagationPolicy")
        orphan = options.get("orphanDependents")
        if policy and orphan is not None:
            raise errors.invalid(
                "DeleteOptions",
                "",
                [
                    (
                        "propagationPolicy",
                        "Invalid value: orphanDependents and deletionPropagation cannot be both set",
                    )
                ],
            )
        warnings: list[str] = []
        if not policy:
            if orphan is not None:
                policy = "Orphan" if orphan else "Background"
            else:
                policy = rt.default_propagation
                if rt is JOB:
                    warnings.append(JOB_DELETE_WARNING)
        if policy not in ("Background", "Foreground", "Orphan"):
            raise errors.invalid(
                "DeleteOptions",
                "",
                [
                    (
                        "propagationPolicy",
                        f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"',
                    )
                ],
            )

        if dry_run:
            return obj, warnings
        if rt is NAMESPACE:
            return self._terminate_namespace(obj), warnings
        grace = self._grace_period(rt, obj, options)
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds") or 0
            if grace >= current:
                return obj, warnings
            shortened = copy.deepcopy(obj)
            shortened["metadata"]["deletionGracePeriodSeconds"] = grace
            shortened["metadata"]["deletionTimestamp"] = rfc3339(
                now() + dt.timedelta(seconds=grace)
            )
            return self._store_update(rt, shortened), warnings
        extra = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(policy)
        if extra and extra not in finalizers:
            finalizers.append(extra)
        if grace == 0 and not finalizers:
            removed = self.store.remove(rt, meta.get("namespace", ""), name)
            return (removed if rt.returns_deleted_object else status_success(rt, removed)), warnings
        deleting = copy.deepcopy(obj)
        deleting["metadata"]["deletionTimestamp"] = rfc3339(now() + dt.timedelta(seconds=grace))
        deleting["metadata"]["deletionGracePeriodSeconds"] = grace
        if finalizers:
            deleting["metadata"]["finalizers"] = finalizers
        return self.store.put(rt, deleting), warnings

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        options: dict[str, Any],
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[Object, list[str]]:
        listed = self.list(
            rt, namespace, label_selector=label_selector, field_selector=field_selector
        )
        deleted, warnings = [], []
        for item in listed["items"]:
            try:
                body, item_warnings = self.delete(
                    rt, item["metadata"].get("namespace"), item["metadata"]["name"], options
                )
            except errors.ApiError:
                continue
            deleted.append(_strip_type(body) if body.get("kind") != "Status" else item)
            warnings = warnings or item_warnings
        return {**listed, "items": deleted}, warnings

    def _grace_period(self, rt: ResourceType, obj: Object, options: dict[str, Any]) -> int:
        if rt is not POD:
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        requested = options.get("gracePeriodSeconds")
        if requested is None:
            requested = spec.get("terminationGracePeriodSeconds", 30)
        return max(int(requested), 0)

    def _terminate_namespace(self, ns: Object) -> Object:
        if ns["metadata"].get("deletionTimestamp"):
            return ns
        terminating = copy.deepcopy(ns)
        terminating["metadata"]["deletionTimestamp"] = rfc3339()
        terminating["metadata"]["deletionGracePeriodSeconds"] = 0
        terminating.setdefault("status", {})["phase"] = "Terminating"
        return self.store.put(NAMESPACE, terminating)

    # --- garbage collector and namespace controller -----------------------------------

    def _on_change(self, change: Change) -> None:
        meta = change.object["metadata"]
        key = (change.resource, meta.get("namespace", ""), meta["name"])
        if change.type == "DELETED":
            self._terminating.discard(key)
            self._gc_wakeup.set()
        elif meta.get("deletionTimestamp"):
            self._terminating.add(key)
            self._gc_wakeup.set()
        elif meta.get("ownerReferences"):
            self._gc_wakeup.set()

    async def _garbage_collector(self) -> None:
        while True:
            await self._gc_wakeup.wait()
            self._gc_wakeup.clear()
            try:
                self.collect_garbage()
            except Exception:  # keep collecting: one bad object must not stop the emulator
                log.exception("garbage collection pass failed")
            await asyncio.sleep(0)

    def collect_garbage(self) -> None:
        """One pass: process orphan/foreground finalizers and terminating namespaces, and
        delete dependents whose owners are all gone (or drop their dangling references)."""
        for rt, namespace, name in sorted(
            self._terminating, key=lambda k: (k[0].plural, k[1], k[2])
        ):
            obj = self.store.get(rt, namespace, name)
            if obj is None:
                continue
            finalizers = obj["metadata"].get("finalizers") or []
            uid = obj["metadata"]["uid"]
            if "orphan" in finalizers:
                for dependent_rt, dependent in self.store.dependents(uid):
                    refs = [r for r in dependent["metadata"]["ownerReferences"] if r["uid"] != uid]
                    self._set_owner_references(dependent_rt, dependent, refs)
                obj = self._drop_finalizer(rt, obj, "orphan")
            elif "foregroundDeletion" in finalizers:
                blocking = False
                for dependent_rt, dependent in self.store.dependents(uid):
                    dmeta = dependent["metadata"]
                    if not dmeta.get("deletionTimestamp"):
                        self.delete(
                            dependent_rt,
                            dmeta.get("namespace"),
                            dmeta["name"],
                            {"propagationPolicy": "Foreground"},
                        )
                    if (
                        self.store.get(dependent_rt, dmeta.get("namespace", ""), dmeta["name"])
                        is not None
                    ):
                        blocking = blocking or any(
                            r["uid"] == uid and r.get("blockOwnerDeletion")
                            for r in dmeta["ownerReferences"]
                        )
                if not blocking:
                    obj = self._drop_finalizer(rt, obj, "foregroundDeletion")
            if rt is NAMESPACE and obj is not None:
                self._finish_namespace(obj)
        for owner_uid in self.store.owner_uids():
            if self.store.by_uid(owner_uid) is not None:
                continue
            for dependent_rt, dependent in self.store.dependents(owner_uid):
                dmeta = dependent["metadata"]
                alive = [
                    r for r in dmeta["ownerReferences"] if self.store.by_uid(r["uid"]) is not None
                ]
                if alive:
                    self._set_owner_references(dependent_rt, dependent, alive)
                elif not dmeta.get("deletionTimestamp"):
                    self.delete(
                        dependent_rt,
                        dmeta.get("namespace"),
                        dmeta["name"],
                        {"propagationPolicy": "Background"},
                    )

    def _set_owner_references(self, rt: ResourceType, obj: Object, refs: list[Object]) -> None:
        updated = copy.deepcopy(obj)
        if refs:
            updated["metadata"]["ownerReferences"] = refs
        else:
            updated["metadata"].pop("ownerReferences", None)
        self._store_update(rt, updated)

    def _drop_finalizer(self, rt: ResourceType, obj: Object, finalizer: str) -> Object | None:
        updated = copy.deepcopy(obj)
        remaining = [f for f in updated["metadata"].get("finalizers") or [] if f != finalizer]
        if remaining:
            updated["metadata"]["finalizers"] = remaining
        else:
            updated["metadata"].pop("finalizers", None)
        result = self._store_update(rt, updated)
        return (
            None
            if self.store.get(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            is None
            else result
        )

    def _finish_namespace(self, ns: Object) -> None:
        name = ns["metadata"]["name"]
        remaining = False
        for rt in RESOURCE_TYPES:
            if not rt.namespaced:
                continue
            for obj in self.store.items(rt, name):
                remaining = True
                if not obj["metadata"].get("deletionTimestamp"):
                    self.delete(
                        rt, name, obj["metadata"]["name"], {"propagationPolicy": "Background"}
                    )
        if not remaining and not ns["metadata"].get("finalizers"):
            self.store.remove(NAMESPACE, "", name)
