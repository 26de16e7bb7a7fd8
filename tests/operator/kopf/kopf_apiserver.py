"""kmock's Kubernetes emulator, plus the few things a real API server does that Kopf and the operator rely on.

kmock stores objects and merges patches as plain dicts and runs no controllers. On top of that, like the API
server:

- every write stamps ``metadata.resourceVersion`` (Kopf's JSON patches ``test`` it), a create stamps ``uid``,
  ``creationTimestamp`` and ``generation: 1`` and turns ``generateName`` into a name (Kopf's Events use it);
- a write that changes ``spec`` (not through ``/status``) bumps ``metadata.generation``;
- a JSON patch whose ``test`` fails is answered 422, as Kopf expects;
- a write to ``/status`` changes only ``status``;
- a change made to ``objects`` directly (as the tests' controllers make them) reaches watchers
  (:meth:`ApiServer.tell_watchers`);
- a list says the resourceVersion it was taken at, and a watch from a resourceVersion misses no change after it
  and repeats none before it: it is subscribed to changes before it sends the objects changed since (kmock sends
  every object, and subscribes after: a write in between was lost to that watch, and an object listed was sent
  again, older than the watcher's own write).

A test can also make it answer chosen requests with 409 Conflict (:meth:`ApiServer.refuse`), e.g. the operator's
status writes, a few times, and look at the world the moment a chosen request arrives, before it is answered
(:meth:`ApiServer.on_request`: the operator waits for that answer, so whatever it did before sending the request is
done). Unlike a kmock reaction (``kmock['patch', ...] << 409``), which answers 409 *after* kmock
stored the write, a refusal stores nothing, as a real API server that answers 409 has written nothing.

The resources the operator and Kopf use are declared so that discovery works.
"""

from __future__ import annotations

import copy
import datetime
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import jsonpatch
import kmock

FLEETS = "berth.dev/v1alpha1/consumerfleets"
STATEFULSETS = "apps/v1/statefulsets"
SERVICES = "v1/services"
PODS = "v1/pods"
EVENTS = "v1/events"
CONFIGMAPS = "v1/configmaps"
DISRUPTION_BUDGETS = "policy/v1/poddisruptionbudgets"
CLAIMS = "v1/persistentvolumeclaims"

_VERBS = {"get", "list", "watch", "create", "patch", "update", "delete"}
_RESOURCES: dict[str, tuple[str, bool, set[str]]] = {
    FLEETS: ("ConsumerFleet", True, {"status", "scale"}),
    STATEFULSETS: ("StatefulSet", True, {"status", "scale"}),
    SERVICES: ("Service", True, set()),
    PODS: ("Pod", True, {"status"}),
    EVENTS: ("Event", True, set()),
    CONFIGMAPS: ("ConfigMap", True, set()),
    DISRUPTION_BUDGETS: ("PodDisruptionBudget", True, set()),
    CLAIMS: ("PersistentVolumeClaim", True, set()),
    "v1/namespaces": ("Namespace", False, set()),
    "apiextensions.k8s.io/v1/customresourcedefinitions": ("CustomResourceDefinition", False, set()),
}


