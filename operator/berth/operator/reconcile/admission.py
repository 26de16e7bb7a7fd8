"""The admission step: whether the fleet may act at all, on which coordinator, and as which kind of group.

In the order of the pass:

1. :func:`admit_fleet`, before anything is sent anywhere: the spec, the endpoint and the claims index
   (``planners.admission``); a refusal costs nothing;
2. :func:`connect`: the coordinator's port, for a Kafka fleet made of its own principal's Secrets (read by name
   in its namespace, checked by ``planners.kafka_credentials``);
3. :func:`admit_group`: the coordinator's session bounds (the first thing asked of it), the group described and
   its kind decided (``planners.coordinator_kind.kind_of_group``: a group the operator does not manage is
   refused), and the group claimed for the fleet, at the coordinator where the kind records owners and in the
   operator's own records where it does not (``reconcile.ownership``: refused ``GroupOwned`` or ``GroupInUse``, and
   nothing else is sent); claims an earlier ``groupId`` left behind are released once the fleet's members are gone.

Every later look at the group goes through :meth:`AdmittedGroup.look`, which decides the kind again (a group
may change protocol under a running fleet: a classic group converting to KIP-848's consumer protocol is managed as
a consumer-protocol group from the describe that shows it).
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners import fleet_status
from berth.operator.planners.admission import admit
from berth.operator.planners.advice import group_key
from berth.operator.planners.claims import (
    ClaimKey,
    GroupClaim,
    census_keys,
    claim_key,
    holder_of,
    ranked_within,
    volume_claim_keys,
)
from berth.operator.planners.coordinator_kind import CoordinatorKind, declared_protocol, kind_of_group
from berth.operator.planners.coordinator_target import BerthTarget, CoordinatorTarget, KafkaTarget
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.kafka_credentials import (
    KafkaConnection,
    SecretRole,
    checked,
    kafka_connection,
    secrets_needed,
    secrets_not_readable,
)
from berth.operator.planners.observations import CoordinatorBounds, GroupDescription, GroupProtocol
from berth.operator.planners.ownership import OwnedGroup
from berth.operator.ports import CoordinatorPort, NotPermitted
from berth.operator.reconcile import ownership
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
    target: CoordinatorTarget
    #: The protocol the fleet's consumers are configured for (decides the kind of a group not formed yet).
    declared: GroupProtocol = GroupProtocol.CLASSIC
    #: The Kafka connection the port was made of (None on Berth's coordinator): its principal's derived username
    #: is what pods are given when the Secret has no key for it.
    connection: KafkaConnection | None = None

    async def describe(self) -> GroupDescription:
        return (await self.look())[0]

    async def look(self) -> tuple[GroupDescription, CoordinatorKind]:
        """The group described again, and the kind it is managed as now."""
        return await describe(self.coordinator, self.group_id, self.where, self.declared)

    @property
    def kafka_username(self) -> str | None:
        """The principal's name for the pods' environment when its Secret has no key to reference."""
        connection = self.connection
        return connection.username if connection is not None and connection.username_is_derived else None

    @property
    def evidence_key(self) -> str:
        """What the operator's evidence names the group (``planners.advice.group_key``)."""
        return group_key(self.target, self.group_id) if isinstance(self.target, KafkaTarget) else self.group_id


def admit_fleet(
    context: PassContext, record: FleetRecord, claims: ClaimsLookup
) -> tuple[Fleet, CoordinatorTarget] | Refusal:
    """Whether this fleet may act at all, before anything is sent anywhere."""

    def other_holder(fleet: Fleet, target: CoordinatorTarget) -> GroupClaim | None:
        holder = holder_of(claims(claim_key(target.identity, fleet.spec.group_id)))
        return holder if holder is not None and holder.uid != record.uid else None

    def volume_claim_holder(fleet: Fleet) -> tuple[str, GroupClaim] | None:
        for key in volume_claim_keys(fleet):
            holder = holder_of(claims(key))
            if holder is not None and holder.uid != record.uid:
                return key[1], holder
        return None

    def fleet_bound(fleet: Fleet) -> str | None:
        total, namespaced = census_keys(fleet.namespace)
        defaults = context.defaults
        for key, limit, said in (
            (total, defaults.max_fleets, "the operator serves at most {} fleets (--max-fleets)"),
            (
                namespaced,
                defaults.max_fleets_per_namespace,
                f"the operator serves at most {{}} fleets in namespace {fleet.namespace} (--max-fleets-per-namespace)",
            ),
        ):
            if limit > 0 and not within_bound(context, claims, key, limit, record.uid):
                return said.format(limit) + " and this fleet is beyond them"
        return None

    return admit(
        record.body, context.defaults, other_holder, volume_claim_holder=volume_claim_holder, fleet_bound=fleet_bound
    )


