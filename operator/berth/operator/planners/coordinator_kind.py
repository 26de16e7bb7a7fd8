"""What a fleet's coordinator does for its group, as ONE value: :class:`CoordinatorKind`, and every decision that
differs between kinds, in one place.

A coordinator port carries its kind (``CoordinatorPort.kind``): :data:`BERTH` (Berth's coordinator: it takes
expected members, records each group's owner and keeps a journal the operator follows) or :data:`KAFKA_CLASSIC`
(a Kafka cluster's classic group: none of that). The reconcile steps ask the kind what the coordinator can do,
never which adapter they hold; what differs beyond that (the group-deletion default, the conditions only one kind
carries, which groups are managed at all) is decided here.

Rules:

- Pure functions and frozen values; a kind is compared by identity of its capabilities, never by adapter type.
- :func:`kind_of_group` is the one place that decides whether a described group is managed and as which kind: a
  Kafka group of the KIP-848 consumer protocol is refused today (:class:`UnmanagedGroup`); a kind for it
  (``KAFKA_CONSUMER``: session timeout as a group config, no client-side session settings, removal by instance
  id) would be returned from here, and the planners would read its capabilities like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners import fleet_status
from berth.operator.planners.conditions import Condition
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import GroupDescription, GroupProtocol
from berth.operator.spec import Fleet


@dataclass(frozen=True, slots=True)
class CoordinatorKind:
    """What a coordinator does for a group (capabilities, not an adapter's identity)."""

    name: str  # for logs and tests: "berth", "kafka-classic"
    #: Takes expected members (docs/api.md §7): scale-ups are pre-registered, one rebalance for k new pods.
    pre_registers: bool
    #: Records each group's owning fleet (docs/api.md §7a): the operator claims its group first and every write
    #: names the fleet's uid, so the coordinator refuses a write to another fleet's group.
    records_owners: bool
    #: Keeps a membership journal the operator follows (status follows the group within a second); without one the
    #: operator records what it observes as evidence (``planners.evidence``) for the pipeline.
    keeps_journal: bool
    #: What a deletion does with the group when ``spec.deleteGroupOnDelete`` is unset: deleting a group deletes
    #: its committed offsets, which on Kafka other tools and a re-created fleet may still need.
    deletes_group_by_default: bool

    def owner_uid(self, fleet_uid: str) -> str | None:
        """What a write names as its owner: the fleet's uid where the coordinator records owners, else nothing."""
        return fleet_uid if self.records_owners else None


BERTH = CoordinatorKind(
    "berth", pre_registers=True, records_owners=True, keeps_journal=True, deletes_group_by_default=True
)
KAFKA_CLASSIC = CoordinatorKind(
    "kafka-classic", pre_registers=False, records_owners=False, keeps_journal=False, deletes_group_by_default=False
)


class UnmanagedGroup(Refusal):
    """The group is of a protocol the operator does not manage: the fleet is refused, and released on deletion
    without anything being sent for its group."""


def kind_of_group(coordinator: CoordinatorKind, description: GroupDescription, *, where: str) -> CoordinatorKind:
    """The kind the described group is managed as (``where``: the coordinator, for the message); raises
    :class:`UnmanagedGroup` for a group the operator does not manage."""
    if description.protocol is GroupProtocol.CONSUMER:
        raise UnmanagedGroup(
            fleet_status.CONSUMER_PROTOCOL_GROUP, consumer_protocol_message(description.group_id, where)
        )
    return coordinator


def deletes_group(fleet: Fleet, kind: CoordinatorKind) -> bool:
    """spec.deleteGroupOnDelete, else the kind's default."""
    if fleet.spec.delete_group_on_delete is not None:
        return fleet.spec.delete_group_on_delete
    return kind.deletes_group_by_default


def kind_conditions(fleet: Fleet, kind: CoordinatorKind) -> tuple[Condition, ...]:
    """Conditions the coordinator's kind adds: without pre-registration, that there is none and what that costs."""
    if kind.pre_registers:
        return ()
    parallel = fleet.spec.pod_management_policy == "Parallel"
    return (
        Condition(
            fleet_status.PRE_REGISTRATION,
            "False",
            "NotSupportedByKafka",
            "Kafka has no pre-registration: new pods join as they start"
            + (
                "; podManagementPolicy Parallel starts them together, so a scale-up costs about one rebalance"
                if parallel
                else "; with podManagementPolicy OrderedReady each new pod costs a rebalance (set Parallel to"
                " bring new pods in together)"
            ),
        ),
    )


def consumer_protocol_message(group_id: str, where: str) -> str:
    return (
        f"group {group_id} on {where} uses the KIP-848 consumer protocol (group.protocol=consumer):"
        " the operator manages classic groups only. There the broker owns the session timeout (the group config"
        " consumer.session.timeout.ms, not a client setting) and admin removal of members is not supported by"
        " every broker. Run the consumers with group.protocol=classic, or manage this group without the operator"
    )
