"""The restarts step of a pass: what the journal (or the Kafka evidence) said of the fleet's members since its last
pass, counted into ``status.restarts``, one Event per burst and the metrics (``planners.restarts`` decides).

Rules: activity between two passes waits in the context's ``ActivityLedger`` (filled by the reconciler as the journal
follower reads pages; only for groups a fleet follows, so it stays as small as the fleets); a pass takes its group's
share and gives it back when its status write fails, so nothing is counted twice and a failed write loses nothing.
The Event and the metrics follow a successful write only.
"""

from __future__ import annotations

from datetime import timedelta

from berth.operator.planners.node_loss import EVICTION_API
from berth.operator.planners.restarts import GroupActivity, plan_restarts
from berth.operator.ports import ApiCallFailed, WorkloadView
from berth.operator.reconcile.context import PassContext
from berth.operator.reconcile.record import FleetRecord

#: How long a burst settles when the fleet's session timeout is not known yet (the coordinator's minimum).
DEFAULT_SETTLE_MS = 6_000


async def account(
    context: PassContext, record: FleetRecord, view: WorkloadView, activity: GroupActivity, *, quiet: bool
) -> None:
    """Fold ``activity`` into ``status.restarts``; post the Event of a burst that ended and count the metrics."""
    timeout_ms = record.status.get("sessionTimeoutMs")
    plan = plan_restarts(
        record.status,
        activity,
        revision=view.revision,
        rolling=view.rolling,
        quiet=quiet,
        last_started=view.last_started,
        settle=timedelta(milliseconds=timeout_ms if isinstance(timeout_ms, int) else DEFAULT_SETTLE_MS),
        now=context.now(),
        evicted=any(p.disruption == EVICTION_API for p in view.observation.placements.values()),
    )
    await record.write_changes(plan.patch)
    record.again_at = plan.due
    if plan.event is not None:
        kind, reason, message = plan.event
        (record.events.info if kind == "Normal" else record.events.warning)(reason, message)
    if context.metrics is not None and (plan.static or plan.rolls):
        context.metrics.restarted(record.namespace, record.name, static=plan.static, rolls=plan.rolls)


async def account_journal(
    context: PassContext, record: FleetRecord, view: WorkloadView, follows: tuple[str, str], *, quiet: bool
) -> None:
    """:func:`account` for the activity the journal follower kept for this fleet's group, given back when the
    status write fails."""
    activity = context.activity.take(*follows)
    try:
        await account(context, record, view, activity, quiet=quiet)
    except ApiCallFailed:
        context.activity.add(follows[0], {follows[1]: activity})
        raise