@attrs.define(kw_only=True)
class Refusal:
    """Answer the next ``remaining`` requests that ``matches`` accepts with 409 Conflict, storing nothing."""

    matches: Callable[[kmock.Request], bool]
    remaining: int
    #: The request-log positions (``Request.id``) of the requests refused so far.
    refused: list[int] = attrs.field(factory=list)


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):
    revision: int = 0
    refusals: list[Refusal] = attrs.field(factory=list)
    observers: list[tuple[Callable[[kmock.Request], bool], Callable[[kmock.Request], None]]] = attrs.field(factory=list)

    def on_request(self, matches: Callable[[kmock.Request], bool], then: Callable[[kmock.Request], None]) -> None:
        """From now on, call ``then`` with each request ``matches`` accepts, as it arrives (before it is answered)."""
        self.observers.append((matches, then))

    def refuse(self, matches: Callable[[kmock.Request], bool], *, times: int) -> Refusal:
        """From now on, answer the next ``times`` requests that ``matches`` accepts with 409 (see :class:`Refusal`)."""
        refusal = Refusal(matches=matches, remaining=times)
        self.refusals.append(refusal)
        return refusal

    def refused(self) -> set[int]:
        """Request-log positions of every request answered by a refusal (nothing of it was stored)."""
        return {position for refusal in self.refusals for position in refusal.refused}

    async def _serve_list(self, request: kmock.Request) -> Any:
        listing = await super()._serve_list(request)
        listing["metadata"]["resourceVersion"] = str(self.revision)  # where a watch goes on from
        return listing

    async def _serve_watch(self, request: kmock.Request) -> Any:
        yield b""  # the headers: the stream has started
        assert request.resource is not None
        bus = self._buses[request.resource]
        since = await bus.mark()
        after = _revision(request.params.get("resourceVersion"))
        async with self._lock:
            existing = [obj for obj in self._KubernetesEmulator__get_objs(request, strict=False) if not obj.deleted]
            events = [
                {"type": "ADDED", "object": obj.raw}
                for obj in existing
                if _revision(obj.raw.get("metadata", {}).get("resourceVersion")) > after
            ]
        for event in events:
            yield event
        async for event in bus.stream(since):
            metadata = event.get("object", {}).get("metadata", {})
            name, namespace = metadata.get("name"), metadata.get("namespace")
            if self._KubernetesEmulator__check(request, request.resource, namespace, name, strict=False):
                yield event

    async def tell_watchers(self, resource: str, namespace: str, name: str, kind: str = "MODIFIED") -> None:
        """Send watchers of ``resource`` the event of a change made to ``objects`` directly (the tests' controllers
        do), as a real API server does for every write."""
        stored = self.objects[resource, namespace, name]
        if not stored.deleted:
            stored.patch({"metadata": {"resourceVersion": self._next_revision()}})
        raw = stored.last.raw if stored.deleted else stored.raw
        for key, bus in list(self._buses.items()):
            if key == resource:
                await bus.put({"type": kind, "object": raw})

    def declare_resources(self) -> None:
        for resource, (kind, namespaced, subresources) in _RESOURCES.items():
            self.resources[resource] = kmock.ResourceInfo(
                kind=kind, namespaced=namespaced, verbs=_VERBS, subresources=subresources
            )

    async def _handle(self, request: kmock.Request) -> Any:
        for matches, then in self.observers:
            if matches(request):
                then(request)
        self._maybe_refuse(request)
        if request.resource is not None and request.data is not None:
            if request.action == kmock.action.CREATE and isinstance(request.data, dict):
                self._stamp_create(request.data)
            elif request.action == kmock.action.UPDATE and request.name is not None:
                self._stamp_update(request)
        return await super()._handle(request)

    def _maybe_refuse(self, request: kmock.Request) -> None:
        for refusal in self.refusals:
            if refusal.remaining > 0 and refusal.matches(request):
                refusal.remaining -= 1
                refusal.refused.append(request.id)
                resource = request.resource
                kind = f"{resource.plural}.{resource.group}".rstrip(".") if resource is not None else "objects"
                raise kmock.KubernetesError(
                    status=409,
                    reason="Conflict",
                    message=f'Operation cannot be fulfilled on {kind} "{request.name}": the object has been modified;'
                    " please apply your changes to the latest version and try again",
                )

    def _next_revision(self) -> str:
        self.revision += 1
        return str(self.revision)

    def _stamp_create(self, data: dict[str, Any]) -> None:
        metadata = data.setdefault("metadata", {})
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:8]
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", _now())
        metadata["generation"] = 1
        metadata["resourceVersion"] = self._next_revision()

    def _stamp_update(self, request: kmock.Request) -> None:
        key = (request.resource, request.namespace, request.name)
        if key not in self.objects or self.objects[key].deleted:
            return  # kmock answers 404
        current = copy.deepcopy(self.objects[key].raw)
        data = request.data
        if isinstance(data, list):
            for operation in data:
                if operation.get("op") == "test":
                    try:
                        jsonpatch.apply_patch(current, [operation])
                    except jsonpatch.JsonPatchException as error:
                        raise kmock.KubernetesError(status=422, reason="Invalid", message=str(error)) from None
            patched = jsonpatch.apply_patch(current, data)
        else:
            if request.subresource == "status":
                for field in list(data):
                    if field != "status":
                        del data[field]
            patched = _merge_patch(current, data)
        generation = current.get("metadata", {}).get("generation", 1)
        if request.subresource is None and patched.get("spec") != current.get("spec"):
            generation += 1
        revision = self._next_revision()
        if isinstance(data, list):
            data.append({"op": "add", "path": "/metadata/resourceVersion", "value": revision})
            data.append({"op": "add", "path": "/metadata/generation", "value": generation})
        else:
            data.setdefault("metadata", {}).update(resourceVersion=revision, generation=generation)


def _revision(value: object) -> int:
    """A resourceVersion as a number; 0 for none (or kmock's own "...")."""
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (as kmock applies it: null removes a key, lists are replaced)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
