"""The status step: what a pass saw, mirrored into the fleet's status, conditions, metrics and evidence; and the
two other endings of a pass, a refusal and an unreachable coordinator. Restarts since the last pass are counted
here too (``reconcile.restarts``).

Besides the workload and the group: the members checked (``reconcile.members``), a Kafka group's lag
(``status.lag``, the gauges; a lag that cannot be read is logged once and leaves the last one), the rebalances the
last scale-down cost once the group settles (``lastScaleDown.rebalances``, a ``Rebalanced`` Event; where the
coordinator reports generations), and the conditions the kind, the sizing and the group's protocol add.

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
from berth.operator.planners.coordinator_kind import kind_conditions, protocol_conditions
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.instances import instance_ids
from berth.operator.planners.lag import LAG, lag_status
from berth.operator.planners.observations import GroupDescription, GroupLag
from berth.operator.planners.ownership import FOREIGN_MEMBERS_EVENT, adopt_group_notes, foreign_report
from berth.operator.planners.pause import (
    NOT_PAUSED,
    PAUSED_EVENT,
    PAUSED_MESSAGE,
    RESUMED_EVENT,
    RESUMED_MESSAGE,
    paused_patch,
    was_paused,
)
from berth.operator.planners.restarts import NOTHING, activity_by_group
from berth.operator.planners.scaling import LAST_SCALE_DOWN, ScalingPlan, rebalances_since_leave
from berth.operator.planners.statefulset import FLEET_LABEL
from berth.operator.planners.status import COORDINATOR_REACHABLE, READY
from berth.operator.planners.volume_claims import CLAIMS_RETAINED_EVENT, report_retained_claims
from berth.operator.ports import ApiCallFailed, CoordinatorUnavailable, WorkloadPort, WorkloadView
from berth.operator.reconcile import restarts
from berth.operator.reconcile.admission import AdmittedGroup
from berth.operator.reconcile.context import PassContext, PassResult
from berth.operator.reconcile.members import check_members
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
    if plan.actions:  # what they changed, as written (a watching observer keeps what the operator wrote)
        view = await workload.observe()
        description = await group.describe()
    evidence = NOTHING
    if context.evidence is not None and not group.kind.keeps_journal:
        # No journal to follow: what this describe shows, compared with the last, is the evidence.
        observed = await context.evidence.observed(
            record.uid, group.evidence_key, description, context.now_ms(), view.observation.times
        )
        evidence = sum(activity_by_group(observed).values(), NOTHING)
    member_notes = await check_members(context, record, fleet, group, view, description)
    lag = await read_lag(context, record, group, description)
    was_refused = record.condition(fleet_status.SPEC_VALID) == "False"
    not_ready = _not_ready(fleet, view)
    blocked = fleet_status.token_secret_blocked(fleet, view.observation.config_errors.values()) if not_ready else None
    ready_before = fleet_status.find_condition(record.status, READY) or {}
    resumed = was_paused(record.status)
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
        notes=(
            *kind_conditions(fleet, group.kind),
            *sized.notes,
            *protocol_conditions(fleet, description, group.kind),
            *member_notes,
            *adopt_group_notes(fleet, record.status),
            *((NOT_PAUSED,) if resumed else ()),
        ),
        not_ready=not_ready,
        blocked=blocked,
    )
    if lag is not None:
        patch[LAG] = lag_status(lag)
    rebalances = rebalances_since_leave(record.status, state=description.state, generation=description.generation)
    if rebalances is not None:
        patch[LAST_SCALE_DOWN] = {"rebalances": rebalances}  # a merge patch: the record's other keys stay
        removed = ", ".join(record.status[LAST_SCALE_DOWN].get("removed") or ()) or "the departed members"
        record.events.info(
            "Rebalanced",
            f"group {fleet.spec.group_id} is Stable at generation {description.generation}:"
            f" {rebalances} rebalance{'' if rebalances == 1 else 's'} since {removed} left",
        )
    # What was seen is written once, at the end (with the restarts' count, when there is one to write).
    record.defer_changes(patch)
    foreign = foreign_report(fleet.spec.group_id, record.status, plan.foreign_members)
    record.defer(foreign.patch)
    if foreign.event is not None:
        record.events.warning(FOREIGN_MEMBERS_EVENT, foreign.event)
    if blocked is not None and ready_before.get("reason") != blocked.reason:
        record.events.warning(blocked.reason, blocked.message)
    await _label(record, fleet)
    follows = (group.coordinator.endpoint, fleet.spec.group_id) if group.kind.keeps_journal else None
    quiet = record.condition(READY) == "True" and view.observation.settled and not view.observation.terminating
    if follows is not None:
        await restarts.account_journal(context, record, view, follows, quiet=quiet)
    else:
        await restarts.account(context, record, view, evidence, quiet=quiet)
    if not record.status.get("departing"):  # a scale-down's claims are told once it is over, in one Event
        claims = report_retained_claims(
            fleet, record.status, claims=view.claims, existing_pods=view.observation.existing
        )
        record.defer(claims.patch)
        if claims.event is not None:
            record.events.info(CLAIMS_RETAINED_EVENT, claims.event)
    await record.flush()
    if was_refused:
        record.events.info("Accepted", "the spec is valid and the group is this fleet's: reconciling it")
    if resumed:
        record.events.info(RESUMED_EVENT, RESUMED_MESSAGE)
    count_state(context, record, refused=False)
    if reachable_before == "False":
        record.events.info("CoordinatorReachable", f"the coordinator at {group.where} answers again")
    return PassResult(waiting=plan.waiting, follows=follows)


def _not_ready(fleet: Fleet, view: WorkloadView) -> tuple[str, ...]:
    """The fleet's instance ids without a running, Ready pod (when the view names its unready pods)."""
    seen = view.observation
    ready = set(seen.existing) - set(seen.terminating) - seen.unready
    missing = tuple(name for name in instance_ids(fleet.name, fleet.spec.replicas) if name not in ready)
    # A local fleet does not name its unready members: name nothing rather than the wrong ones.
    return missing if len(missing) == max(0, fleet.spec.replicas - seen.ready) else ()


