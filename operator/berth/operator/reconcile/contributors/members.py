"""The members contributor (Kafka fleets): instance ids held by members that are not their pods' processes — a
restarted pod refused UNRELEASED_INSTANCE_ID, two processes fencing each other — found
(``planners.instance_conflicts``) from the group as described and the pods' times, shown, and, where the fleet opts
in, the stale members released.

Rules: each conflict is announced once per stale member (a Warning Event naming the pod), not once per pass; the
release is ONE LeaveGroup by instance id for the stale members of this pass, at most once per member, announced
(``StaleInstanceReleased``) and counted; the condition and the gauges follow every pass. What the operator
remembers between passes (who held each instance id since when, what was announced) is the fleet's memory's
(``FleetMemory.conflicts``, ``FleetMemory.announced``), and goes with the fleet. Nothing here runs for a fleet on
Berth's coordinator (it has no such failure: a restarted static member replaces its previous one).
"""

from __future__ import annotations

from berth.operator.planners.instance_conflicts import (
    FENCING,
    UNRELEASED,
    Conflict,
    conflict_condition,
    mark_released,
    observe_instances,
    to_release,
)
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    """The InstanceIdConflict condition (Kafka fleets), after releasing stale members where the fleet says so."""
    kafka = a.fleet.spec.coordinator.kafka
    if kafka is None:
        return NOTHING
    memory, record = a.memory, a.record
    state, conflicts = observe_instances(
        memory.conflicts,
        fleet_name=a.fleet.name,
        description=seen.description,
        pods=seen.view.observation.times,
        kind=a.group.kind,
        now=a.now(),
    )
    current = {(c.reason, c.instance_id, c.member_id) for c in conflicts}
    for conflict in conflicts:
        if (conflict.reason, conflict.instance_id, conflict.member_id) not in memory.announced:
            record.events.warning(conflict.reason, conflict.message)
    memory.announced = current
    released: tuple[Conflict, ...] = ()
    if kafka.release_stale_instances:
        released = to_release(state, conflicts)
        if released:
            await _release(a, released)
            state = mark_released(state, released)
    memory.conflicts = state
    if a.ports.metrics is not None:
        a.ports.metrics.conflicts(
            record.namespace,
            record.name,
            unreleased=sum(1 for c in conflicts if c.reason == UNRELEASED),
            fencing=sum(1 for c in conflicts if c.reason == FENCING),
            released=len(released),
        )
    return Contribution(notes=(conflict_condition(conflicts, release=kafka.release_stale_instances),))


async def _release(a: Admitted, released: tuple[Conflict, ...]) -> None:
    """ONE LeaveGroup by instance id for the stale members of this pass, announced."""
    group_id = a.fleet.spec.group_id
    ids = [c.instance_id for c in released]
    results = await a.group.coordinator.leave_instances(group_id, ids)
    answers = ", ".join(f"{i}: {results.get(i, 'NO_RESULT')}" for i in ids)
    a.record.events.info(
        "StaleInstanceReleased",
        f"removed the stale member{'s' if len(ids) > 1 else ''} holding {', '.join(ids)} from group"
        f" {group_id} ({answers}), so the restarted pods can rejoin without waiting out the session timeout",
    )