#: How long a ranking of the census is reused (a bound is exceeded only by a fleet burst; passes are many).
CENSUS_TTL_S = 1.0


def within_bound(context: PassContext, claims: ClaimsLookup, key: ClaimKey, limit: int, uid: str) -> bool:
    """Whether fleet ``uid`` is among the first ``limit`` of the census ``key`` (no ranking while the census is within
    the bound; over it, the ranking is reused for :data:`CENSUS_TTL_S`)."""
    counted = list(claims(key))
    if len(counted) <= limit:
        return True
    now = context.now().timestamp()
    cached = context.census.get(key)
    if cached is None or now - cached[0] >= CENSUS_TTL_S:
        cached = (now, ranked_within(counted, limit))
        context.census[key] = cached
    return uid in cached[1]


@dataclass(frozen=True, slots=True)
class Connected:
    """The coordinator's port, and for Kafka the connection (principal) it was made of."""

    coordinator: CoordinatorPort
    connection: KafkaConnection | None = None


async def connect(context: PassContext, fleet: Fleet, target: CoordinatorTarget) -> Connected:
    """The coordinator's port; a Kafka fleet's Secrets are read and checked first (a :class:`Refusal` names the
    missing Secret or key)."""
    if isinstance(target, BerthTarget):
        return Connected(await context.coordinators.connect(target))
    secrets: dict[SecretRole, dict[str, str]] = {}
    for need in secrets_needed(target):
        try:
            found = None if context.secrets is None else await context.secrets.read(fleet.namespace, need.name)
        except NotPermitted as error:
            message = secrets_not_readable(fleet.namespace, need.name)
            raise Refusal(fleet_status.SECRETS_NOT_READABLE, message) from error
        secrets[need.role] = dict(checked(need, fleet.namespace, found))
    connection = kafka_connection(target, fleet.namespace, secrets)
    return Connected(await context.coordinators.connect(connection), connection)


async def describe(
    coordinator: CoordinatorPort, group_id: str, where: str, declared: GroupProtocol = GroupProtocol.CLASSIC
) -> tuple[GroupDescription, CoordinatorKind]:
    """The group as the coordinator describes it, and the kind it is managed as (raises ``UnmanagedGroup``)."""
    description = await coordinator.describe(group_id)
    return description, kind_of_group(coordinator.kind, description, where=where, declared=declared)


async def look_up_group(
    connected: Connected, fleet: Fleet, target: CoordinatorTarget
) -> tuple[AdmittedGroup, GroupDescription]:
    """The group described and its kind decided, without claiming it (the deletion's look)."""
    where = str(target)
    declared = declared_protocol(fleet)
    description, kind = await describe(connected.coordinator, fleet.spec.group_id, where, declared)
    group = AdmittedGroup(
        connected.coordinator, fleet.spec.group_id, where, kind, target, declared, connected.connection
    )
    return group, description


async def admit_group(
    context: PassContext, record: FleetRecord, fleet: Fleet, target: CoordinatorTarget, connected: Connected
) -> tuple[AdmittedGroup, CoordinatorBounds]:
    """The coordinator's bounds, the group's kind, and the claim (raises ``GroupOwned``, ``UnmanagedGroup``,
    ``Refusal``, ``CoordinatorUnavailable``)."""
    coordinator = connected.coordinator
    bounds = await context.coordinators.bounds_of(coordinator)
    group, description = await look_up_group(connected, fleet, target)
    await ownership.claim(
        context, record, fleet, target, coordinator, description, records_owners=group.kind.records_owners
    )
    await ownership.settle(context, record, fleet, OwnedGroup(target.identity, fleet.spec.group_id), coordinator)
    return group, bounds
