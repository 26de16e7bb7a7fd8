"""One fleet as a reconcile pass knows it: who it is, its status as last stored, and where its status and Events go.

Rules: every status write goes out at once (:meth:`FleetRecord.write`) and the pass continues from the status the
API server returns, so a pass (or an operator restarted anywhere) plans from what is stored; an empty patch writes
nothing (every write is a watch event for every client).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berth.operator.planners import fleet_status
from berth.operator.reconcile.context import PassContext


class FleetRecord:
    def __init__(self, context: PassContext, body: Mapping[str, Any]) -> None:
        self.body = body  # as read when the pass started (its status is superseded by ``status``)
        self.status: dict[str, Any] = dict(body.get("status") or {})
        self.events = context.events_for(body)
        self.status_port = context.status_for(body)
        metadata = body.get("metadata") or {}
        self.namespace = str(metadata.get("namespace") or "default")
        self.name = str(metadata.get("name") or "")
        self.uid = str(metadata.get("uid") or "")
        self.generation: int | None = metadata.get("generation")
        #: Groups a ``groupId`` edit left behind whose claims this pass kept (their members not gone yet): the pass is
        #: not over until they are released (``reconcile.ownership.settle``).
        self.claims_kept: tuple[str, ...] = ()
        #: When time alone may change what this pass found (``reconcile.restarts``: a burst of restarts settling),
        #: which no watched change announces: the fleet is passed again then (``PassResult.again_at``).
        self.again_at: datetime | None = None

    def condition(self, condition_type: str) -> str | None:
        """The status ("True", "False", "Unknown") of one of the fleet's conditions, None when it has none."""
        return fleet_status.condition_status(self.status, condition_type)

    async def write(self, patch: Mapping[str, Any]) -> None:
        if not patch:
            return
        self.status = dict(await self.status_port.patch_status(patch))

    async def write_changes(self, patch: Mapping[str, Any]) -> None:
        """Write only the entries of ``patch`` that would change the status."""
        await self.write(fleet_status.only_changes(self.status, patch))
