"""``WatchCache``: the objects fleets own, watched instead of read every pass, and a change to one pokes its fleet.

One :class:`~berth.operator.adapters.kube.informer.Informer` per kind the operator reads — StatefulSets, pods, Services,
PodDisruptionBudgets and per-pod volume claims (no ConfigMaps: the operator writes none for fleets) — in the watched
namespace (or all), filtered server-side by the labels every one of them carries (``app.kubernetes.io/name=
berth-consumer`` and a ``berth.dev/fleet`` label naming the fleet). Rules:

- A change to an object, as the operator reads it (``project_*``: the fields it uses, with every label and
  annotation, because patches are built from them), pokes the fleet its ``berth.dev/fleet`` label names
  (``on_fleet_change``) when it changes what a pass reads (controller-runtime's predicates): pods and claims are
  read only through the fleet's workload view (``observation.workload_view``), so a change of one pokes only when
  that view changes (a pod scheduled, a container waiting for its image: nobody); a StatefulSet through the view
  and, outside its status, as applied (its metadata and spec); Services, budgets and ConfigMaps as they are kept.
  So a StatefulSet scaled or deleted out of band, a pod gone or Ready, a budget removed reach the fleet's pass
  within a moment, with no polling, and a status update of the StatefulSet's controller that changes nothing the
  pass uses (its replica counts) pokes nobody. The callback is told which of the view's fields moved
  (``observation.view_changes``), so the reconciler can pass over what only some passes use
  (``planners.pokes``: the controller's progress).
- Reads are served from the cache only once its informer has listed everything (``synced``); before, the caller
  reads through the API. Objects handed out are the cache's own: read them, never change them.
- What the operator itself creates or patches is kept as the API server answered it (``wrote``): a pass reads
  back what it wrote without asking the API server again, and the watch event of that write changes nothing and
  pokes nobody (a first pass would otherwise be followed by one pass per object it created).
- A write in flight holds the pokes of the object it writes (``written``'s ``key``): a watch may bring the write's
  own version before its answer, and that event is then the write itself, which pokes nobody. When the answer
  comes, a held change of exactly its version is dropped; any other is poked once the write is over (answered or
  failed).
- The cache may lag the API server by a moment. Create-or-patch tolerates it (a 409 on create is read back
  through the API; a patch decided on a stale copy is sent again, the same); a step that cannot be taken back
  confirms its view first (``WorkloadView.from_cache``, ``observe(fresh=True)``).
- :class:`CachedWorkloadObserver` is the workload's :class:`~berth.operator.ports.WorkloadObserver` from the cache,
  interpreted by the very ``observation.workload_view`` the API reads go through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.informer import Informer, Key, Obj, WatchedResource, key_of
from berth.operator.adapters.kube.observation import (
    ApiWorkloadObserver,
    has_claim_templates,
    roll_in_progress,
    roll_progress,
    view_changes,
    workload_view,
)
from berth.operator.planners.roll_pacing import RollPacer
from berth.operator.planners.statefulset import APP_NAME, FLEET_LABEL
from berth.operator.ports import WorkloadView

STATEFULSETS = WatchedResource("apps", "v1", "statefulsets")
PODS = WatchedResource("", "v1", "pods")
SERVICES = WatchedResource("", "v1", "services")
DISRUPTION_BUDGETS = WatchedResource("policy", "v1", "poddisruptionbudgets")
CLAIMS = WatchedResource("", "v1", "persistentvolumeclaims")
CONFIG_MAPS = WatchedResource("", "v1", "configmaps")
#: Every object a fleet owns carries both (planners.statefulset: pods, the StatefulSet's selector, owned metadata).
SELECTOR = f"app.kubernetes.io/name={APP_NAME},{FLEET_LABEL}"

_METADATA_KEPT = (
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "ownerReferences",
    "deletionTimestamp",
    "creationTimestamp",
)


def project_metadata(obj: Mapping[str, Any]) -> Obj:
    metadata = obj.get("metadata") or {}
    kept: Obj = {key: metadata[key] for key in _METADATA_KEPT if key in metadata}
    if "generation" in metadata:
        kept["generation"] = metadata["generation"]
    return kept


def project_statefulset(obj: Mapping[str, Any]) -> Obj:
    spec = obj.get("spec") or {}
    claims = spec.get("volumeClaimTemplates") or []
    templates = [{"metadata": {"name": (t.get("metadata") or {}).get("name")}} for t in claims]
    status = obj.get("status") or {}
    return {
        "metadata": project_metadata(obj),
        "spec": {
            "replicas": spec.get("replicas"),
            "selector": spec.get("selector"),
            "volumeClaimTemplates": templates,
            "updateStrategy": spec.get("updateStrategy"),
        },
        "status": {
            key: status.get(key)
            for key in ("observedGeneration", "updateRevision", "currentRevision", "updatedReplicas")
        },
    }


#: The pod conditions a pass reads: readiness, and what shows a node gone silent or a pod being disrupted
#: (``observation.placement``).
_CONDITIONS_KEPT = ("Ready", "ContainersReady", "DisruptionTarget")


def project_pod(obj: Mapping[str, Any]) -> Obj:
    """Readiness, the containers' start and end times (restarts, ``observation.pod_times``), a container the
    kubelet cannot configure (``observation._config_error``), one that failed, with its termination message
    (``observation._crash_message``), and the pod's node with the conditions that say its node stopped reporting
    or Kubernetes is disrupting it (``observation.placement``)."""
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    ready = [
        {key: c[key] for key in ("type", "status", "reason", "lastTransitionTime") if c.get(key) is not None}
        for c in status.get("conditions") or []
        if c.get("type") in _CONDITIONS_KEPT
    ]
    return {
        "metadata": project_metadata(obj),
        "spec": {key: spec[key] for key in ("nodeName", "readinessGates") if spec.get(key)},
        "status": {
            "conditions": ready,
            "startTime": status.get("startTime"),
            "containerStatuses": [_project_container(c) for c in status.get("containerStatuses") or []],
            "initContainerStatuses": [_project_container(c) for c in status.get("initContainerStatuses") or []],
        },
    }


def _project_container(container: Mapping[str, Any]) -> Obj:
    state, last = container.get("state") or {}, container.get("lastState") or {}
    waiting = state.get("waiting") or {}
    return {
        "state": {
            "running": {"startedAt": (state.get("running") or {}).get("startedAt")},
            "waiting": {"reason": waiting.get("reason"), "message": waiting.get("message")},
            "terminated": _failed(state.get("terminated") or {}),
        },
        "lastState": {
            "terminated": {
                "finishedAt": (last.get("terminated") or {}).get("finishedAt"),
                **_failed(last.get("terminated") or {}),
            }
        },
    }


def _failed(terminated: Mapping[str, Any]) -> Obj:
    """A container's end when it failed: its exit code and the kubelet's termination message
    (``observation._crash_message``: why a Kafka consumer exits on its credentials); nothing of a clean end."""
    code = terminated.get("exitCode")
    return {"exitCode": code, "message": terminated.get("message")} if code not in (None, 0) else {}


def project_owned(obj: Mapping[str, Any]) -> Obj:
    """Services, budgets, claims, ConfigMaps: who owns them and what was applied (labels, annotations)."""
    return {"metadata": project_metadata(obj)}


PROJECTIONS: dict[WatchedResource, Callable[[Obj], Obj]] = {
    STATEFULSETS: project_statefulset,
    PODS: project_pod,
    SERVICES: project_owned,
    DISRUPTION_BUDGETS: project_owned,
    CLAIMS: project_owned,
    CONFIG_MAPS: project_owned,
}

#: (namespace, fleet, kind, moved): the kind's plural and what of the fleet's workload view its change moved (the
#: view's fields, ``observation.view_changes``; ``applied``: a StatefulSet's metadata or spec; ``object``: a kind
#: not read through the view).
FleetChanged = Callable[[str, str, str, frozenset[str]], None]
#: Kinds a pass reads through the fleet's workload view (a StatefulSet also as applied: :func:`_as_applied`).
VIEWED = (STATEFULSETS, PODS, CLAIMS)


def _before(resource: WatchedResource, key: Key, old: Obj | None, new: Obj | None) -> Obj | Literal["cached"] | None:
    """The StatefulSet :meth:`WatchCache.view` shows fleet ``key`` with as it was before the change ``old`` ->
    ``new``: ``old`` for a change of the fleet's own StatefulSet, else the cached one."""
    changed = old if old is not None else new
    if resource is STATEFULSETS and changed is not None and changed["metadata"].get("name") == key[1]:
        return old
    return "cached"


