"""The scaling step: observe -> ``plan_scaling`` -> execute, the same for a pass and a deletion.

The plan is the scaling planner's (``planners.scaling``), from the workload as observed, the group as described,
the fleet's status and the group's kind; the driver (``reconcile.driver``) carries it out, writing status through
the API after every step. A plan with a batch leave made from a cached view (``WorkloadView.from_cache``: watched
objects, which may lag a moment) is made again from a fresh view before anything is carried out: a leave cannot
be taken back, and a pod the cache has not seen yet must not pass for one that is gone. Every batch leave is timed
into the metrics (from planning to the answer, and from the first departure) and, where the coordinator keeps no
journal, recorded as evidence. Each new wait is announced once (a ``Waiting`` Event), not once per pass (the fleet's
memory holds the last wait said).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from berth.operator.planners.conditions import parse_time
from berth.operator.planners.coordinator_kind import deletes_group
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.ownership import OwnedGroup, may_delete
from berth.operator.planners.scaling import BatchLeave, ScalingObservation, ScalingPlan, ScalingStatus, plan_scaling
from berth.operator.ports import WorkloadView
from berth.operator.reconcile import evidence_journal
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.driver import LeaveListener, execute_plan
from berth.operator.reconcile.scope import Scope


async def scale(a: Admitted, view: WorkloadView, description: GroupDescription, *, deleting: bool) -> ScalingPlan:
    """Plan from what was observed and carry the plan out; the plan (its ``waiting`` says what remains)."""
    planned_at = a.now()
    plan = _plan(a, view, description, deleting=deleting)
    if view.from_cache and any(isinstance(action, BatchLeave) for action in plan.actions):
        view = await a.workload.observe(fresh=True)
        plan = _plan(a, view, description, deleting=deleting)
    await execute_plan(plan, a, on_leave=_leave_listener(a, planned_at))
    announce_waiting(a, plan.waiting)
    return plan


def _plan(a: Admitted, view: WorkloadView, description: GroupDescription, *, deleting: bool) -> ScalingPlan:
    observed, fleet, kind = view.observation, a.fleet, a.group.kind
    return plan_scaling(
        ScalingObservation(
            fleet_name=fleet.name,
            desired_replicas=fleet.spec.replicas,
            workload_replicas=observed.replicas,
            existing_pods=observed.existing,
            workload_settled=observed.settled,
            status=ScalingStatus.from_status(a.record.status),
            pre_register=fleet.spec.pre_register,
            leave_on_scale_down=fleet.spec.leave_on_scale_down,
            deleting=deleting,
            group_members=description.static_instance_ids(),
            dynamic_members=tuple(m.member_id for m in description.members if m.group_instance_id is None),
            kind=kind,
            delete_group=deletes_group(fleet, kind) and kept_or_created(a),
            terminating=observed.terminating,
            stuck_allowance=a.settings.stuck_allowance,
            unready=observed.unready,
            ordered_ready=fleet.spec.pod_management_policy == "OrderedReady",
            group_generation=description.generation if kind.reports_generation and description.known else None,
            nodes={pod: placement.node for pod, placement in observed.placements.items()},
        ),
        now=a.now(),
    )


def kept_or_created(a: Admitted) -> bool:
    """Whether the deletion may delete the group, as far as ownership goes (``planners.ownership.may_delete``: on
    Kafka only a group the fleet created)."""
    claimed = OwnedGroup(a.group.target.identity, a.group.group_id)
    return may_delete(a.record.status, claimed, records_owners=a.group.kind.records_owners)


def _leave_listener(a: Admitted, planned_at: datetime) -> LeaveListener:
    """What a batch leave is worth besides its status: its timing in the metrics, and evidence where the group's
    coordinator keeps no journal."""
    record, metrics = a.record, a.ports.metrics

    async def on_leave(leave: BatchLeave, results: Mapping[str, str]) -> None:
        if metrics is not None:
            answered = a.now()
            started = parse_time(leave.departing_since)
            metrics.left(
                record.namespace,
                record.name,
                removed=sum(1 for name in leave.member_ids if results.get(name) == "NONE"),
                delay_s=(answered - planned_at).total_seconds(),
                since_start_s=(answered - started).total_seconds() if started else None,
            )
        if not a.group.kind.keeps_journal:
            await evidence_journal.removed(a, results, everyone=leave.everyone)

    return on_leave


def announce_waiting(scope: Scope, waiting: str | None) -> None:
    """A ``Waiting`` Event for each new wait (the fleet's memory holds the last one said)."""
    memory = scope.memory
    if waiting is not None and memory.waiting != waiting:
        scope.record.events.info("Waiting", waiting)
    memory.waiting = waiting
