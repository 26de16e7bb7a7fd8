"""The claims of a fleet through its life: its group recorded as its own before anything is sent, a stale owner
reclaimed, claims left behind by a ``groupId`` edit released, and every claim released on deletion.

Where a coordinator records owners (Berth's, docs/api.md §7a) the claim is made there; where it keeps none (Kafka)
the operator keeps the record itself (``ports.GroupRecords``, consulted here for every such kind). The decisions
are ``planners.ownership``'s. Rules:

- :func:`claim` (the admission step): nothing else is sent for a fleet before its group is recorded as its own; a
  group in use by nobody's fleet is claimed only with the administrator's adoption (``--adopt-groups``) or on the
  upgrade path; a group whose recorded owner no longer exists (checked against the API server: its namespace and
  name hold no fleet of its uid) and that has no members (a fleet of another cluster sharing the coordinator would
  look gone here) is reclaimed, with an Event; otherwise the fleet is refused (``GroupOwned``, raised
  for the pass to turn into ``GroupOwned`` or ``GroupInUse``). Each claim is written into ``status.ownedGroups``.
- :func:`settle` (every pass after the claim): a claim status holds besides the current group is released once none
  of the fleet's members is in that group any more (its pods moved to the new group), at once beyond
  ``MAX_OWNED_GROUPS``; a coordinator that cannot be asked keeps the claim for a later pass.
- :func:`release_all` (deletion, whatever state the fleet is in: running, refused after its claim, never created):
  every claim status holds is released; a release another fleet's record refuses changes nothing.
"""

from __future__ import annotations

import logging