async def _label(record: FleetRecord, fleet: Fleet) -> None:
    """The fleet carries the label its objects carry, so ``kubectl get cf,sts,pods,pvc -l berth.dev/fleet=NAME``
    lists it with them (once: every pass reads the fleet as stored)."""
    labels = (record.body.get("metadata") or {}).get("labels") or {}
    if labels.get(FLEET_LABEL) != fleet.name:
        await record.status_port.label({FLEET_LABEL: fleet.name})


async def pause(context: PassContext, record: FleetRecord) -> PassResult:
    """A paused fleet: only its Paused condition (and Ready Unknown) written, nothing else done."""
    if not was_paused(record.status):
        record.events.info(PAUSED_EVENT, PAUSED_MESSAGE)
    await record.write_changes(paused_patch(record.status, now=context.now(), generation=record.generation))
    count_state(context, record, refused=False)
    return PassResult()


async def read_lag(
    context: PassContext, record: FleetRecord, group: AdmittedGroup, description: GroupDescription
) -> GroupLag | None:
    """The group's lag (None where the coordinator keeps no partition log, or it could not be read now)."""
    if not description.known:
        return None
    try:
        lag = await group.coordinator.group_lag(group.group_id, description)
    except CoordinatorUnavailable as error:
        if str(error) not in context.lag_problems_seen:
            context.lag_problems_seen.add(str(error))
            logger.warning("fleet %s/%s: lag not read: %s", record.namespace, record.name, error)
        return None
    if lag is not None and context.metrics is not None:
        shown = lag_status(lag)
        context.metrics.lag(record.namespace, record.name, total=shown["total"], max_partition=shown["maxPartition"])
    return lag


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
