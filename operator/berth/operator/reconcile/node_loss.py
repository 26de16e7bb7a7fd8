"""The unreachable-nodes step: the fleet's pods on nodes that stopped reporting, in its status and Events.

What is said, and why Berth does nothing more, is ``planners.node_loss``'s; this step reads the pass's view of the
workload, defers the status change (sent with the pass's next write), sends the Events the change calls for, and
asks for the fleet to be passed again when a Terminating pod's confirmation falls due (no watch event announces
that a kubelet has stayed silent).
"""

from __future__ import annotations

from berth.operator.planners.node_loss import CONFIRM_ALLOWANCE, events_for, unreachable_nodes, unreachable_patch
from berth.operator.ports import WorkloadView
from berth.operator.reconcile.context import PassContext
from berth.operator.reconcile.record import FleetRecord


def report(context: PassContext, record: FleetRecord, view: WorkloadView) -> None:
    now = context.now()
    placements = view.observation.placements
    found = unreachable_nodes(record.name, placements, now)
    session_timeout = str(record.status.get("sessionTimeout") or "the session timeout")
    for kind, reason, message in events_for(found, record.status, session_timeout):
        (record.events.warning if kind == "Warning" else record.events.info)(reason, message)
    record.defer_changes(unreachable_patch(found, record.status))
    due = [
        placement.grace_ends + CONFIRM_ALLOWANCE
        for placement in placements.values()
        if placement.grace_ends is not None and placement.grace_ends + CONFIRM_ALLOWANCE >= now
    ]
    if due:
        again = min(due)
        record.again_at = again if record.again_at is None else min(record.again_at, again)
