"""The restarts contributor: what the journal (or the Kafka evidence) said of the fleet's members since its last
counted pass, folded into ``status.restarts``, one Event per burst and the metrics (``planners.restarts`` decides).

Rules: only the restarts of the fleet's own pods count (an expiry only of a pod that stays: within ``spec.replicas``,
not departing, whose process was replaced: ``planners.restarts.expired_by_restart``, against the pods running as this
pass sees them, a pod on a node gone silent not among them), and a burst is charged only the rebalances they caused
(``planners.restarts.charged``). Activity waits in the fleet's memory (``FleetMemory.activity``: the reconciler adds the
journal follower's pages for the group the fleet follows, ``contributors.evidence`` what a describe showed); a pass
takes it and gives it back when its status write fails, so nothing is counted twice and a failed write loses nothing.
The Event and the metrics follow a successful write only. A burst settles a session timeout after its last restart: the
fleet is passed again then (``FleetRecord.again_at``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from berth.operator.planners import restarts
from berth.operator.planners.fleet_status import condition_status
from berth.operator.planners.instances import instance_ids
from berth.operator.planners.node_loss import EVICTION_API
from berth.operator.planners.scaling import LAST_SCALE_DOWN
from berth.operator.planners.status import READY
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen

#: How long a burst settles when the fleet's session timeout is not known yet (the coordinator's minimum).
DEFAULT_SETTLE_MS = 6_000


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    status, view, memory = draft.status, seen.view, a.memory
    quiet = condition_status(status, READY) == "True" and view.observation.settled and not view.observation.terminating
    taken, memory.activity = memory.activity, restarts.NOTHING
    timeout_ms = status.get("sessionTimeoutMs")
    placements = view.observation.placements
    running = {
        name: times
        for name, times in view.observation.times.items()
        if (where := placements.get(name)) is None or where.silent_since is None
    }
    plan = restarts.plan_restarts(
        status,
        taken.of(own(status, stays := staying(a.fleet.name, a.fleet.spec.replicas, status)), stays, running),
        revision=view.revision,
        rolling=view.rolling,
        quiet=quiet,
        last_started=view.last_started,
        evicted=any(p.disruption == EVICTION_API for p in view.observation.placements.values()),
        settle=timedelta(milliseconds=timeout_ms if isinstance(timeout_ms, int) else DEFAULT_SETTLE_MS),
        now=a.now(),
    )
    a.record.again_at = plan.due

    def counted() -> None:
        metrics = a.ports.metrics
        if metrics is not None and (plan.static or plan.rolls):
            metrics.restarted(a.record.namespace, a.record.name, static=plan.static, rolls=plan.rolls)

    def given_back() -> None:
        memory.activity = memory.activity + taken

    said = (plan.event,) if plan.event is not None else ()
    return Contribution(patch=plan.patch, said=said, written=counted, unwritten=given_back)


def own(status: Mapping[str, Any], stays: frozenset[str]) -> frozenset[str]:
    """The fleet's ids its status knows of: its pods that stay, those departing and those left to expire."""
    last = status.get(LAST_SCALE_DOWN)
    expiring = last.get("expiring") if isinstance(last, Mapping) else None
    return stays | set(status.get("departing") or ()) | set(expiring or ())


def staying(fleet_name: str, replicas: int, status: Mapping[str, Any]) -> frozenset[str]:
    """The fleet's instance ids whose restarts count: those within ``spec.replicas`` that are not departing."""
    departing = set(status.get("departing") or ())
    return frozenset(i for i in instance_ids(fleet_name, replicas) if i not in departing)