def _as_applied(statefulset: Obj | None) -> Obj | None:
    """A StatefulSet but its status (which a pass reads only through the view)."""
    return None if statefulset is None else {key: value for key, value in statefulset.items() if key != "status"}


def fleet_of(obj: Mapping[str, Any] | None) -> Key | None:
    if obj is None:
        return None
    metadata = obj.get("metadata") or {}
    fleet = (metadata.get("labels") or {}).get(FLEET_LABEL)
    return (str(metadata.get("namespace") or ""), str(fleet)) if fleet else None


def _relisted(on_relist: Callable[[str, str], None] | None, resource: WatchedResource) -> Callable[[str], None] | None:
    if on_relist is None:
        return None
    return lambda reason: on_relist(str(resource), reason)


class WatchCache:
    def __init__(
        self,
        api: ApiSession,
        *,
        namespace: str | None,
        on_fleet_change: FleetChanged,
        on_relist: Callable[[str, str], None] | None = None,
        rolls: RollPacer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.on_fleet_change = on_fleet_change
        #: Told of every StatefulSet's roll as the cache sees it (``planners.roll_pacing``).
        self.rolls = rolls
        self.clock = clock
        #: Writes in flight by object, and the pokes held for each: (version the watch brought, fleet, kind, moved).
        self._writing: dict[tuple[WatchedResource, Key], int] = {}
        self._held: dict[tuple[WatchedResource, Key], list[tuple[str | None, Key, frozenset[str]]]] = {}
        resources = [STATEFULSETS, PODS, SERVICES, DISRUPTION_BUDGETS, CLAIMS]
        #: resource -> fleet (namespace, name) -> object name -> object
        self._by_fleet: dict[WatchedResource, dict[Key, dict[str, Obj]]] = {r: {} for r in resources}
        self.informers = {
            resource: Informer(
                api,
                resource,
                namespace=namespace,
                selector=SELECTOR,
                project=PROJECTIONS[resource],
                on_change=self._changed(resource),
                on_relist=_relisted(on_relist, resource),
            )
            for resource in resources
        }

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    async def stop(self) -> None:
        for informer in self.informers.values():
            await informer.stop()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers.values()))

    def synced(self, *resources: WatchedResource) -> bool:
        """Whether every one of ``resources`` is cached and was listed completely at least once."""
        return all(r in self.informers and self.informers[r].synced.is_set() for r in resources)

    def object(self, resource: WatchedResource, namespace: str, name: str) -> Obj | None:
        return self.informers[resource].get(namespace, name)

    def fleet_objects(self, resource: WatchedResource, namespace: str, fleet: str) -> list[Obj]:
        return list(self._by_fleet[resource].get((namespace, fleet), {}).values())

    def size(self) -> int:
        return sum(len(informer.objects) for informer in self.informers.values())

    def view(self, namespace: str, name: str, statefulset: Obj | Literal["cached"] | None = "cached") -> WorkloadView:
        """The fleet's workload as the cache holds it, interpreted as a pass reads it (``from_cache``); with
        ``statefulset`` in place of the cached one."""
        if statefulset == "cached":
            statefulset = self.object(STATEFULSETS, namespace, name)
        pods: list[Obj] = []
        claims: list[Obj] = []
        if statefulset is not None:
            pods = self.fleet_objects(PODS, namespace, name)
            if has_claim_templates(statefulset):
                claims = self.fleet_objects(CLAIMS, namespace, name)
        return dataclasses.replace(workload_view(name, statefulset, pods, claims), from_cache=True)

    def wrote(self, resource: WatchedResource, obj: Obj) -> None:
        """An object the operator has just created or changed, as the API server answered: kept as if watched, so
        the pass goes on from what it wrote without reading it back, and the watch event of that very write is no
        change (it pokes nobody: the pass that wrote it knows)."""
        informer = self.informers.get(resource)
        if informer is not None and (change := informer.put(obj)) is not None:
            self._index(resource, *change)
        held = self._held.get((resource, key_of(obj)))
        if held:
            version = (obj.get("metadata") or {}).get("resourceVersion")
            held[:] = [poke for poke in held if poke[0] is None or poke[0] != str(version)]

    def begin_write(self, resource: WatchedResource, key: Key) -> None:
        """A write of object ``key`` is in flight: its pokes are held until :meth:`end_write`."""
        self._writing[(resource, key)] = self._writing.get((resource, key), 0) + 1

    def end_write(self, resource: WatchedResource, key: Key) -> None:
        """The write is over: what it held and was not the write itself pokes now."""
        token = (resource, key)
        left = self._writing.get(token, 1) - 1
        if left > 0:
            self._writing[token] = left
            return
        self._writing.pop(token, None)
        for _, (namespace, fleet), moved in self._held.pop(token, []):
            self.on_fleet_change(namespace, fleet, resource.plural, moved)

    def _index(self, resource: WatchedResource, old: Obj | None, new: Obj | None) -> set[Key]:
        """The by-fleet index told of one change; the fleets it concerns."""
        index = self._by_fleet[resource]
        fleets = {key for key in (fleet_of(old), fleet_of(new)) if key is not None}
        if old is not None and (before := fleet_of(old)) is not None:
            members = index.get(before, {})
            members.pop(str(old["metadata"].get("name")), None)
            if not members:
                index.pop(before, None)
        if new is not None and (after := fleet_of(new)) is not None:
            index.setdefault(after, {})[str(new["metadata"].get("name"))] = new
        if resource is STATEFULSETS and self.rolls is not None:
            self._tell_rolls(old, new)
        return fleets

    def _tell_rolls(self, old: Obj | None, new: Obj | None) -> None:
        """The roll pacer told of a StatefulSet's change (its own fleet's, by its label)."""
        assert self.rolls is not None
        now = self.clock()
        if old is not None and (before := fleet_of(old)) is not None and (new is None or fleet_of(new) != before):
            self.rolls.forget(before, now)
        if new is not None and (after := fleet_of(new)) is not None:
            self.rolls.observed(after, roll_in_progress(new), roll_progress(new), now)

    def _changed(self, resource: WatchedResource) -> Callable[[Obj | None, Obj | None], None]:
        viewed = resource in VIEWED

        def changed(old: Obj | None, new: Obj | None) -> None:
            keys = {key for key in (fleet_of(old), fleet_of(new)) if key is not None}
            # The informer keeps the new object already: a StatefulSet's view before is made with the old one.
            before = (
                {key: self.view(*key, statefulset=_before(resource, key, old, new)) for key in keys} if viewed else {}
            )
            self._index(resource, old, new)
            for namespace, fleet in keys:
                applied = resource is STATEFULSETS and _as_applied(old) != _as_applied(new)
                moved = frozenset({"applied" if applied else "object"})
                if viewed and not applied:
                    moved = frozenset(view_changes(before[(namespace, fleet)], self.view(namespace, fleet)))
                    if not moved:
                        continue  # nothing a pass reads changed
                token = (resource, key_of(new if new is not None else old or {}))
                if token in self._writing:  # perhaps the write itself, before its answer: held until then
                    version = self.informers[resource].last_version(*token[1])
                    self._held.setdefault(token, []).append((version, (namespace, fleet), moved))
                    continue
                self.on_fleet_change(namespace, fleet, resource.plural, moved)

        return changed


