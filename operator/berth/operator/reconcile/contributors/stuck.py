"""The stuck-group contributor: ``GroupStuck``, ``status.stuck`` and the fleet's ownership gauges, from who owns
which partition (``planners.stuck_group`` decides). The partitions known to exist are those the lag contributor
last found (``FleetMemory.known_partitions``: Kafka's partition log, or Berth's committed offsets) and those
assigned; Ready pods are the running pods not unready. A ``GroupStuck`` that turns True is a Warning Event, once;
the fleet is passed again when a situation reaches the threshold (``FleetRecord.again_at``), so it is seen on time
without a pass per second.
"""

from __future__ import annotations

from berth.operator.planners.stuck_group import GROUP_STUCK, STUCK, judge
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    description = seen.description
    if not description.known:
        return NOTHING
    observation = seen.view.observation
    ready = observation.existing - set(observation.terminating) - observation.unready
    before = draft.before.get(STUCK)
    verdict = judge(
        description,
        a.memory.known_partitions,
        ready,
        before if isinstance(before, dict) else None,
        now=draft.now,
        threshold=a.settings.stuck_group,
    )
    if verdict.again_at is not None:
        due = a.record.again_at
        a.record.again_at = verdict.again_at if due is None else min(due, verdict.again_at)
    metrics = a.ports.metrics
    if metrics is not None:
        metrics.ownership(
            a.record.namespace,
            a.record.name,
            unowned=len(verdict.unowned),
            idle=len(verdict.idle),
            stuck=verdict.stuck,
        )
    was = a.record.condition(GROUP_STUCK)
    said = (("Warning", "GroupStuck", verdict.condition.message),) if verdict.stuck and was != "True" else ()
    return Contribution(patch={STUCK: verdict.status}, notes=(verdict.condition,), said=said)
