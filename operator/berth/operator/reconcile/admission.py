"""The admission step: whether the fleet may act at all, on which coordinator, and as which kind of group.

In the order of the pass:

1. :func:`admit_fleet`, before anything is sent anywhere: the spec, the endpoint and the claims index
   (``planners.admission``, the index through ``ports.ClaimsIndex``); a refusal costs nothing;
2. :func:`connect`: the coordinator's port, for a Kafka fleet made of its own principal's Secrets (read by name
   in its namespace, checked by ``planners.kafka_credentials``);
3. :func:`admit_group`: the coordinator's session bounds (the first thing asked of it; a consumer-protocol fleet is
   refused there when the Kafka cluster's finalized ``group.version`` does not enable the protocol:
   ``planners.kafka_features``), the group described and
   its kind decided (``planners.coordinator_kind.kind_of_group``: a group the operator does not manage is
   refused), and the group claimed for the fleet, at the coordinator where the kind records owners and in the
   operator's own records where it does not (``reconcile.ownership``: refused ``GroupOwned`` or ``GroupInUse``, and
   nothing else is sent); claims an earlier ``groupId`` left behind are released once the fleet's members are gone.
   What it returns is the pass's scope from then on: :class:`Admitted` (the fleet, its group, its workload).

Every later look at the group goes through ``reconcile.group.AdmittedGroup.look``, which decides the kind again.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners import fleet_status
from berth.operator.planners.admission import admit
from berth.operator.planners.claims import GroupClaim, census_keys, claim_key, holder_of, volume_claim_keys
from berth.operator.planners.coordinator_kind import declared_protocol
from berth.operator.planners.coordinator_target import BerthTarget, CoordinatorTarget
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.kafka_credentials import (
    KafkaConnection,
    SecretRole,
    checked,
    kafka_connection,
    secrets_needed,
    secrets_not_readable,
)
from berth.operator.planners.kafka_features import consumer_protocol_refusal
from berth.operator.planners.observations import CoordinatorBounds, GroupDescription
from berth.operator.planners.ownership import OwnedGroup
from berth.operator.ports import ClaimsIndex, CoordinatorPort, NotPermitted, WorkloadPort
from berth.operator.reconcile import ownership
from berth.operator.reconcile.group import AdmittedGroup, describe
from berth.operator.reconcile.scope import Scope
from berth.operator.spec.fleet import Fleet


def admit_fleet(scope: Scope, claims: ClaimsIndex) -> tuple[Fleet, CoordinatorTarget] | Refusal:
    """Whether this fleet may act at all, before anything is sent anywhere."""
    uid = scope.record.uid

    def other_holder(fleet: Fleet, target: CoordinatorTarget) -> GroupClaim | None:
        holder = holder_of(claims.holders(claim_key(target.identity, fleet.spec.group_id)))
        return holder if holder is not None and holder.uid != uid else None

    def volume_claim_holder(fleet: Fleet) -> tuple[str, GroupClaim] | None:
        for key in volume_claim_keys(fleet):
            holder = holder_of(claims.holders(key))
            if holder is not None and holder.uid != uid:
                return key[1], holder
        return None

    def fleet_bound(fleet: Fleet) -> str | None:
        total, namespaced = census_keys(fleet.namespace)
        defaults = scope.settings.defaults
        for key, limit, said in (
            (total, defaults.max_fleets, "the operator serves at most {} fleets (--max-fleets)"),
            (
                namespaced,
                defaults.max_fleets_per_namespace,
                f"the operator serves at most {{}} fleets in namespace {fleet.namespace} (--max-fleets-per-namespace)",
            ),
        ):
            if limit > 0 and not claims.within(key, limit, uid):
                return said.format(limit) + " and this fleet is beyond them"
        return None

    return admit(
        scope.record.body,
        scope.settings.defaults,
        other_holder,
        volume_claim_holder=volume_claim_holder,
        fleet_bound=fleet_bound,
    )


@dataclass(frozen=True, slots=True)
class Connected:
    """The coordinator's port, and for Kafka the connection (principal) it was made of."""

    coordinator: CoordinatorPort
    connection: KafkaConnection | None = None


async def connect(scope: Scope, fleet: Fleet, target: CoordinatorTarget) -> Connected:
    """The coordinator's port; a Kafka fleet's Secrets are read and checked first (a :class:`Refusal` names the
    missing Secret or key)."""
    if isinstance(target, BerthTarget):
        return Connected(await scope.ports.coordinators.connect(target))
    secrets: dict[SecretRole, dict[str, str]] = {}
    for need in secrets_needed(target):
        try:
            secrets_port = scope.ports.secrets
            found = None if secrets_port is None else await secrets_port.read(fleet.namespace, need.name)
        except NotPermitted as error:
            message = secrets_not_readable(fleet.namespace, need.name)
            raise Refusal(fleet_status.SECRETS_NOT_READABLE, message) from error
        secrets[need.role] = dict(checked(need, fleet.namespace, found))
    connection = kafka_connection(target, fleet.namespace, secrets)
    return Connected(await scope.ports.coordinators.connect(connection), connection)


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
    scope: Scope, fleet: Fleet, target: CoordinatorTarget, connected: Connected
) -> tuple[Admitted, CoordinatorBounds]:
    """The coordinator's bounds, the group's kind, and the claim (raises ``GroupOwned``, ``UnmanagedGroup``,
    ``Refusal``, ``CoordinatorUnavailable``): the fleet admitted, on its group and its workload."""
    bounds = await scope.ports.coordinators.bounds_of(connected.coordinator)
    refusal = consumer_protocol_refusal(declared_protocol(fleet), bounds, target)
    if refusal is not None:
        raise refusal
    group, description = await look_up_group(connected, fleet, target)
    await ownership.claim(scope, fleet, group, description)
    await ownership.settle(scope, fleet, OwnedGroup(target.identity, fleet.spec.group_id), connected.coordinator)
    return admitted(scope, fleet, group), bounds


@dataclass(frozen=True, slots=True)
class Admitted(Scope):
    """A pass's scope once its fleet is admitted: the fleet's spec, its group, and its workload."""

    fleet: Fleet
    group: AdmittedGroup
    workload: WorkloadPort


def admitted(scope: Scope, fleet: Fleet, group: AdmittedGroup) -> Admitted:
    """``scope`` with the admitted ``fleet``, its ``group`` and its workload (``ports.workload_for``)."""
    return Admitted(
        scope.ports, scope.settings, scope.record, scope.memory, fleet, group, scope.ports.workload_for(fleet)
    )
