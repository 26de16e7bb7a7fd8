"""One fleet as a reconcile pass knows it: who it is, its status as last stored, and where its status and Events go.

Rules: a status write goes out at once (:meth:`FleetRecord.write_changes`) and the pass continues from the status
the API server returns, so a pass (or an operator restarted anywhere) plans from what is stored; a patch that would
change nothing stored, where nothing pending touches it either, writes nothing (every write is a watch event for
every client). What no step that cannot be taken back depends on (the claim recorded, the session timeout chosen,
the expected members recorded after the coordinator has them, what the pass saw of the workload and the group) is
deferred (:meth:`FleetRecord.defer`): seen in ``status`` at once, sent with the pass's next write or its last
(:meth:`FleetRecord.flush`, however the pass ends); only a pass killed before then leaves it to the next pass to
decide again. So a fleet's first pass writes its status once: what must be durable before a step that cannot be
taken back (departing ids before the StatefulSet shrinks, a forgotten list of expected members before the
coordinator's changes, a leave's record) is what writes before the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berth.operator.planners import fleet_status
from berth.operator.reconcile.context import Ports


class FleetRecord:
    def __init__(self, ports: Ports, body: Mapping[str, Any]) -> None:
        self.body = body  # as read when the pass started (its status is superseded by ``status``)
        #: The status as the API server last answered (or as read), and as the pass sees it (with what it deferred).
        self.stored: dict[str, Any] = dict(body.get("status") or {})
        self.status: dict[str, Any] = dict(self.stored)
        self.events = ports.events_for(body)
        self.status_port = ports.status_for(body)
        metadata = body.get("metadata") or {}
        self.namespace = str(metadata.get("namespace") or "default")
        self.name = str(metadata.get("name") or "")
        self.uid = str(metadata.get("uid") or "")
        self.generation: int | None = metadata.get("generation")
        #: Groups a ``groupId`` edit left behind whose claims this pass kept (their members not gone yet): the pass is
        #: not over until they are released (``reconcile.ownership.settle``).
        self.claims_kept: tuple[str, ...] = ()
        #: When time alone may change what this pass found (``contributors.restarts``: a burst of restarts settling),
        #: which no watched change announces: the fleet is passed again then (``PassResult.again_at``).
        self.again_at: datetime | None = None
        #: Whether this pass left the fleet waiting for a turn to roll (``reconcile.rolls``); a pass that did not (it
        #: ended before the roll step, or needed no turn) takes the fleet out of the line when it ends.
        self.in_line = False
        self._deferred: list[dict[str, Any]] = []  # merge patches not sent yet, in order

    def condition(self, condition_type: str) -> str | None:
        """The status ("True", "False", "Unknown") of one of the fleet's conditions, None when it has none."""
        return fleet_status.condition_status(self.status, condition_type)

    async def write(self, patch: Mapping[str, Any]) -> None:
        """``patch`` (with whatever was deferred) written now; nothing when ``patch`` is empty."""
        if patch:
            self._pending(patch)
            await self.flush()

    async def write_changes(self, patch: Mapping[str, Any]) -> None:
        """``patch`` durable now: written (with whatever was deferred) unless it would change nothing stored and
        nothing deferred touches it; only its entries that change the status are sent."""
        pending_keys = {key for deferred in self._deferred for key in deferred}
        if fleet_status.only_changes(self.stored, patch) or pending_keys & patch.keys():
            await self.write(fleet_status.only_changes(self.status, patch) or {})
            await self.flush()

    def defer(self, patch: Mapping[str, Any]) -> None:
        """``patch`` (a merge patch) seen in ``status`` at once, sent with the next write or :meth:`flush`."""
        if patch:
            self._pending(patch)
            self.status = fleet_status.merge_patch(self.status, patch)

    def defer_changes(self, patch: Mapping[str, Any]) -> None:
        """:meth:`defer` of the entries of ``patch`` that would change the status."""
        self.defer(fleet_status.only_changes(self.status, patch))

    async def flush(self) -> None:
        """What was deferred, written now (nothing when nothing is)."""
        while self._deferred:
            self.stored = dict(await self.status_port.patch_status(self._deferred[0]))
            self._deferred.pop(0)
            self.status = self.stored
            for deferred in self._deferred:  # what is still to send, as the pass already sees it
                self.status = fleet_status.merge_patch(self.status, deferred)

    def _pending(self, patch: Mapping[str, Any]) -> None:
        """``patch`` after what is pending: in the last pending patch where one merge patch says both exactly."""
        if self._deferred and fleet_status.composable(self._deferred[-1], patch):
            self._deferred[-1] = fleet_status.merge_patch(self._deferred[-1], patch, keep_nulls=True)
        else:
            self._deferred.append(dict(patch))
