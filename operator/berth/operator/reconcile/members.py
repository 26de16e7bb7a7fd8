"""The members step (Kafka fleets): instance ids held by members that are not their pods' processes — a restarted
pod refused UNRELEASED_INSTANCE_ID, two processes fencing each other — found (``planners.instance_conflicts``) from
the group as described and the pods' times, shown, and, where the fleet opts in, the stale members released.

Rules: each conflict is announced once per stale member (a Warning Event naming the pod), not once per pass; the
release is ONE LeaveGroup by instance id for the stale members of this pass, at most once per member, announced
(``StaleInstanceReleased``) and counted; the condition and the gauges follow every pass. What the operator
remembers between passes (who held each instance id since when) is :class:`InstanceMemory`'s, per fleet uid, and
goes with the fleet. Nothing here runs for a fleet on Berth's coordinator (it has no such failure: a restarted
static member replaces its previous one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from berth.operator.planners.conditions import Condition
from berth.operator.planners.instance_conflicts import (
    FENCING,
    UNRELEASED,
    Conflict,
    ConflictState,
    conflict_condition,
    mark_released,
    observe_instances,
    to_release,
)
from berth.operator.planners.observations import GroupDescription
from berth.operator.ports import WorkloadView
from berth.operator.spec import Fleet

if TYPE_CHECKING:  # they import this module's InstanceMemory (the context keeps one)
    from berth.operator.reconcile.admission import AdmittedGroup
    from berth.operator.reconcile.context import PassContext
    from berth.operator.reconcile.record import FleetRecord


@dataclass
class InstanceMemory:
    """Per fleet uid: who held each instance id since when, and the conflicts already announced."""

    states: dict[str, ConflictState] = field(default_factory=dict)
    announced: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)  # (reason, instance, member)

    def forget(self, fleet_uid: str) -> None:
        self.states.pop(fleet_uid, None)
        self.announced.pop(fleet_uid, None)


async def check_members(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    group: AdmittedGroup,
    view: WorkloadView,
    description: GroupDescription,
) -> tuple[Condition, ...]:
    """The InstanceIdConflict condition (Kafka fleets), after releasing stale members where the fleet says so."""
    kafka = fleet.spec.coordinator.kafka
    if kafka is None:
        return ()
    memory = context.instances
    state, conflicts = observe_instances(
        memory.states.get(record.uid, ConflictState()),
        fleet_name=fleet.name,
        description=description,
        pods=view.observation.times,
        kind=group.kind,
        now=context.now(),
    )
    announced = memory.announced.setdefault(record.uid, set())
    current = {(c.reason, c.instance_id, c.member_id) for c in conflicts}
    for conflict in conflicts:
        if (conflict.reason, conflict.instance_id, conflict.member_id) not in announced:
            record.events.warning(conflict.reason, conflict.message)
    announced.intersection_update(current)
    announced.update(current)
    released: tuple[Conflict, ...] = ()
    if kafka.release_stale_instances:
        released = to_release(state, conflicts)
        if released:
            ids = [c.instance_id for c in released]
            results = await group.coordinator.leave_instances(fleet.spec.group_id, ids)
            state = mark_released(state, released)
            answers = ", ".join(f"{i}: {results.get(i, 'NO_RESULT')}" for i in ids)
            record.events.info(
                "StaleInstanceReleased",
                f"removed the stale member{'s' if len(ids) > 1 else ''} holding {', '.join(ids)} from group"
                f" {fleet.spec.group_id} ({answers}), so the restarted pods can rejoin without waiting out the"
                " session timeout",
            )
    memory.states[record.uid] = state
    if context.metrics is not None:
        context.metrics.conflicts(
            record.namespace,
            record.name,
            unreleased=sum(1 for c in conflicts if c.reason == UNRELEASED),
            fencing=sum(1 for c in conflicts if c.reason == FENCING),
            released=len(released),
        )
    return (conflict_condition(conflicts, release=kafka.release_stale_instances),)
