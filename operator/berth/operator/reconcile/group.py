"""The fleet's group at its coordinator, as admitted: :class:`AdmittedGroup`, and how it is looked at.

Every look at the group goes through :meth:`AdmittedGroup.look`, which decides the kind again (a group may change
protocol under a running fleet: a classic group converting to KIP-848's consumer protocol is managed as a
consumer-protocol group from the describe that shows it); a group the operator does not manage raises
``planners.coordinator_kind.UnmanagedGroup``.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners.advice import group_key
from berth.operator.planners.coordinator_kind import CoordinatorKind, kind_of_group
from berth.operator.planners.coordinator_target import CoordinatorTarget, KafkaTarget
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupDescription, GroupProtocol
from berth.operator.ports import CoordinatorPort


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


async def describe(
    coordinator: CoordinatorPort, group_id: str, where: str, declared: GroupProtocol = GroupProtocol.CLASSIC
) -> tuple[GroupDescription, CoordinatorKind]:
    """The group as the coordinator describes it, and the kind it is managed as (raises ``UnmanagedGroup``)."""
    description = await coordinator.describe(group_id)
    return description, kind_of_group(coordinator.kind, description, where=where, declared=declared)
