"""``FleetDisruptionBudget``: one fleet's PodDisruptionBudget (policy/v1), kept as planned or deleted when disabled.

Rules (``owned_objects`` for what all owned objects share):

- Created as planned; patched only when the plan's hash changed (``maxUnavailable``, the selector and the
  unhealthy-pod eviction policy are all mutable on a policy/v1 budget).
- Turned off (nothing planned): the fleet's own budget is deleted, with a precondition on its uid so that an
  object someone else created meanwhile under the name is never deleted; a budget the fleet does not control is
  left alone. Turned on over such a foreign budget: :class:`~berth.operator.ports.NotOurs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes

from berth.operator.adapters.kube.calls import JSON_PATCH, call_json, is_conflict, is_not_found, read_or_none
from berth.operator.adapters.kube.owned_objects import controlled_by, ensure_owned
from berth.operator.adapters.kube.watch_cache import DISRUPTION_BUDGETS, WatchCache, read_cached, written
from berth.operator.ports import Applied

KIND = "PodDisruptionBudget"


class FleetDisruptionBudget:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        namespace: str,
        name: str,
        fleet_uid: str | None,
        cache: WatchCache | None = None,
    ) -> None:
        self.policy = kubernetes.client.PolicyV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.fleet_uid = fleet_uid
        self.cache = cache

    async def ensure(self, planned: Mapping[str, Any] | None) -> Applied:
        """Make the fleet's budget what ``planned`` says: created, patched, unchanged, or deleted (None)."""
        if planned is None:
            return await self._delete(await self._read())
        policy = self.policy
        return await ensure_owned(
            KIND,
            planned,
            self.fleet_uid,
            read=self._read,
            reread=self._fetch,
            create=lambda body: written(
                self.cache,
                DISRUPTION_BUDGETS,
                call_json(policy.create_namespaced_pod_disruption_budget, self.namespace, body),
                key=(self.namespace, self.name),
            ),
            patch=lambda ops: written(
                self.cache,
                DISRUPTION_BUDGETS,
                call_json(
                    policy.patch_namespaced_pod_disruption_budget,
                    self.name,
                    self.namespace,
                    ops,
                    _content_type=JSON_PATCH,
                ),
                key=(self.namespace, self.name),
            ),
            changes=lambda plan: [
                {"op": "add", "path": f"/spec/{key}", "value": plan["spec"][key]} for key in sorted(plan["spec"])
            ],
        )

    async def _delete(self, live: Mapping[str, Any] | None) -> Applied:
        if live is None or not controlled_by(live, self.fleet_uid):
            return Applied.UNCHANGED
        uid = (live.get("metadata") or {}).get("uid")
        try:
            await call_json(
                self.policy.delete_namespaced_pod_disruption_budget,
                self.name,
                self.namespace,
                body={"preconditions": {"uid": uid}},
            )
        except Exception as error:
            # Gone already, or replaced by another object (409: the uid precondition failed): not ours to delete.
            if is_not_found(error) or is_conflict(error):
                return Applied.UNCHANGED
            raise
        return Applied.DELETED

    async def _read(self) -> dict[str, Any] | None:
        return await read_cached(self.cache, DISRUPTION_BUDGETS, self.namespace, self.name, self._fetch)

    async def _fetch(self) -> dict[str, Any] | None:
        return await read_or_none(self.policy.read_namespaced_pod_disruption_budget, self.name, self.namespace)
