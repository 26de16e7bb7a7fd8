"""Reading a ConsumerFleet fresh and writing its status through the ``status`` subresource, at once; and the
fleet's own ``berth.dev/fleet`` label, which its objects carry too (so ``-l berth.dev/fleet=NAME`` lists it).

Rules: status is written with a JSON merge patch on ``/status`` (``null`` removes a key), never through Kopf's
deferred ``patch``: the scaling planner's departing ids must be durable before the StatefulSet shrinks. Each write
returns the object as stored, so the caller always plans from what the API server holds. A write answered 409
Conflict is sent again, a few times: it carries no resourceVersion, so the API server applied none of it, and
sending the same patch again is what the write meant. Giving up at once would stop the pass, and after a batch leave
that loses the leave's only record (``lastScaleDown``): the next pass would leave again. Other failures leave as
:class:`~berth.operator.ports.ApiCallFailed`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kubernetes

from berth.operator.adapters.kube.calls import MERGE_PATCH, call_json, is_conflict, port_errors, read_or_none
from berth.operator.spec.names import GROUP, PLURAL, VERSION

#: How many times one status write is sent while the API server answers 409 Conflict, and the pause before the
#: n-th re-send (n times this); after that the conflict stops the pass like any other API error.
CONFLICT_ATTEMPTS = 5
CONFLICT_PAUSE_S = 0.05


class FleetApi:
    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(api_client)

    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The fleet as stored now; None when it is gone."""
        with port_errors():
            return await read_or_none(self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)

    async def patch_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into ``.status``; returns the whole object after the write."""
        with port_errors():
            return await self._patch_status(namespace, name, patch)

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

    async def label(self, namespace: str, name: str, labels: Mapping[str, str]) -> None:
        """Merge ``labels`` into the fleet's ``metadata.labels`` (the main resource, not its status)."""
        with port_errors():
            await call_json(
                self.custom.patch_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                {"metadata": {"labels": dict(labels)}},
                _content_type=MERGE_PATCH,
            )


class FleetStatusWriter:
    """One fleet's :class:`~berth.operator.ports.StatusPort` on Kubernetes: its ``status`` subresource."""

    def __init__(self, fleets: FleetApi, namespace: str, name: str) -> None:
        self.fleets = fleets
        self.namespace = namespace
        self.name = name

    async def patch_status(self, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        stored = await self.fleets.patch_status(self.namespace, self.name, patch)
        return dict(stored.get("status") or {})

    async def label(self, labels: Mapping[str, str]) -> None:
        await self.fleets.label(self.namespace, self.name, labels)
