"""The claims of a fleet through its life: its group recorded as its own before anything is sent, a stale owner
reclaimed, claims left behind by a ``groupId`` edit released, and every claim released on deletion.

Where a coordinator records owners (Berth's, docs/api.md §7a) the claim is made there; where it keeps none (Kafka)
the operator keeps the record itself (``ports.GroupRecords``, consulted here for every such kind). The decisions
are ``planners.ownership``'s. Rules:

- :func:`claim` (the admission step): nothing else is sent for a fleet before its group is recorded as its own; a
  group in use by nobody's fleet (on Kafka: members, or committed offsets, read once when there is no record) is
  claimed only with the administrator's adoption (``--adopt-groups``) or on the upgrade path; a group whose
  recorded owner no longer exists (checked against the API server: its namespace and name hold no fleet of its
  uid) and that has no members (a fleet of another cluster sharing the coordinator would look gone here) is
  reclaimed, with an Event, and taken back as adopted when that owner was an earlier fleet of the same namespace
  and name (docs/install.md, "Fleets left behind": deleted without the operator, created again); otherwise the
  fleet is refused (``GroupOwned``, raised for the pass to turn into ``GroupOwned`` or ``GroupInUse``). Each claim
  is written into ``status.ownedGroups`` with the pass's next status write (``FleetRecord.defer``).
- :func:`settle` (every pass after the claim): a claim status holds besides the current group is released once none
  of the fleet's members is in that group any more (its pods moved to the new group), at once beyond
  ``MAX_OWNED_GROUPS``; a coordinator that cannot be asked keeps the claim for a later pass.
- :func:`release_all` (deletion, whatever state the fleet is in: running, refused after its claim, never created):
  every claim status holds is released; a release another fleet's record refuses changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from berth.operator.planners.coordinator_target import (
    UntrustedEndpoint,
    is_kafka_identity,
    trusted_coordinator,
)
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.instances import pod_of_member
from berth.operator.planners.observations import GroupDescription, GroupOwnerRef
from berth.operator.planners.ownership import (
    ClaimGroup,
    OwnedGroup,
    in_use_on_kafka,
    is_predecessor,
    is_stale,
    may_adopt,
    owned_groups,
    owned_patch,
    owner_name,
    plan_claim,
    record_decision,
    released_patch,
    to_release,
)
from berth.operator.ports import ApiCallFailed, CoordinatorPort, CoordinatorUnavailable, GroupOwned
from berth.operator.reconcile.group import AdmittedGroup
from berth.operator.reconcile.record import FleetRecord
from berth.operator.reconcile.scope import Scope
from berth.operator.spec.fleet import Fleet, SpecError

logger = logging.getLogger("berth.operator.reconcile")

#: The refusal of a fleet on a coordinator without owner records when the operator keeps none either.
NO_OWNER_RECORDS = "NoOwnerRecords"


@dataclass(frozen=True, slots=True)
class Claim:
    """Who claims which group, where, and whether it may take over a group in use."""

    me: GroupOwnerRef
    identity: str  # the coordinator's canonical identity (``CoordinatorTarget.identity``)
    where: str  # the coordinator, for messages
    group_id: str
    adopt: bool


async def claim(scope: Scope, fleet: Fleet, group: AdmittedGroup, description: GroupDescription) -> None:
    """The fleet's group recorded as its own (module rules); raises ``GroupOwned``, ``Refusal``,
    ``CoordinatorUnavailable`` or ``ApiCallFailed``."""
    record = scope.record
    asked = Claim(
        GroupOwnerRef(fleet.namespace, fleet.name, record.uid),
        group.target.identity,
        group.where,
        group.group_id,
        may_adopt(scope.settings.adoption, fleet, record.status),
    )
    created = False
    if group.kind.records_owners:
        await _claim_at_coordinator(scope, asked, group.coordinator, description)
    else:
        created = await _claim_in_records(scope, asked, group.coordinator, description)
    # Deferred (sent with the pass's next write or its last, however it ends): a claim lost to a crash before then is
    # recorded by the next pass, which claims the group again; only a groupId edited in that window leaves the old
    # group the fleet's at the coordinator until the fleet is gone (the next claimant then reclaims it as stale).
    record.defer(owned_patch(owned_groups(record.status), OwnedGroup(asked.identity, asked.group_id, created=created)))


async def _claim_at_coordinator(
    scope: Scope, asked: Claim, coordinator: CoordinatorPort, description: GroupDescription
) -> None:
    planned = plan_claim(description, asked.me, adopt=asked.adopt)
    if planned is None:
        return
    try:
        await coordinator.claim_group(asked.group_id, asked.me, adopt=planned.adopt)
    except GroupOwned as owned:
        if owned.owner is None or not await owner_is_gone(scope, owned.owner, description):
            raise
        await coordinator.release_group(asked.group_id, owned.owner.uid)
        _reclaimed(scope.record, asked, owned.owner)
        planned = ClaimGroup(asked.me, adopt=planned.adopt or is_predecessor(owned.owner, asked.me))
        await coordinator.claim_group(asked.group_id, asked.me, adopt=planned.adopt)
    _claimed(scope.record, asked, adopted=planned.adopt and description.state != "Dead")


async def _claim_in_records(
    scope: Scope, asked: Claim, coordinator: CoordinatorPort, description: GroupDescription
) -> bool:
    """The claim in the operator's records; whether this claim created the record of a group that did not exist
    (the fleet creates it: a deletion may delete it, ``planners.ownership.may_delete``)."""
    records = scope.ports.records
    identity, group_id = asked.identity, asked.group_id
    if records is None:
        raise Refusal(
            NO_OWNER_RECORDS,
            f"group {group_id} on {asked.where}: the operator keeps no owner records (its namespace is unknown: set"
            " POD_NAMESPACE or --group-owners-namespace), and Kafka keeps none, so nothing is sent for this fleet",
        )
    recorded = await records.owner(identity, group_id)
    adopt = asked.adopt
    if recorded is not None and recorded.uid != asked.me.uid and await owner_is_gone(scope, recorded, description):
        await records.release(identity, group_id, recorded.uid)
        _reclaimed(scope.record, asked, recorded)
        adopt = adopt or is_predecessor(recorded, asked.me)
        recorded = None
    in_use = recorded is None and in_use_on_kafka(
        description, committed_offsets=await _has_committed_offsets(coordinator, group_id, description)
    )
    decision = record_decision(recorded, in_use, asked.me, adopt=adopt)
    if decision.refuse:
        raise GroupOwned(group_id, decision.owner)
    if not decision.create:
        return False
    winner = await records.claim(identity, group_id, asked.me)
    if winner.uid != asked.me.uid:
        raise GroupOwned(group_id, winner)
    _claimed(scope.record, asked, adopted=in_use)
    return not description.exists


async def _has_committed_offsets(coordinator: CoordinatorPort, group_id: str, description: GroupDescription) -> bool:
    """Whether a group that exists with no member holds committed offsets (its consumers stopped, their progress
    kept); asked only there (a claim of an unrecorded group: once per fleet), never of a group with members or none."""
    if description.members or not description.exists:
        return False
    lag = await coordinator.group_lag(group_id, description)
    return lag is not None and any(partition.committed is not None for partition in lag.partitions)


async def owner_is_gone(scope: Scope, owner: GroupOwnerRef, description: GroupDescription) -> bool:
    """Whether the recorded owner no longer exists (``planners.ownership.is_stale``) and left nothing running: a group
    with members may be a fleet's of another cluster sharing the coordinator, which this API server cannot see; a
    fleet that cannot be read (no reader, no right to read that namespace) counts as alive."""
    fleets = scope.ports.fleets
    if fleets is None or description.members:
        return False
    try:
        body = await fleets.read(owner.namespace, owner.name)
    except ApiCallFailed:
        return False
    found = str(((body or {}).get("metadata") or {}).get("uid") or "") or None
    return is_stale(owner, found)


def _claimed(record: FleetRecord, asked: Claim, *, adopted: bool) -> None:
    said = " (adopted: it was in use)" if adopted else ""
    record.events.info("GroupClaimed", f"group {asked.group_id} on {asked.where} is this fleet's{said}")


def _reclaimed(record: FleetRecord, asked: Claim, owner: GroupOwnerRef) -> None:
    earlier = " (an earlier fleet of this name: the group is taken back with its offsets)"
    record.events.info(
        "GroupReclaimed",
        f"group {asked.group_id} on {asked.where} was recorded as {owner_name(owner)}'s (uid {owner.uid}), which no"
        f" longer exists: that claim was released{earlier if is_predecessor(owner, asked.me) else ''}",
    )


async def settle(scope: Scope, fleet: Fleet, current: OwnedGroup, coordinator: CoordinatorPort) -> None:
    """Release the claims a ``groupId`` edit left behind once the fleet's members are gone from those groups; those
    kept for now are named in ``record.claims_kept``, so that the pass counts as waiting and runs again soon (no
    change at the old group would announce the members' sessions expiring)."""
    record = scope.record
    held = owned_groups(record.status)
    excess = to_release(held, current)
    released: list[OwnedGroup] = []
    kept: list[str] = []
    for old in held:
        if old == current:
            continue
        try:
            if old not in excess and await _members_still_there(
                await _port_for(scope, old, current, coordinator), fleet, old
            ):
                kept.append(old.group_id)
                continue
            await _release(scope, old)
        except CoordinatorUnavailable as error:
            logger.info("fleet %s/%s: claim on %s kept for now: %s", fleet.namespace, fleet.name, old.group_id, error)
            kept.append(old.group_id)
            continue
        released.append(old)
    record.claims_kept = tuple(kept)
    record.defer(released_patch(held, released))  # a release lost to a crash is released again: nothing of ours


async def _port_for(
    scope: Scope, old: OwnedGroup, current: OwnedGroup, coordinator: CoordinatorPort
) -> CoordinatorPort | None:
    """The port to ask ``old`` with: the current one on the same Kafka cluster, Berth's by its URL; None for another
    cluster (and principal: nothing to ask it with; the record alone is released)."""
    if not is_kafka_identity(old.coordinator):
        return await _berth_port(scope, old)
    return coordinator if old.coordinator == current.coordinator else None


async def _members_still_there(port: CoordinatorPort | None, fleet: Fleet, old: OwnedGroup) -> bool:
    if port is None:
        return False
    description = await port.describe(old.group_id)
    return any(
        m.group_instance_id is not None and pod_of_member(fleet.name, m.group_instance_id) is not None
        for m in description.members
    )


async def release_all(scope: Scope, *, also: OwnedGroup | None = None) -> None:
    """Release every claim status records (and ``also``): on deletion, whatever state the fleet was in."""
    held = owned_groups(scope.record.status)
    for owned in dict.fromkeys((*held, *([also] if also else []))):
        await _release(scope, owned)
    await scope.record.write(released_patch(held, held))


async def _release(scope: Scope, owned: OwnedGroup) -> None:
    record, records = scope.record, scope.ports.records
    if is_kafka_identity(owned.coordinator):
        if records is not None:
            await records.release(owned.coordinator, owned.group_id, record.uid)
        return
    port = await _berth_port(scope, owned)
    if port is None:
        record.events.warning(
            "ClaimNotReleased",
            f"group {owned.group_id} on {owned.coordinator}: that coordinator is no longer one the operator trusts,"
            " so its claim was not released (an administrator may release it: DELETE /v1/groups/{group}/owner)",
        )
        return
    try:
        await port.release_group(owned.group_id, record.uid)
    except GroupOwned:
        return  # another fleet's by now: nothing of ours to let go


async def _berth_port(scope: Scope, owned: OwnedGroup) -> CoordinatorPort | None:
    try:
        target = trusted_coordinator(owned.coordinator, scope.settings.defaults)
    except (SpecError, UntrustedEndpoint):
        return None
    return await scope.ports.coordinators.connect(target)
