"""The admission step: whether the fleet may act at all, on which coordinator, and as which kind of group.

In the order of the pass:

1. :func:`admit_fleet`, before anything is sent anywhere: the spec, the endpoint and the claims index
   (``planners.admission``); a refusal costs nothing;
2. :func:`connect`: the coordinator's port, for a Kafka fleet made of its own principal's Secrets (read by name
   in its namespace, checked by ``planners.kafka_credentials``);
3. :func:`admit_group`: the coordinator's session bounds (the first thing asked of it), the group described and
   its kind decided (``planners.coordinator_kind.kind_of_group``: a group the operator does not manage is
   refused), and where the kind records owners, the group claimed for the fleet (``planners.ownership``: refused
   ``GroupOwned`` when it is another fleet's, and nothing else is sent).

Every later look at the group goes through :meth:`AdmittedGroup.describe`, which decides the kind again (a group
may change protocol under a running fleet).
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners.admission import admit
from berth.operator.planners.claims import GroupClaim, claim_key, holder_of
from berth.operator.planners.coordinator_kind import CoordinatorKind, kind_of_group
from berth.operator.planners.coordinator_target import BerthTarget, CoordinatorTarget
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.kafka_credentials import SecretRole, checked, kafka_connection, secrets_needed
from berth.operator.planners.observations import CoordinatorBounds, GroupDescription, GroupOwnerRef
from berth.operator.planners.ownership import plan_claim
from berth.operator.ports import CoordinatorPort
from berth.operator.reconcile.context import ClaimsLookup, PassContext
from berth.operator.reconcile.record import FleetRecord
from berth.operator.spec import Fleet


@dataclass(frozen=True, slots=True)
class AdmittedGroup:
    """The fleet's group at its coordinator, admitted, and the kind it is managed as."""

    coordinator: CoordinatorPort
    group_id: str
    where: str  # the coordinator, for messages (its URL, or kafka://...)
    kind: CoordinatorKind

    async def describe(self) -> GroupDescription:
        return (await describe(self.coordinator, self.group_id, self.where))[0]


def admit_fleet(
    context: PassContext, record: FleetRecord, claims: ClaimsLookup
) -> tuple[Fleet, CoordinatorTarget] | Refusal:
    """Whether this fleet may act at all, before anything is sent anywhere."""

    def other_holder(fleet: Fleet, target: CoordinatorTarget) -> GroupClaim | None:
        holder = holder_of(claims(claim_key(target.identity, fleet.spec.group_id)))
        return holder if holder is not None and holder.uid != record.uid else None

    return admit(record.body, context.defaults, other_holder)


async def connect(context: PassContext, fleet: Fleet, target: CoordinatorTarget) -> CoordinatorPort:
    """The coordinator's port; a Kafka fleet's Secrets are read and checked first (a :class:`Refusal` names the
    missing Secret or key)."""
    if isinstance(target, BerthTarget):
        return await context.coordinators.connect(target)
    secrets: dict[SecretRole, dict[str, str]] = {}
    for need in secrets_needed(target):
        found = None if context.secrets is None else await context.secrets.read(fleet.namespace, need.name)
        secrets[need.role] = dict(checked(need, fleet.namespace, found))
    return await context.coordinators.connect(kafka_connection(target, fleet.namespace, secrets))


async def describe(coordinator: CoordinatorPort, group_id: str, where: str) -> tuple[GroupDescription, CoordinatorKind]:
    """The group as the coordinator describes it, and the kind it is managed as (raises ``UnmanagedGroup``)."""
    description = await coordinator.describe(group_id)
    return description, kind_of_group(coordinator.kind, description, where=where)


async def look_up_group(
    coordinator: CoordinatorPort, fleet: Fleet, target: CoordinatorTarget
) -> tuple[AdmittedGroup, GroupDescription]:
    """The group described and its kind decided, without claiming it (the deletion's look)."""
    where = str(target)
    description, kind = await describe(coordinator, fleet.spec.group_id, where)
    return AdmittedGroup(coordinator, fleet.spec.group_id, where, kind), description


async def admit_group(
    context: PassContext, record: FleetRecord, fleet: Fleet, target: CoordinatorTarget, coordinator: CoordinatorPort
) -> tuple[AdmittedGroup, CoordinatorBounds]:
    """The coordinator's bounds, the group's kind, and the claim where the kind records owners (raises
    ``GroupOwned``, ``UnmanagedGroup``, ``CoordinatorUnavailable``)."""
    bounds = await context.coordinators.bounds_of(coordinator)
    group, description = await look_up_group(coordinator, fleet, target)
    where = group.where
    if group.kind.records_owners:
        me = GroupOwnerRef(fleet.namespace, fleet.name, record.uid)
        claim = plan_claim(description, me, adopt=fleet.spec.coordinator.adopt_group, status=record.status)
        if claim is not None:
            await coordinator.claim_group(fleet.spec.group_id, claim.owner, adopt=claim.adopt)
            adopted = " (adopted: it was in use)" if claim.adopt and description.state != "Dead" else ""
            record.events.info("GroupClaimed", f"group {fleet.spec.group_id} on {where} is this fleet's{adopted}")
    return group, bounds
