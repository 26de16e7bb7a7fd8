"""Kopf handlers for ConsumerFleets: an index of group claims, every watch event of a fleet, and the finalizer.

- ``group_claims`` (index): every fleet's claim on ``(coordinator URL, groupId)``, its census entries and its
  volume claims' name prefixes, so a pass can tell whether another fleet holds its group or its claim names, and
  whether it is within the fleet bounds (``planners.claims.index_entries``); the passes read it through
  ``handlers.claims``.
- ``fleet_event`` (every watch event, the listing when the operator starts included): hands the reconciler the
  fleet as delivered (``FleetReconciler.fleet_seen``), which asks for a pass when the change is one a pass reads
  (``planners.pokes``: a fleet not passed yet, its spec, its pause) and returns; the pass runs from the reconciler's
  queue, which also retries it and decides when the fleet is next due. A fleet without its own ``berth.dev/fleet``
  label gets it in Kopf's patch of that cycle, as a transformation beside Kopf's finalizer (``label_fleet``), so
  both go out in Kopf's one JSON patch (a merge patch of the label would be a request of its own, and its watch
  event, without the finalizer yet, would have Kopf send the finalizer twice: three patches of every new fleet).
- ``fleet_deleted`` (the finalizer ``berth.dev/finalizer``): scale to zero, leave everyone, delete the group, then
  let Kopf release the object.

There are no create, update or resume handlers, so Kopf keeps no record of what it handled (``command.app``: no
diff base is stored; it was one more patch of every new fleet) and patches a fleet only for its finalizer (and the
label); there is no timer: a fleet's pass comes when something changes (its spec, an object it owns, its group at
the coordinator) and otherwise at the reconciler's slow resync.

Rules: in the finalizer, a coordinator that cannot be asked or a reported API failure becomes
``kopf.TemporaryError`` with a capped exponential backoff. Nothing is returned to Kopf (no handler results in
status).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import kopf

from berth.operator.handlers.claims import IndexedClaims, Rankings, indexed_claims
from berth.operator.planners.claims import ClaimKey, GroupClaim, index_entries
from berth.operator.planners.statefulset import FLEET_LABEL
from berth.operator.ports import CoordinatorUnavailable
from berth.operator.reconcile.context import RetryLater
from berth.operator.reconcile.reconciler import FleetKey, FleetReconciler
from berth.operator.spec.fleet import OperatorDefaults
from berth.operator.spec.names import GROUP, PLURAL, VERSION

#: The index's name: Kopf passes it to every handler as a keyword argument of this name (the handler's id; a
#: nested function's default id would be its qualified name, not a usable keyword).
CLAIMS_INDEX = "group_claims"
#: How long the finalizer keeps passing while the deletion waits on something quick, before Kopf retries it.
SETTLE_BUDGET_S = 60.0
#: Retry delays for the finalizer: 1, 2, 4 ... seconds, at most a minute.
BACKOFF_CAP_S = 60.0


def backoff_s(retry: int) -> float:
    return float(min(BACKOFF_CAP_S, 2 ** min(retry, 6)))


def fleet_label_missing(body: Mapping[str, Any]) -> bool:
    """The fleet does not carry the label its objects carry (``-l berth.dev/fleet=NAME`` lists it with them), and is
    not going away."""
    metadata = body.get("metadata") or {}
    return not metadata.get("deletionTimestamp") and (metadata.get("labels") or {}).get(FLEET_LABEL) != metadata.get(
        "name"
    )


def label_fleet(body: dict[str, Any], *, name: str) -> None:
    """Give the fleet its own ``berth.dev/fleet`` label (a Kopf patch transformation: it edits the body the JSON
    patch is computed from)."""
    body.setdefault("metadata", {}).setdefault("labels", {})[FLEET_LABEL] = name


def fleet_key(namespace: str | None, name: str) -> FleetKey:
    # ConsumerFleets are namespaced: Kopf always passes a namespace for them.
    return FleetKey(namespace or "default", name)


def register_fleet_handlers(
    registry: kopf.OperatorRegistry,
    reconciler: FleetReconciler,
    *,
    defaults: OperatorDefaults,
    poll_s: float,
) -> None:
    @kopf.index(GROUP, VERSION, PLURAL, registry=registry, id=CLAIMS_INDEX)
    async def group_claims(body: kopf.Body, **_: Any) -> dict[ClaimKey, GroupClaim]:
        # async: on the event loop. Kopf runs a sync handler in a worker thread, and several of them parsing fleets
        # at once is what the spec declaration's _prepare guards msgspec against.
        return index_entries(body, defaults)

    rankings = Rankings()

    def lookup(handler_kwargs: dict[str, Any]) -> IndexedClaims:
        return indexed_claims(handler_kwargs, CLAIMS_INDEX, rankings)

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="fleet")
    async def fleet_event(
        *, event: kopf.RawEvent, body: kopf.Body, patch: kopf.Patch, namespace: str | None, name: str, **kwargs: Any
    ) -> None:
        reconciler.attach(lookup(kwargs))
        if event.get("type") == "DELETED":
            return
        reconciler.fleet_seen(fleet_key(namespace, name), body)
        if fleet_label_missing(body):
            patch.fns.append(functools.partial(label_fleet, name=name))

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry, id="finalize")
    async def fleet_deleted(*, namespace: str | None, name: str, retry: int, **kwargs: Any) -> None:
        key = fleet_key(namespace, name)
        try:
            waiting = await reconciler.finalize(key, lookup(kwargs), budget_s=SETTLE_BUDGET_S)
        except (CoordinatorUnavailable, RetryLater) as error:
            raise kopf.TemporaryError(f"{error}; retrying", delay=backoff_s(retry)) from error
        if waiting is not None:
            raise kopf.TemporaryError(waiting, delay=poll_s)
