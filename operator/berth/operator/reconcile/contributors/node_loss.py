"""The unreachable-nodes contributor: the fleet's pods on nodes that stopped reporting, in its status and Events.

What is said, and why Berth does nothing more, is ``planners.node_loss``'s; this contributor reads the pass's view of
the workload, contributes ``status.unreachableNodes``, the Events the change calls for, and asks for the fleet to be
passed again when a Terminating pod's confirmation falls due (no watch event announces that a kubelet has stayed
silent). It runs after ``restarts``, which sets the record's next due time: this one only brings it forward.
"""

from __future__ import annotations

from berth.operator.planners.node_loss import CONFIRM_ALLOWANCE, events_for, unreachable_nodes, unreachable_patch
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    now = a.now()
    placements = seen.view.observation.placements
    found = unreachable_nodes(a.record.name, placements, now)
    timeout_ms = draft.before.get("sessionTimeoutMs")
    session_timeout = f"{timeout_ms} ms" if isinstance(timeout_ms, int) else "the session timeout"
    due = [
        placement.grace_ends + CONFIRM_ALLOWANCE
        for placement in placements.values()
        if placement.grace_ends is not None and placement.grace_ends + CONFIRM_ALLOWANCE >= now
    ]
    if due:
        record = a.record
        record.again_at = min(due) if record.again_at is None else min(record.again_at, *due)
    return Contribution(
        patch=unreachable_patch(found, draft.before),
        said=tuple(events_for(found, draft.before, session_timeout)),
    )