from berth.operator.planners.coordinator_target import (
    CoordinatorTarget,
    UntrustedEndpoint,
    is_kafka_identity,
    trusted_coordinator,
)
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.instances import pod_of_member
from berth.operator.planners.observations import GroupDescription, GroupOwnerRef
from berth.operator.planners.ownership import (
    OwnedGroup,
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
from berth.operator.reconcile.context import PassContext
from berth.operator.reconcile.record import FleetRecord
from berth.operator.spec import Fleet, SpecError

logger = logging.getLogger("berth.operator.reconcile")

#: The refusal of a fleet on a coordinator without owner records when the operator keeps none either.
NO_OWNER_RECORDS = "NoOwnerRecords"


async def claim(
    context: PassContext,
    record: FleetRecord,
    fleet: Fleet,
    target: CoordinatorTarget,
    coordinator: CoordinatorPort,
    description: GroupDescription,
    *,
    records_owners: bool,
) -> None:
    """The fleet's group recorded as its own (module rules); raises ``GroupOwned``, ``Refusal``,
    ``CoordinatorUnavailable`` or ``ApiCallFailed``."""
    me = GroupOwnerRef(fleet.namespace, fleet.name, record.uid)
    adopt = may_adopt(context.adoption, fleet, record.status)
    where, group_id = str(target), fleet.spec.group_id
    if records_owners:
        planned = plan_claim(description, me, adopt=adopt)
        if planned is not None:
            try:
                await coordinator.claim_group(group_id, me, adopt=planned.adopt)
            except GroupOwned as owned:
                if owned.owner is None or not await owner_is_gone(context, owned.owner, description):
                    raise
                await coordinator.release_group(group_id, owned.owner.uid)
                _reclaimed(record, group_id, where, owned.owner)
                await coordinator.claim_group(group_id, me, adopt=planned.adopt)
            _claimed(record, group_id, where, adopted=planned.adopt and description.state != "Dead")
    else:
        await _claim_in_records(context, record, target.identity, where, group_id, description, me, adopt=adopt)
    await record.write(owned_patch(owned_groups(record.status), OwnedGroup(target.identity, group_id)))


async def _claim_in_records(
    context: PassContext,
    record: FleetRecord,
    identity: str,
    where: str,
    group_id: str,
    description: GroupDescription,
    me: GroupOwnerRef,
    *,
    adopt: bool,
) -> None:
    records = context.records
    if records is None:
        raise Refusal(
            NO_OWNER_RECORDS,
            f"group {group_id} on {where}: the operator keeps no owner records (its namespace is unknown: set"
            " POD_NAMESPACE or --group-owners-namespace), and Kafka keeps none, so nothing is sent for this fleet",
        )
    recorded = await records.owner(identity, group_id)
    if recorded is not None and recorded.uid != me.uid and await owner_is_gone(context, recorded, description):
        await records.release(identity, group_id, recorded.uid)
        _reclaimed(record, group_id, where, recorded)
        recorded = None
    decision = record_decision(recorded, description, me, adopt=adopt)
    if decision.refuse:
        raise GroupOwned(group_id, decision.owner)
    if decision.create:
        winner = await records.claim(identity, group_id, me)
        if winner.uid != me.uid:
            raise GroupOwned(group_id, winner)
        _claimed(record, group_id, where, adopted=bool(description.members))


async def owner_is_gone(context: PassContext, owner: GroupOwnerRef, description: GroupDescription) -> bool:
    """Whether the recorded owner no longer exists (``planners.ownership.is_stale``) and left nothing running: a group
    with members may be a fleet's of another cluster sharing the coordinator, which this API server cannot see; a
    fleet that cannot be read (no reader, no right to read that namespace) counts as alive."""
    if context.fleets is None or description.members:
        return False
    try:
        body = await context.fleets.read(owner.namespace, owner.name)
    except ApiCallFailed:
        return False
    found = str(((body or {}).get("metadata") or {}).get("uid") or "") or None
    return is_stale(owner, found)


def _claimed(record: FleetRecord, group_id: str, where: str, *, adopted: bool) -> None:
    said = " (adopted: it was in use)" if adopted else ""
    record.events.info("GroupClaimed", f"group {group_id} on {where} is this fleet's{said}")


def _reclaimed(record: FleetRecord, group_id: str, where: str, owner: GroupOwnerRef) -> None:
    record.events.info(
        "GroupReclaimed",
        f"group {group_id} on {where} was recorded as {owner_name(owner)}'s (uid {owner.uid}), which no longer"
        " exists: that claim was released",
    )


async def settle(
    context: PassContext, record: FleetRecord, fleet: Fleet, current: OwnedGroup, coordinator: CoordinatorPort
) -> None:
    """Release the claims a ``groupId`` edit left behind once the fleet's members are gone from those groups; those
    kept for now are named in ``record.claims_kept``, so that the pass counts as waiting and runs again soon (no
    change at the old group would announce the members' sessions expiring)."""
    held = owned_groups(record.status)
    excess = to_release(held, current)
    released: list[OwnedGroup] = []
    kept: list[str] = []
    for old in held:
        if old == current:
            continue
        try:
            if old not in excess and await _members_still_there(context, fleet, old, current, coordinator):
                kept.append(old.group_id)
                continue
            await _release(context, record, old)
        except CoordinatorUnavailable as error:
            logger.info("fleet %s/%s: claim on %s kept for now: %s", fleet.namespace, fleet.name, old.group_id, error)
            kept.append(old.group_id)
            continue
        released.append(old)
    record.claims_kept = tuple(kept)
    await record.write(released_patch(held, released))


async def _members_still_there(
    context: PassContext, fleet: Fleet, old: OwnedGroup, current: OwnedGroup, coordinator: CoordinatorPort
) -> bool:
    port: CoordinatorPort | None = coordinator
    if not is_kafka_identity(old.coordinator):
        port = await _berth_port(context, old)
    elif old.coordinator != current.coordinator:
        port = None  # another cluster (and principal): nothing to ask it with; the record alone is released
    if port is None:
        return False
    description = await port.describe(old.group_id)
    return any(
        m.group_instance_id is not None and pod_of_member(fleet.name, m.group_instance_id) is not None
        for m in description.members
    )


async def release_all(context: PassContext, record: FleetRecord, *, also: OwnedGroup | None = None) -> None:
    """Release every claim status records (and ``also``): on deletion, whatever state the fleet was in."""
    held = owned_groups(record.status)
    for owned in dict.fromkeys((*held, *([also] if also else []))):
        await _release(context, record, owned)
    await record.write(released_patch(held, held))


async def _release(context: PassContext, record: FleetRecord, owned: OwnedGroup) -> None:
    if is_kafka_identity(owned.coordinator):
        if context.records is not None:
            await context.records.release(owned.coordinator, owned.group_id, record.uid)
        return
    port = await _berth_port(context, owned)
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


async def _berth_port(context: PassContext, owned: OwnedGroup) -> CoordinatorPort | None:
    try:
        target = trusted_coordinator(owned.coordinator, context.defaults)
    except (SpecError, UntrustedEndpoint):
        return None
    return await context.coordinators.connect(target)
