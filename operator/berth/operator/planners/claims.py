"""Which fleet may use a consumer group: one group id on one coordinator belongs to one fleet.

Two fleets on the same group would pre-register, shrink and delete each other's members. Every fleet *claims*
``(coordinator, groupId)``, the coordinator being its URL or ``kafka://<the trusted cluster's bootstrap list>``
(Kopf keeps the claims of all fleets in an in-memory index); the *holder* is the claimant that is established (it
has created its workload, ``status.selector``, and reconciled its current spec, ``status.observedGeneration``: a
fleet whose groupId was just edited is not established on its new group), then the oldest
(``creationTimestamp``), then the first by namespace and name. Everyone else is refused until the holder is gone.

Rules: pure functions of fleet bodies; an invalid or untrusted fleet claims nothing; coordinators are compared in
their canonical form (``planners.endpoints``), so every alias of one coordinator (a trailing dot, ``.svc``, a
leading zero in the port, upper case) is one coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berth.operator.planners.coordinator_target import UntrustedEndpoint, resolve_target
from berth.operator.spec.fleet import Fleet, OperatorDefaults, SpecError, parse_fleet

ClaimKey = tuple[str, str]  # (the coordinator's canonical identity, group id)


@dataclass(frozen=True, slots=True, order=True)
class GroupClaim:
    # Field order is the holder order: established first, then the oldest, then by namespace and name.
    not_established: bool
    created: str
    namespace: str
    name: str
    uid: str

    @property
    def fleet(self) -> str:
        return f"{self.namespace}/{self.name}"


def claim_key(coordinator_identity: str, group_id: str) -> ClaimKey:
    """A coordinator's canonical identity (``CoordinatorTarget.identity``) and a group id."""
    return coordinator_identity, group_id


def claims_of(body: Mapping[str, Any], defaults: OperatorDefaults) -> dict[ClaimKey, GroupClaim]:
    """The fleet's claim, keyed for the index; ``{}`` when the fleet is invalid (it claims nothing)."""
    claimed = _claim(body, defaults)
    if claimed is None:
        return {}
    key, claim, _ = claimed
    return {key: claim}


def _claim(body: Mapping[str, Any], defaults: OperatorDefaults) -> tuple[ClaimKey, GroupClaim, Fleet] | None:
    """The fleet's claim key, its claim and the fleet parsed once; None for an invalid or untrusted fleet."""
    try:
        fleet = parse_fleet(body)
        target = resolve_target(fleet, defaults)
    except (SpecError, UntrustedEndpoint):
        return None
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    established = bool(status.get("selector")) and status.get("observedGeneration") == metadata.get("generation")
    claim = GroupClaim(
        not_established=not established,
        created=str(metadata.get("creationTimestamp") or ""),
        namespace=fleet.namespace,
        name=fleet.name,
        uid=str(fleet.uid or ""),
    )
    return claim_key(target.identity, fleet.spec.group_id), claim, fleet


def holder_of(claims: Iterable[GroupClaim]) -> GroupClaim | None:
    ordered = sorted(claims)
    return ordered[0] if ordered else None


#: The census: every valid fleet under ``(CENSUS, "")`` and ``(CENSUS, <its namespace>)``, ranked like group
#: claims (a fleet with a workload first, then the oldest), so the fleet bounds refuse the newest fleets.
CENSUS = "fleets"
#: Per namespace, the prefix of each claim template's volume claims (``<template>-<fleet>``): the StatefulSet
#: controller names them ``<template>-<fleet>-<ordinal>``, so fleet ``a-b`` with template ``data`` and fleet ``b``
#: with template ``data-a`` would have their pods share claims.
VOLUME_CLAIMS = "volume-claims"


def census_keys(namespace: str) -> tuple[ClaimKey, ClaimKey]:
    """The census keys of a fleet in ``namespace``: every fleet, and the namespace's."""
    return (CENSUS, ""), (CENSUS, namespace)


def volume_claim_keys(fleet: Fleet) -> tuple[ClaimKey, ...]:
    """One key per claim template: ``(volume-claims/<namespace>, <template>-<fleet>)``."""
    return tuple(
        (f"{VOLUME_CLAIMS}/{fleet.namespace}", f"{template}-{fleet.name}")
        for template in fleet.spec.stateful.claim_template_names
    )


def index_entries(body: Mapping[str, Any], defaults: OperatorDefaults) -> dict[ClaimKey, GroupClaim]:
    """What the operator's index holds for one fleet: its group claim, its census entries and its volume claims'
    name prefixes (``{}`` for an invalid fleet, which claims nothing and is not counted)."""
    claimed = _claim(body, defaults)  # the index sees every event of every fleet: the spec is parsed once here
    if claimed is None:
        return {}
    group_key, claim, fleet = claimed
    entries = {group_key: claim}
    with_workload = bool((body.get("status") or {}).get("selector"))
    counted = GroupClaim(not with_workload, claim.created, claim.namespace, claim.name, claim.uid)
    for key in census_keys(fleet.namespace):
        entries[key] = counted
    for key in volume_claim_keys(fleet):
        entries[key] = claim
    return entries


def ranked_within(claims: Iterable[GroupClaim], limit: int) -> frozenset[str]:
    """The uids of the first ``limit`` claims in holder order (the fleets within a bound)."""
    return frozenset(claim.uid for claim in sorted(claims)[:limit])


@dataclass(frozen=True, slots=True)
class ListedClaims:
    """A claims index over a lookup (berth-demo's: nobody else; the unit tests' lists): a ranking each time."""

    lookup: Callable[[ClaimKey], Iterable[GroupClaim]]

    def holders(self, key: ClaimKey) -> Iterable[GroupClaim]:
        return self.lookup(key)

    def within(self, key: ClaimKey, limit: int, uid: str) -> bool:
        counted = list(self.lookup(key))
        return len(counted) <= limit or uid in ranked_within(counted, limit)


#: Nobody's claims (berth-demo: its fleets are its own).
NO_CLAIMS = ListedClaims(lambda key: ())
