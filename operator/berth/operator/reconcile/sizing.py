"""The sizing step: the session timeout of the fleet's group, and the workload applied with it.

Reads the advice (its problems are the advice source's to log), observes the workload, decides the timeout
(``planners.session_timeout``: the sizing planner within every bound — for the group's kind: a consumer-protocol
group's are the broker's ``group.consumer.*`` bounds — then hysteresis against the value in force), plans the
workload with it (``planners.statefulset``) and applies it. Where the kind keeps the timeout on the group
(KIP-848), it is set there (``consumer.session.timeout.ms`` and a heartbeat interval within the broker's bounds)
and is in no pod's environment, so changing it restarts nothing and is applied exactly. Refusals: no valid timeout
(``InvalidSessionTimeout``), an object of the fleet's name that is not its own (``NameTaken``), a template the
platform refuses (``TemplateRejected``). What was applied is announced; a new timeout is written to status (with
its reason) and announced once; ``SessionTimeoutSufficient`` says whether the coordinator's maximum let it cover
what the evidence asks for. The workload is observed again when the apply changed it. A changed pod template that
would roll the pods waits for its turn (``reconcile.rolls``: the StatefulSet left as it is, the session timeout in
force kept in status, ``TemplateApplied=False``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from berth.operator.planners import announcements, fleet_status
from berth.operator.planners.conditions import Condition
from berth.operator.planners.coordinator_kind import group_heartbeat_ms, session_bounds_for
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.planners.session_timeout import (
    allowed_range,
    choose_session_timeout,
    decide_session_timeout,
    sufficiency,
)
from berth.operator.planners.sizing import SessionTimeoutError
from berth.operator.planners.statefulset import PlannedWorkload, plan_statefulset
from berth.operator.ports import NotOurs, WorkloadRejected, WorkloadView
from berth.operator.reconcile import rolls
from berth.operator.reconcile.admission import Admitted


@dataclass(frozen=True, slots=True)
class Sized:
    """The workload as planned and applied, and as observed after the apply."""

    planned: PlannedWorkload
    view: WorkloadView
    #: Conditions the sizing adds to status (SessionTimeoutSufficient).
    notes: tuple[Condition, ...] = ()


async def size_and_apply(a: Admitted, coordinator_bounds: CoordinatorBounds, *, advice_key: str | None) -> Sized:
    """``advice_key``: the group's key in the advice (``planners.advice.advice_key``; None: no advice applies)."""
    fleet, group, record, workload = a.fleet, a.group, a.record, a.workload
    reading = await a.ports.advice.current()
    view = await workload.observe()
    spec = fleet.spec.session_timeout
    on_group = group.kind.session_timeout_on_group
    bounds = session_bounds_for(group.kind, coordinator_bounds)
    try:
        decision = decide_session_timeout(
            spec, fleet.spec.template, reading.for_group(advice_key), bounds, a.settings.session_bounds
        )
    except SessionTimeoutError as error:
        raise Refusal(fleet_status.INVALID_SESSION_TIMEOUT, f"no valid session timeout: {error}") from error
    current_ms = record.status.get("sessionTimeoutMs")
    current_reason = record.status.get("sessionTimeoutReason")
    replicas_now = view.observation.replicas or 0
    # A timeout kept on the group restarts no pod: it is applied exactly, as when the pods roll anyway.
    rolls_anyway = (
        on_group
        or view.applied_hash is None
        or (
            isinstance(current_ms, int)
            and planned_hash(_plan(a, current_ms, replicas_now).statefulset) != view.applied_hash
        )
    )
    choice = choose_session_timeout(
        decision,
        policy=spec.policy,
        current_ms=current_ms if isinstance(current_ms, int) else None,
        current_reason=current_reason if isinstance(current_reason, str) else None,
        allowed=allowed_range(spec, bounds, a.settings.session_bounds),
        pods_roll_anyway=rolls_anyway,
    )
    planned = _plan(a, choice.ms, replicas_now)
    turn = rolls.turn(a, view, planned)
    held = turn is not None and not turn.admitted
    try:
        applied = await workload.apply(planned, hold=held)
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
        session_timeout_ms=choice.ms,
        on_group=on_group,
    )
    for reason, message in said:
        record.events.info(reason, message)
    if on_group:
        heartbeat_ms = group_heartbeat_ms(
            choice.ms, coordinator_bounds, a.settings.defaults.preferred_heartbeat_interval_ms
        )
        await group.coordinator.set_group_session_timeout(fleet.spec.group_id, choice.ms, heartbeat_ms)
    if held and not on_group and isinstance(current_ms, int):  # the pods keep theirs until their turn
        kept_reason = current_reason if isinstance(current_reason, str) else choice.reason
        choice = replace(choice, ms=current_ms, reason=kept_reason, changed=False)
    if choice.ms != current_ms or choice.reason != current_reason:
        record.defer({"sessionTimeoutMs": choice.ms, "sessionTimeoutReason": choice.reason})
        if choice.ms != current_ms:
            where = f" (set on group {fleet.spec.group_id}: consumer.session.timeout.ms)" if on_group else ""
            record.events.info("SessionTimeout", f"session timeout {choice.ms} ms{where}: {choice.reason}")
    if applied.changed:  # as written (a watching observer keeps what the operator wrote: ``WatchCache.wrote``)
        view = await workload.observe()
    return Sized(planned, view, (sufficiency(decision, bounds), *rolls.noted(a, turn, applied.statefulset)))


def _plan(a: Admitted, session_timeout_ms: int, replicas: int) -> PlannedWorkload:
    return plan_statefulset(
        a.fleet,
        operator_defaults=a.settings.defaults,
        session_timeout_ms=session_timeout_ms,
        replicas=replicas,
        coordinator_ca=a.ports.coordinator_ca(),
        kafka_username=a.group.kafka_username,
    )
