"""ConsumerFleets on Kubernetes: read fresh or from a version-matched cache of watched fleets, and their status
written through the ``status`` subresource, at once.

Rules:

- Status is written with a JSON merge patch on ``/status`` (``null`` removes a key), never through Kopf's deferred
  ``patch``: the scaling planner's departing ids must be durable before the StatefulSet shrinks. Each write
  returns the object as stored, so the caller always plans from what the API server holds. A write answered 409
  Conflict is sent again, a few times: it carries no resourceVersion, so the API server applied none of it, and
  sending the same patch again is what the write meant. Giving up at once would stop the pass, and after a batch
  leave that loses the leave's only record (``lastScaleDown``): the next pass would leave again. Other failures
  leave as :class:`~berth.operator.ports.ApiCallFailed`.
- :class:`FleetCache` watches the fleets (``kube.informer``: list + watch, every fleet of the namespace or of all),
  started only once this replica leads, so its first list is taken after the previous leader's last write; every
  status write's answer is kept in it as the API server answered it (``Informer.put``).
- :class:`CachedFleets` is the passes' :class:`~berth.operator.ports.FleetReader`: a read that names a version it
  has seen elsewhere (``seen``: Kopf's watch delivered it) is answered from the cache once the cache holds that
  version or a newer one (``Informer.holds``), as a copy; any other read goes to the API server (and its answer
  into the cache). So a pass never plans from a fleet older than the one that asked for it, nor older than what
  this operator wrote, and a new leader never from what the previous one wrote before it took over.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import kubernetes

from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.calls import MERGE_PATCH, call_json, is_conflict, port_errors, read_or_none
from berth.operator.adapters.kube.informer import Informer, Obj, WatchedResource
from berth.operator.spec.names import GROUP, PLURAL, VERSION

#: How many times one status write is sent while the API server answers 409 Conflict, and the pause before the
#: n-th re-send (n times this); after that the conflict stops the pass like any other API error.
CONFLICT_ATTEMPTS = 5
CONFLICT_PAUSE_S = 0.05

FLEETS = WatchedResource("berth.dev", "v1alpha1", "consumerfleets")


def project_fleet(obj: Mapping[str, Any]) -> Obj:
    """A fleet as the passes read it: all of it but its ``managedFields``."""
    metadata = {key: value for key, value in (obj.get("metadata") or {}).items() if key != "managedFields"}
    return {**obj, "metadata": metadata}


class FleetCache:
    """The fleets of a namespace (or of all), watched; started once this replica leads."""

    def __init__(self, api: ApiSession, *, namespace: str | None) -> None:
        self.informer = Informer(
            api, FLEETS, namespace=namespace, selector="", project=project_fleet, on_change=lambda old, new: None
        )

    def start(self) -> None:
        self.informer.start()

    async def stop(self) -> None:
        await self.informer.stop()

    async def wait_synced(self) -> None:
        await self.informer.synced.wait()

    def holding(self, namespace: str, name: str, version: str) -> Obj | None:
        """A copy of the fleet once the cache holds ``version`` of it or a newer one, else None."""
        informer = self.informer
        if not informer.synced.is_set() or not informer.holds(namespace, name, version):
            return None
        found = informer.get(namespace, name)
        return copy.deepcopy(found) if found is not None else None

    def wrote(self, obj: Mapping[str, Any]) -> None:
        """A fleet as the API server answered a read or a write of it, kept as if watched."""
        self.informer.put(obj)


class FleetApi:
    """Fleets read and their status written through the API (the answers kept in ``cache``, when there is one)."""

    def __init__(self, api_client: kubernetes.client.ApiClient, cache: FleetCache | None = None) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.cache = cache

    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The fleet as stored now; None when it is gone."""
        with port_errors():
            found = await read_or_none(
                self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name
            )
        if found is not None and self.cache is not None:
            self.cache.wrote(found)
        return found

    async def patch_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into ``.status``; returns the whole object after the write."""
        with port_errors():
            stored = await self._patch_status(namespace, name, patch)
        if self.cache is not None:
            self.cache.wrote(stored)
        return stored

    async def _patch_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        attempt = 1
        while True:
            try:
                return await call_json(
                    self.custom.patch_namespaced_custom_object_status,
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    {"status": dict(patch)},
                    _content_type=MERGE_PATCH,
                )
            except Exception as error:
                if not is_conflict(error) or attempt >= CONFLICT_ATTEMPTS:
                    raise
            await asyncio.sleep(CONFLICT_PAUSE_S * attempt)
            attempt += 1


class CachedFleets:
    """The passes' :class:`~berth.operator.ports.FleetReader`: from the cache when it holds the version asked for,
    else through the API (module rules)."""

    def __init__(self, api: FleetApi, cache: FleetCache | None) -> None:
        self.api = api
        self.cache = cache

    async def read(self, namespace: str, name: str, *, seen: str | None = None) -> dict[str, Any] | None:
        if seen is not None and self.cache is not None:
            cached = self.cache.holding(namespace, name, seen)
            if cached is not None:
                return cached
        return await self.api.read(namespace, name)


class FleetStatusWriter:
    """One fleet's :class:`~berth.operator.ports.StatusPort` on Kubernetes: its ``status`` subresource."""

    def __init__(self, fleets: FleetApi, namespace: str, name: str) -> None:
        self.fleets = fleets
        self.namespace = namespace
        self.name = name

    async def patch_status(self, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        stored = await self.fleets.patch_status(self.namespace, self.name, patch)
        return dict(stored.get("status") or {})
