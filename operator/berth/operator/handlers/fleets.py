"""Kopf handlers for ConsumerFleets: an index of group claims, create/update/resume, a timer, and the finalizer.

- ``group_claims`` (index): every fleet's claim on ``(coordinator URL, groupId)``, its census entries and its
  volume claims' name prefixes, so a pass can tell whether another fleet holds its group or its claim names, and
  whether it is within the fleet bounds (``planners.claims.index_entries``).
- ``fleet_changed`` (create, resume, spec update): passes until the fleet converges or a settle budget is spent.
- ``fleet_tick`` (timer, ``--reconcile-interval-s``): one pass, which also mirrors the group into status, and moves
  waits along (pods still terminating, a coordinator that was down).
- ``fleet_deleted`` (the finalizer ``berth.dev/finalizer``): scale to zero, leave everyone, delete the group, then
  let Kopf release the object.

Rules: a coordinator that cannot be asked, or a reported API failure, becomes ``kopf.TemporaryError`` with a
capped exponential backoff in change handlers and the finalizer, and a log line in the timer (which runs again
anyway). Nothing is returned to Kopf (no handler results in status).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import kopf

from berth.operator.names import GROUP, PLURAL, VERSION
from berth.operator.planners.claims import ClaimKey, GroupClaim, index_entries
from berth.operator.ports import CoordinatorUnavailable
from berth.operator.reconcile.context import RetryLater
from berth.operator.reconcile.reconciler import FleetKey, FleetReconciler
from berth.operator.spec import OperatorDefaults

logger = logging.getLogger("berth.operator.handlers")

#: The index's name: Kopf passes it to every handler as a keyword argument of this name (the handler's id; a
#: nested function's default id would be its qualified name, not a usable keyword).
CLAIMS_INDEX = "group_claims"
TIMER_ID = "tick"
#: How long a change handler keeps passing while the plan waits on something quick; the timer takes over after.
SETTLE_BUDGET_S = 60.0
#: Retry delays for change handlers and the finalizer: 1, 2, 4 ... seconds, at most a minute.
BACKOFF_CAP_S = 60.0


def backoff_s(retry: int) -> float:
    return float(min(BACKOFF_CAP_S, 2 ** min(retry, 6)))


def fleet_key(namespace: str | None, name: str) -> FleetKey:
    # ConsumerFleets are namespaced: Kopf always passes a namespace for them.
    return FleetKey(namespace or "default", name)


def register_fleet_handlers(
    registry: kopf.OperatorRegistry,
    reconciler: FleetReconciler,
    *,
    defaults: OperatorDefaults,
    interval_s: float,
    poll_s: float,
) -> None:
    @kopf.index(GROUP, VERSION, PLURAL, registry=registry, id=CLAIMS_INDEX)
    def group_claims(body: kopf.Body, **_: Any) -> dict[ClaimKey, GroupClaim]:
        return index_entries(body, defaults)

    def lookup(handler_kwargs: dict[str, Any]) -> Callable[[ClaimKey], Iterable[GroupClaim]]:
        index: kopf.Index[ClaimKey, GroupClaim] = handler_kwargs[CLAIMS_INDEX]

        def claims(key: ClaimKey) -> Iterable[GroupClaim]:
            return list(index.get(key, []))

        return claims

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="resume")
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="create")
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="update", field="spec")
    async def fleet_changed(*, namespace: str | None, name: str, retry: int, **kwargs: Any) -> None:
        key = fleet_key(namespace, name)
        try:
            await reconciler.converge(key, lookup(kwargs), budget_s=SETTLE_BUDGET_S)
        except (CoordinatorUnavailable, RetryLater) as error:
            raise kopf.TemporaryError(f"{error}; retrying", delay=backoff_s(retry)) from error

    @kopf.timer(GROUP, VERSION, PLURAL, registry=registry, id=TIMER_ID, interval=interval_s, initial_delay=interval_s)
    async def fleet_tick(*, namespace: str | None, name: str, **kwargs: Any) -> None:
        key = fleet_key(namespace, name)
        try:
            await reconciler.reconcile(key, lookup(kwargs))
        except (CoordinatorUnavailable, RetryLater) as error:
            # Already in status and Events; the next tick is the retry.
            logger.info("fleet %s: %s; next try in %g s", key, error, interval_s)

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry, id="finalize")
    async def fleet_deleted(*, namespace: str | None, name: str, retry: int, **kwargs: Any) -> None:
        key = fleet_key(namespace, name)
        try:
            waiting = await reconciler.finalize(key, lookup(kwargs), budget_s=SETTLE_BUDGET_S)
        except (CoordinatorUnavailable, RetryLater) as error:
            raise kopf.TemporaryError(f"{error}; retrying", delay=backoff_s(retry)) from error
        if waiting is not None:
            raise kopf.TemporaryError(waiting, delay=poll_s)
