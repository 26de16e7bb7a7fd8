"""The per-pod volume claims a fleet's departed pods left behind: which they are, and what status and Events say.

A fleet with ``spec.volumeClaimTemplates`` gets one PersistentVolumeClaim per template and pod, made by the
StatefulSet controller and named ``<template>-<fleet>-<ordinal>``. On a scale-down the pods go first (and their
batch leave after them); what becomes of their claims is the StatefulSet's ``persistentVolumeClaimRetentionPolicy``:

- ``whenScaled: Retain`` (the default): the claims stay. A pod that comes back (the fleet scales up again) gets
  its own claims back, and with them its state. Until then they cost storage, so the operator says which they are:
  ``status.retainedClaims`` lists them, and a ``ClaimsRetained`` Event names each one when it is first left behind.
- ``whenScaled: Delete``: the StatefulSet controller makes each departing pod the owner of its claims, and the
  garbage collector deletes them once the pod is gone (never before: the owner must be gone, and the claim's
  ``kubernetes.io/pvc-protection`` finalizer holds it while any pod uses it).

Rules: a claim counts as retained when its ordinal is at or above ``spec.replicas``, its pod is gone, and it stays
(the workload adapter reports only claims that are not being deleted and not owned by a pod). The list is in
ordinal order, then template order. ``retainedClaims`` is written only for fleets with claim templates (and removed
when a fleet that had the key has none). Pure: the caller supplies what it observed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.operator.planners.instances import instance_id, ordinal_of
from berth.operator.planners.statefulset import FLEET_LABEL
from berth.operator.spec.fleet import Fleet
from berth.operator.spec.stateful import ClaimRetention

RETAINED_CLAIMS = "retainedClaims"
CLAIMS_RETAINED_EVENT = "ClaimsRetained"


def claim_name(template: str, fleet_name: str, ordinal: int) -> str:
    """The claim the StatefulSet controller makes from ``template`` for pod ``<fleet>-<ordinal>``."""
    return f"{template}-{fleet_name}-{ordinal}"


def claim_ordinal(fleet: Fleet, claim: str) -> tuple[int, int] | None:
    """(ordinal, template index) of one of the fleet's claims, or None when the name is not one of them."""
    for index, template in enumerate(fleet.spec.stateful.claim_template_names):
        ordinal = ordinal_of(f"{template}-{fleet.name}", claim)
        if ordinal is not None:
            return ordinal, index
    return None


def retained_claims(fleet: Fleet, *, claims: Iterable[str], existing_pods: Iterable[str]) -> tuple[str, ...]:
    """The fleet's claims whose pods a scale-down removed and which stay, in ordinal then template order."""
    pods = set(existing_pods)
    kept = []
    for claim in set(claims):
        position = claim_ordinal(fleet, claim)
        if position is None:
            continue
        ordinal, _ = position
        if ordinal >= fleet.spec.replicas and instance_id(fleet.name, ordinal) not in pods:
            kept.append((position, claim))
    return tuple(claim for _, claim in sorted(kept))


@dataclass(frozen=True, slots=True)
class ClaimsReport:
    """What to write into status (possibly nothing) and the Event to post (None: nothing new to say)."""

    patch: dict[str, Any] = field(default_factory=dict)
    event: str | None = None


def report_retained_claims(
    fleet: Fleet, status: Mapping[str, Any], *, claims: Iterable[str], existing_pods: Iterable[str]
) -> ClaimsReport:
    """``status.retainedClaims`` as observed now, and a ``ClaimsRetained`` message naming the claims new to it."""
    if not fleet.spec.stateful.volume_claim_templates:
        return ClaimsReport({RETAINED_CLAIMS: None} if RETAINED_CLAIMS in status else {})
    retained = list(retained_claims(fleet, claims=claims, existing_pods=existing_pods))
    before = status.get(RETAINED_CLAIMS)
    patch = {} if before == retained else {RETAINED_CLAIMS: retained}
    new = [claim for claim in retained if claim not in (before or [])]
    if not new:
        return ClaimsReport(patch)
    ordinals = sorted({position[0] for claim in new if (position := claim_ordinal(fleet, claim)) is not None})
    pods = ", ".join(instance_id(fleet.name, ordinal) for ordinal in ordinals)
    policy = (
        " (persistentVolumeClaimRetentionPolicy.whenScaled: Retain)"
        if fleet.spec.stateful.claim_retention.when_scaled is ClaimRetention.RETAIN
        else ""
    )
    noun = "claim" if len(new) == 1 else "claims"
    event = (
        f"kept volume {noun} {', '.join(new)} of departed {'pod' if len(ordinals) == 1 else 'pods'} {pods}{policy}:"
        f" a pod that comes back gets its {noun} again; `kubectl delete pvc {' '.join(new)}` frees the storage"
    )
    return ClaimsReport(patch, event)


def claims_on_deletion(fleet: Fleet) -> str:
    """What the fleet's deletion does with its claims, to end the ``Finalized`` Event ("" without claim templates)."""
    if not fleet.spec.stateful.volume_claim_templates:
        return ""
    retention = fleet.spec.stateful.claim_retention
    if retention.when_scaled is ClaimRetention.DELETE:
        # The deletion scales the fleet to zero first: every pod departs as in a scale-down.
        return "; its pods' volume claims went with them (whenScaled: Delete)"
    if retention.when_deleted is ClaimRetention.DELETE:
        return "; its pods' volume claims go with its StatefulSet (whenDeleted: Delete)"
    return (
        "; its pods' volume claims stay (persistentVolumeClaimRetentionPolicy.whenDeleted: Retain):"
        f" `kubectl delete pvc -l {FLEET_LABEL}={fleet.name}` frees them"
    )