async def read_cached(
    cache: WatchCache | None,
    resource: WatchedResource,
    namespace: str,
    name: str,
    read: Callable[[], Awaitable[Obj | None]],
) -> Obj | None:
    """The object from ``cache`` once it is synced for ``resource``, else ``read()`` (through the API)."""
    if cache is not None and cache.synced(resource):
        return cache.object(resource, namespace, name)
    return await read()


async def written(
    cache: WatchCache | None, resource: WatchedResource, call: Awaitable[Obj], key: Key | None = None
) -> Obj:
    """``call``'s answer, an object just created or changed, kept in ``cache`` (:meth:`WatchCache.wrote`); with
    ``key`` (the object's namespace and name), its watch events meanwhile poke nobody if they are the write itself
    (:meth:`WatchCache.begin_write`)."""
    if cache is None:
        return await call
    if key is not None:
        cache.begin_write(resource, key)
    try:
        obj = await call
        cache.wrote(resource, obj)
        return obj
    finally:
        if key is not None:
            cache.end_write(resource, key)


class CachedWorkloadObserver:
    """One fleet's workload read from the cache (``from_cache``), or through the API while the cache is not synced
    and whenever asked ``fresh``."""

    def __init__(self, cache: WatchCache, api: ApiWorkloadObserver, *, namespace: str, name: str) -> None:
        self.cache = cache
        self.api = api
        self.namespace = namespace
        self.name = name

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        if fresh or not self.cache.synced(STATEFULSETS, PODS, CLAIMS):
            return await self.api.observe(fresh=True)
        return self.cache.view(self.namespace, self.name)
