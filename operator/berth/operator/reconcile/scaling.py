"""The scaling step: observe -> ``plan_scaling`` -> execute, the same for a pass and a deletion.

The plan is the scaling planner's (``planners.scaling``), from the workload as observed, the group as described,
the fleet's status and the group's kind; the driver (``reconcile.driver``) carries it out, writing status through
the API after every step. A plan with a batch leave made from a cached view (``WorkloadView.from_cache``: watched
objects, which may lag a moment) is made again from a fresh view before anything is carried out: a leave cannot
be taken back, and a pod the cache has not seen yet must not pass for one that is gone. Every batch leave is timed
into the metrics (from planning to the answer, and from the first departure) and, where the coordinator keeps no
journal, recorded as evidence. Each new wait is announced once (a ``Waiting`` Event), not once per pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from berth.operator.planners.conditions import parse_time
from berth.operator.planners.coordinator_kind import deletes_group
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.scaling import BatchLeave, ScalingObservation, ScalingPlan, ScalingStatus, plan_scaling
from berth.operator.ports import WorkloadPort, WorkloadView
from berth.operator.reconcile.admission import AdmittedGroup
from berth.operator.reconcile.context import PassContext
from berth.operator.reconcile.driver import execute_plan
from berth.operator.reconcile.record import FleetRecord
from berth.operator.spec import Fleet


async def scale(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    group: AdmittedGroup,
    workload: WorkloadPort,
    view: WorkloadView,
    description: GroupDescription,
    *,
    deleting: bool,
) -> ScalingPlan:
    """Plan from what was observed and carry the plan out; the plan (its ``waiting`` says what remains)."""
    planned_at = context.now()
    plan = _plan(context, record, fleet, group, view, description, deleting=deleting)
    if view.from_cache and any(isinstance(action, BatchLeave) for action in plan.actions):
        view = await workload.observe(fresh=True)
        plan = _plan(context, record, fleet, group, view, description, deleting=deleting)
    await _execute(context, record, fleet, group, workload, plan, planned_at)
    announce_waiting(context, record, plan.waiting)
    return plan


def _plan(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    group: AdmittedGroup,
    view: WorkloadView,
    description: GroupDescription,
    *,
    deleting: bool,
) -> ScalingPlan:
    observed = view.observation
    return plan_scaling(
        ScalingObservation(
            fleet_name=fleet.name,
            desired_replicas=fleet.spec.replicas,
            workload_replicas=observed.replicas,
            existing_pods=observed.existing,
            workload_settled=observed.settled,
            status=ScalingStatus.from_status(record.status),
            pre_register=fleet.spec.pre_register,
            leave_on_scale_down=fleet.spec.leave_on_scale_down,
            deleting=deleting,
            group_members=description.static_instance_ids(),
            dynamic_members=tuple(m.member_id for m in description.members if m.group_instance_id is None),
            kind=group.kind,
            delete_group=deletes_group(fleet, group.kind),
            terminating=observed.terminating,
            stuck_allowance=context.stuck_allowance,
            unready=observed.unready,
            ordered_ready=fleet.spec.pod_management_policy == "OrderedReady",
            group_generation=description.generation if group.kind.reports_generation and description.known else None,
            nodes={pod: placement.node for pod, placement in observed.placements.items()},
        ),
        now=context.now(),
    )


async def _execute(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    group: AdmittedGroup,
    workload: WorkloadPort,
    plan: ScalingPlan,
    planned_at: datetime,
) -> None:
    recorder = context.evidence if not group.kind.keeps_journal else None

    async def on_leave(leave: BatchLeave, results: Mapping[str, str]) -> None:
        if context.metrics is not None:
            answered = context.now()
            started = parse_time(leave.departing_since)
            context.metrics.left(
                record.namespace,
                record.name,
                removed=sum(1 for name in leave.member_ids if results.get(name) == "NONE"),
                delay_s=(answered - planned_at).total_seconds(),
                since_start_s=(answered - started).total_seconds() if started else None,
            )
        if recorder is not None:
            await recorder.removed(
                record.uid, group.evidence_key, results, everyone=leave.everyone, now_ms=context.now_ms()
            )

    await execute_plan(
        plan,
        group_id=fleet.spec.group_id,
        workload=workload,
        coordinator=group.coordinator,
        patch_status=record.write_changes,
        events=record.events,
        now=context.now,
        on_leave=on_leave,
        owner_uid=group.kind.owner_uid(record.uid),
    )


def announce_waiting(context: PassContext, record: FleetRecord, waiting: str | None) -> None:
    if waiting is None:
        context.last_waiting.pop(record.uid, None)
    elif context.last_waiting.get(record.uid) != waiting:
        context.last_waiting[record.uid] = waiting
        record.events.info("Waiting", waiting)
