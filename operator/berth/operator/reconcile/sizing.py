"""The sizing step: the session timeout the fleet's pods get, and the workload applied with it.

Reads the advice (its problems logged once each), observes the workload, decides the timeout
(``planners.session_timeout``: the sizing planner within every bound, then hysteresis against the value the pods
have), plans the workload with it (``planners.statefulset``) and applies it. Refusals: no valid timeout
(``InvalidSessionTimeout``), an object of the fleet's name that is not its own (``NameTaken``), a template the
platform refuses (``TemplateRejected``). What was applied is announced; a new timeout is written to status (with
its reason) and announced once. The workload is observed again when the apply changed it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from berth.operator.planners import announcements, fleet_status
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.planners.session_timeout import allowed_range, choose_session_timeout, decide_session_timeout
from berth.operator.planners.sizing import SessionTimeoutError
from berth.operator.planners.statefulset import PlannedWorkload, plan_statefulset
from berth.operator.ports import NotOurs, WorkloadPort, WorkloadRejected, WorkloadView
from berth.operator.reconcile.context import PassContext
from berth.operator.reconcile.record import FleetRecord
from berth.operator.spec import Fleet

logger = logging.getLogger("berth.operator.reconcile")


@dataclass(frozen=True, slots=True)
class Sized:
    """The workload as planned and applied, and as observed after the apply."""

    planned: PlannedWorkload
    view: WorkloadView


async def size_and_apply(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    bounds: CoordinatorBounds,
    workload: WorkloadPort,
    *,
    advice_key: str | None,
) -> Sized:
    """``advice_key``: the group's key in the advice (``planners.advice.advice_key``; None: no advice applies)."""
    reading = await context.advice.current()
    for problem in reading.problems:
        if problem not in context.advice_problems_seen:
            context.advice_problems_seen.add(problem)
            logger.warning("session-timeout advice not used: %s", problem)
    view = await workload.observe()
    spec = fleet.spec.session_timeout
    try:
        decision = decide_session_timeout(
            spec, fleet.spec.template, reading.for_group(advice_key), bounds, context.session_bounds
        )
    except SessionTimeoutError as error:
        raise Refusal(fleet_status.INVALID_SESSION_TIMEOUT, f"no valid session timeout: {error}") from error
    current_ms = record.status.get("sessionTimeoutMs")
    current_reason = record.status.get("sessionTimeoutReason")
    replicas_now = view.observation.replicas or 0
    rolls_anyway = view.applied_hash is None or (
        isinstance(current_ms, int)
        and planned_hash(_plan(context, fleet, current_ms, replicas_now).statefulset) != view.applied_hash
    )
    choice = choose_session_timeout(
        decision,
        policy=spec.policy,
        current_ms=current_ms if isinstance(current_ms, int) else None,
        current_reason=current_reason if isinstance(current_reason, str) else None,
        allowed=allowed_range(spec, bounds, context.session_bounds),
        pods_roll_anyway=rolls_anyway,
    )
    planned = _plan(context, fleet, choice.ms, replicas_now)
    try:
        applied = await workload.apply(planned)
    except NotOurs as error:
        raise Refusal(fleet_status.NAME_TAKEN, str(error)) from error
    except WorkloadRejected as error:
        raise Refusal(fleet_status.TEMPLATE_REJECTED, str(error)) from error
    said = announcements.applied(
        fleet,
        planned,
        statefulset=applied.statefulset,
        service=applied.service,
        budget=applied.disruption_budget,
    )
    for reason, message in said:
        record.events.info(reason, message)
    if choice.ms != current_ms or choice.reason != current_reason:
        await record.write({"sessionTimeoutMs": choice.ms, "sessionTimeoutReason": choice.reason})
        if choice.ms != current_ms:
            record.events.info("SessionTimeout", f"session timeout {choice.ms} ms: {choice.reason}")
    if applied.changed:
        view = await workload.observe()
    return Sized(planned, view)


def _plan(context: PassContext, fleet: Fleet, session_timeout_ms: int, replicas: int) -> PlannedWorkload:
    return plan_statefulset(
        fleet,
        operator_defaults=context.defaults,
        session_timeout_ms=session_timeout_ms,
        replicas=replicas,
        coordinator_ca=context.coordinator_ca(),
    )
