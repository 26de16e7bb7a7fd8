"""The status step: what a pass saw, mirrored into the fleet's status, conditions, metrics and evidence; and the
two other endings of a pass, a refusal and an unreachable coordinator.

Rules: every write is trimmed to what changes (``fleet_status.only_changes``), so an idle fleet's pass writes
nothing. A refusal is announced (a Warning Event) only when status does not already say exactly it. A coordinator
that cannot be asked is recorded (CoordinatorReachable=False, a Warning Event on the transition, in the port's
own words, never text the coordinator sent) and nothing after the failed call runs, so nothing is recorded as
done; the condition is auxiliary, so a failure to write it is logged, not raised. The coordinator answering again
is announced once.
"""

from __future__ import annotations

import logging

from berth.operator.planners import fleet_status
from berth.operator.planners.coordinator_kind import kind_conditions
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.ownership import FOREIGN_MEMBERS_EVENT, adopt_group_notes, foreign_report
from berth.operator.planners.scaling import ScalingPlan
from berth.operator.planners.status import COORDINATOR_REACHABLE, READY
from berth.operator.planners.volume_claims import CLAIMS_RETAINED_EVENT, report_retained_claims
from berth.operator.ports import ApiCallFailed, CoordinatorUnavailable, WorkloadPort
from berth.operator.reconcile.admission import AdmittedGroup
from berth.operator.reconcile.context import PassContext, PassResult
from berth.operator.reconcile.record import FleetRecord
from berth.operator.reconcile.sizing import Sized
from berth.operator.spec import Fleet

logger = logging.getLogger("berth.operator.reconcile")


async def mirror(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    group: AdmittedGroup,
    workload: WorkloadPort,
    sized: Sized,
    plan: ScalingPlan,
    description: GroupDescription,
    *,
    reachable_before: str | None,
) -> PassResult:
    """Status after the pass: the workload and the group as planned from, or looked at again when the plan acted."""
    view = sized.view
    if plan.actions:
        view = await workload.observe()
        description = await group.describe()
    if context.evidence is not None and not group.kind.keeps_journal:
        # No journal to follow: what this describe shows, compared with the last, is the evidence.
        await context.evidence.observed(record.uid, group.evidence_key, description, context.now_ms())
    was_refused = record.condition(fleet_status.SPEC_VALID) == "False"
    patch = fleet_status.view_patch(
        fleet_name=fleet.name,
        group_id=fleet.spec.group_id,
        desired_replicas=fleet.spec.replicas,
        status=record.status,
        selector=sized.planned.selector,
        running=view.running,
        ready=view.observation.ready,
        description=description,
        unreachable_reason="",
        now=context.now(),
        generation=record.generation,
        notes=(*kind_conditions(fleet, group.kind), *adopt_group_notes(fleet, record.status)),
    )
    await record.write_changes(patch)
    foreign = foreign_report(fleet.spec.group_id, record.status, plan.foreign_members)
    await record.write(foreign.patch)
    if foreign.event is not None:
        record.events.warning(FOREIGN_MEMBERS_EVENT, foreign.event)
    claims = report_retained_claims(fleet, record.status, claims=view.claims, existing_pods=view.observation.existing)
    await record.write(claims.patch)
    if claims.event is not None:
        record.events.info(CLAIMS_RETAINED_EVENT, claims.event)
    if was_refused:
        record.events.info("Accepted", "the spec is valid and the group is this fleet's: reconciling it")
    count_state(context, record, refused=False)
    if reachable_before == "False":
        record.events.info("CoordinatorReachable", f"the coordinator at {group.where} answers again")
    follows = (group.coordinator.endpoint, fleet.spec.group_id) if group.kind.keeps_journal else None
    return PassResult(waiting=plan.waiting, follows=follows)


async def refuse(context: PassContext, record: FleetRecord, refusal: Refusal) -> PassResult:
    """SpecValid=False (and Ready=False) saying why; nothing more is done this pass."""
    if not fleet_status.refused_before(record.status, refusal.reason, refusal.message):
        record.events.warning(refusal.reason, refusal.message)
    patch = fleet_status.refusal_patch(
        record.status,
        reason=refusal.reason,
        message=refusal.message,
        now=context.now(),
        generation=record.generation,
    )
    await record.write_changes(patch)
    count_state(context, record, refused=True)
    return PassResult(refused=True)


async def record_unreachable(context: PassContext, record: FleetRecord, error: CoordinatorUnavailable) -> None:
    was = fleet_status.find_condition(record.status, COORDINATOR_REACHABLE) or {}
    message = str(error)  # the port's own words, naming the coordinator (never text it sent)
    patch = fleet_status.unreachable_patch(
        record.status,
        reason=message,
        now=context.now(),
        generation=record.generation,
        condition_reason=error.reason,
    )
    try:
        await record.write_changes(patch)
    except ApiCallFailed as write_error:  # the condition is auxiliary: the retry matters more
        logger.warning("could not record the unreachable coordinator: %s", write_error)
    if was.get("status") != "False" or was.get("reason") != error.reason:
        record.events.warning(
            f"Coordinator{error.reason}", f"{message}; nothing was recorded as done, retrying with backoff"
        )


def count_state(context: PassContext, record: FleetRecord, *, refused: bool) -> None:
    if context.metrics is not None:
        ready = record.condition(READY) == "True"
        departing = len(record.status.get("departing") or ())
        context.metrics.state(record.namespace, record.name, ready=ready, refused=refused, departing=departing)
