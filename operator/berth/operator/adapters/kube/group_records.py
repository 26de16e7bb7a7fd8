"""The operator's own owner records of groups on coordinators that keep none (Kafka): one Lease per group, in the
namespace the operator keeps them in (its own by default, ``--group-owners-namespace``).

The :class:`~berth.operator.ports.GroupRecords` on Kubernetes. Rules:

- One Lease per ``(coordinator identity, group id)``, named ``berth-group-<first 40 hex digits of the key's
  SHA-256>``; its ``spec.holderIdentity`` is the owning fleet's uid, its annotations the key and the fleet's
  namespace and name. A Lease whose annotations name another key is not a record of this group (a refusal, never
  an overwrite).
- A claim is a create: the API server admits one create per name, so of two fleets claiming at once exactly one
  wins, whichever operator (installs sharing the namespace) sent it. A release deletes the Lease only when it names
  the releasing uid, with the uid and resourceVersion read as preconditions, so a record that changed hands in
  between is never deleted.
- Nothing renews or expires a record: it lives until its fleet's deletion releases it, or until the operator finds
  its fleet gone (``reconcile.ownership``) and releases it to reclaim the group.
- The holders this operator claimed or confirmed are remembered for :data:`CONFIRM_TTL_S`, so a fleet's every pass
  does not read its record again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from berth.operator.adapters.kube.calls import call_json, is_conflict, is_not_found, port_errors, read_or_none
from berth.operator.planners.observations import GroupOwnerRef
from berth.operator.ports import ApiCallFailed

COORDINATOR = "berth.dev/coordinator"
GROUP_ID = "berth.dev/group-id"
OWNER_NAMESPACE = "berth.dev/owner-namespace"
OWNER_NAME = "berth.dev/owner-name"
LABELS = {"app.kubernetes.io/managed-by": "berth-operator", "app.kubernetes.io/component": "group-owner"}
#: How long a record this operator holds is trusted without reading it again.
CONFIRM_TTL_S = 30.0


def record_name(coordinator: str, group_id: str) -> str:
    digest = hashlib.sha256(f"{coordinator}\n{group_id}".encode()).hexdigest()
    return f"berth-group-{digest[:40]}"


class LeaseGroupRecords:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        namespace: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = kubernetes.client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.clock = clock
        self._held: dict[str, tuple[float, GroupOwnerRef]] = {}

    async def owner(self, coordinator: str, group_id: str) -> GroupOwnerRef | None:
        name = record_name(coordinator, group_id)
        held = self._held.get(name)
        if held is not None and self.clock() - held[0] < CONFIRM_TTL_S:
            return held[1]
        with port_errors():
            lease = await read_or_none(self.leases.read_namespaced_lease, name, self.namespace)
        owner = None if lease is None else _owner_of(lease, coordinator, group_id)
        self._remember(name, owner)
        return owner

    async def claim(self, coordinator: str, group_id: str, owner: GroupOwnerRef) -> GroupOwnerRef:
        name = record_name(coordinator, group_id)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "labels": LABELS,
                "annotations": {
                    COORDINATOR: coordinator,
                    GROUP_ID: group_id,
                    OWNER_NAMESPACE: owner.namespace,
                    OWNER_NAME: owner.name,
                },
            },
            "spec": {"holderIdentity": owner.uid},
        }
        try:
            await call_json(self.leases.create_namespaced_lease, self.namespace, body)
        except Exception as error:
            if not is_conflict(error):  # 409 AlreadyExists: someone else's create won
                with port_errors():
                    raise
            self._held.pop(name, None)
            recorded = await self.owner(coordinator, group_id)
            if recorded is None:
                raise ApiCallFailed(f"Lease {self.namespace}/{name} was created and deleted again meanwhile") from None
            return recorded
        self._remember(name, owner)
        return owner

    async def release(self, coordinator: str, group_id: str, owner_uid: str) -> None:
        name = record_name(coordinator, group_id)
        self._held.pop(name, None)
        with port_errors():
            lease = await read_or_none(self.leases.read_namespaced_lease, name, self.namespace)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != owner_uid:
                return
            metadata = lease.get("metadata") or {}
            preconditions = {"uid": metadata.get("uid"), "resourceVersion": metadata.get("resourceVersion")}
            try:
                await call_json(
                    self.leases.delete_namespaced_lease, name, self.namespace, body={"preconditions": preconditions}
                )
            except Exception as error:
                # Gone already, or changed since it was read (a precondition fails with 409): not ours to delete.
                if not (is_not_found(error) or is_conflict(error)):
                    raise

    def _remember(self, name: str, owner: GroupOwnerRef | None) -> None:
        if owner is None:
            self._held.pop(name, None)
        else:
            self._held[name] = (self.clock(), owner)


def _owner_of(lease: dict[str, Any], coordinator: str, group_id: str) -> GroupOwnerRef:
    metadata = lease.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    uid = str((lease.get("spec") or {}).get("holderIdentity") or "")
    if annotations.get(COORDINATOR) != coordinator or annotations.get(GROUP_ID) != group_id or not uid:
        # Not a record of this group (made by hand, or another key of the same digest): it holds the name, and it
        # is nobody's to overwrite. An owner without a uid is never stale and never this fleet.
        return GroupOwnerRef("", f"Lease {metadata.get('name')}", uid or "-")
    return GroupOwnerRef(str(annotations.get(OWNER_NAMESPACE) or ""), str(annotations.get(OWNER_NAME) or ""), uid)
