"""The two endings of a pass other than the status step: a refusal and an unreachable coordinator; and the state
gauges every ending counts.

Rules: a refusal is SpecValid=False (and Ready=False) saying why, announced (a Warning Event) only when status does
not already say exactly it; nothing more is done that pass. A coordinator that cannot be asked is recorded
(CoordinatorReachable=False, a Warning Event on the transition, in the port's own words, never text the
coordinator sent) and nothing after the failed call runs, so nothing is recorded as done; the condition is
auxiliary, so a failure to write it is logged, not raised; the state gauges follow (Ready Unknown: not ready). (The
coordinator answering again is said by the status step: ``contributors.workload``.) Every write is trimmed to what
changes (``fleet_status.only_changes``).
"""

from __future__ import annotations

import logging

from berth.operator.planners import fleet_status
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.status import COORDINATOR_REACHABLE, READY
from berth.operator.ports import ApiCallFailed, CoordinatorUnavailable
from berth.operator.reconcile.context import PassResult
from berth.operator.reconcile.scope import Scope

logger = logging.getLogger("berth.operator.reconcile")


async def refuse(scope: Scope, refusal: Refusal) -> PassResult:
    """SpecValid=False (and Ready=False) saying why; nothing more is done this pass."""
    record = scope.record
    if not fleet_status.refused_before(record.status, refusal.reason, refusal.message):
        record.events.warning(refusal.reason, refusal.message)
    patch = fleet_status.refusal_patch(
        record.status,
        reason=refusal.reason,
        message=refusal.message,
        now=scope.now(),
        generation=record.generation,
    )
    await record.write_changes(patch)
    count_state(scope, refused=True)
    return PassResult(refused=True)


async def record_unreachable(scope: Scope, error: CoordinatorUnavailable) -> None:
    record = scope.record
    was = fleet_status.find_condition(record.status, COORDINATOR_REACHABLE) or {}
    message = str(error)  # the port's own words, naming the coordinator (never text it sent)
    patch = fleet_status.unreachable_patch(
        record.status,
        reason=message,
        now=scope.now(),
        generation=record.generation,
        condition_reason=error.reason,
    )
    try:
        await record.write_changes(patch)
    except ApiCallFailed as write_error:  # the condition is auxiliary: the retry matters more
        logger.warning("could not record the unreachable coordinator: %s", write_error)
    count_state(scope, refused=False)  # the gauges follow Ready, now Unknown (an admitted fleet is not refused)
    if was.get("status") != "False" or was.get("reason") != error.reason:
        record.events.warning(
            f"Coordinator{error.reason}", f"{message}; nothing was recorded as done, retrying with backoff"
        )


def count_state(scope: Scope, *, refused: bool) -> None:
    """The fleet's state gauges (Ready, refused, departing members), after whatever ended the pass."""
    record, metrics = scope.record, scope.ports.metrics
    if metrics is not None:
        ready = record.condition(READY) == "True"
        departing = len(record.status.get("departing") or ())
        metrics.state(record.namespace, record.name, ready=ready, refused=refused, departing=departing)
