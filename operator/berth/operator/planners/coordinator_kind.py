"""What a fleet's coordinator does for its group, as ONE value: :class:`CoordinatorKind`, and every decision that
differs between kinds, in one place.

A coordinator port carries its kind (``CoordinatorPort.kind``): :data:`BERTH` (Berth's coordinator: it takes
expected members, records each group's owner and keeps a journal the operator follows) or :data:`KAFKA_CLASSIC`
(a Kafka cluster, whose classic groups do none of that). A Kafka group of KIP-848's consumer protocol is managed
as :data:`KAFKA_CONSUMER`: its session timeout is the group's config (``consumer.session.timeout.ms``) that the
operator sets, its pods get no client-side session, heartbeat or assignor settings, members are removed by
instance id all the same (Kafka >= 4.0, KAFKA-18188), and a restarted pod can be refused UNRELEASED_INSTANCE_ID
while its previous member holds the id. The reconcile steps ask the kind what the coordinator does, never which
adapter they hold; what differs beyond that (the group-deletion default, the conditions only one kind carries,
which groups are managed at all) is decided here.

Rules:

- Pure functions and frozen values; a kind is compared by identity of its capabilities, never by adapter type.
- :func:`kind_of_group` is the one place that decides whether a described group is managed and as which kind: on
  Kafka, the protocol the broker reports for the group (so a group that converts between protocols is followed at
  the next describe), or, for a group that does not exist yet, the protocol the fleet declares
  (``spec.coordinator.kafka.groupProtocol``); a streams-protocol group is refused (:class:`UnmanagedGroup`: Kafka
  has no admin removal of its members), as is a consumer-protocol group anywhere but on Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners import fleet_status
from berth.operator.planners.conditions import Condition
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import (
    ConsumerProtocolBounds,
    CoordinatorBounds,
    GroupDescription,
    GroupProtocol,
)
from berth.operator.planners.sizing import heartbeat_interval_ms
from berth.operator.spec.fleet import Fleet


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
    #: The session timeout is the group's own config, set by the operator at the coordinator (KIP-848's
    #: ``consumer.session.timeout.ms``), rather than each member's ``session.timeout.ms``: changing it restarts no
    #: pod, and members must not be given one.
    session_timeout_on_group: bool = False
    #: The coordinator reports a generation (Berth) or an epoch (KIP-848) for the group; Kafka's classic
    #: DescribeGroups has none, so status shows none.
    reports_generation: bool = True
    #: A restarted member can be refused UNRELEASED_INSTANCE_ID while its previous incarnation holds its instance
    #: id (KIP-848: a member that did not leave with epoch -2 keeps the id until its session expires).
    instance_ids_held_until_expiry: bool = False

    def owner_uid(self, fleet_uid: str) -> str | None:
        """What a write names as its owner: the fleet's uid where the coordinator records owners, else nothing."""
        return fleet_uid if self.records_owners else None


BERTH = CoordinatorKind(
    "berth", pre_registers=True, records_owners=True, keeps_journal=True, deletes_group_by_default=True
)
KAFKA_CLASSIC = CoordinatorKind(
    "kafka-classic",
    pre_registers=False,
    records_owners=False,
    keeps_journal=False,
    deletes_group_by_default=False,
    reports_generation=False,
)
KAFKA_CONSUMER = CoordinatorKind(
    "kafka-consumer",
    pre_registers=False,
    records_owners=False,
    keeps_journal=False,
    deletes_group_by_default=False,
    session_timeout_on_group=True,
    reports_generation=True,
    instance_ids_held_until_expiry=True,
)
#: The kinds of a Kafka cluster's groups, by the protocol the broker reports (or the fleet declares).
KAFKA_KINDS = {GroupProtocol.CLASSIC: KAFKA_CLASSIC, GroupProtocol.CONSUMER: KAFKA_CONSUMER}


#: A Kafka broker's settings bounding consumer-protocol groups' session timeouts (named in reasons and conditions).
CONSUMER_MIN_SESSION_SETTING = "group.consumer.min.session.timeout.ms"
CONSUMER_MAX_SESSION_SETTING = "group.consumer.max.session.timeout.ms"


def session_bounds_for(kind: CoordinatorKind, bounds: CoordinatorBounds) -> CoordinatorBounds:
    """The bounds the group's session timeout must keep: a consumer-protocol group's are the broker's
    ``group.consumer.min/max.session.timeout.ms`` (Kafka's defaults, 45 and 60 s, when it did not say)."""
    if not kind.session_timeout_on_group:
        return bounds
    consumer = bounds.consumer or ConsumerProtocolBounds()
    return CoordinatorBounds(
        consumer.min_session_timeout_ms,
        consumer.max_session_timeout_ms,
        min_setting=CONSUMER_MIN_SESSION_SETTING,
        max_setting=CONSUMER_MAX_SESSION_SETTING,
    )


def group_heartbeat_ms(session_timeout_ms: int, bounds: CoordinatorBounds, preferred_ms: int) -> int:
    """A consumer-protocol group's heartbeat interval for this session timeout: at most a third of it, within the
    broker's ``group.consumer.min/max.heartbeat.interval.ms``, and below the session timeout (the broker refuses
    anything else)."""
    consumer = bounds.consumer or ConsumerProtocolBounds()
    wanted = heartbeat_interval_ms(session_timeout_ms, preferred_ms)
    within = max(consumer.min_heartbeat_interval_ms, min(consumer.max_heartbeat_interval_ms, wanted))
    return max(1, min(within, session_timeout_ms - 1))


class UnmanagedGroup(Refusal):
    """The group is of a protocol the operator does not manage: the fleet is refused, and released on deletion
    without anything being sent for its group."""


def kind_of_group(
    coordinator: CoordinatorKind,
    description: GroupDescription,
    *,
    where: str,
    declared: GroupProtocol = GroupProtocol.CLASSIC,
) -> CoordinatorKind:
    """The kind the described group is managed as (``where``: the coordinator, for the message; ``declared``: the
    protocol the fleet's consumers use, which decides for a group that does not exist yet); raises
    :class:`UnmanagedGroup` for a group the operator does not manage."""
    protocol = description.protocol if description.known else declared
    if description.protocol is GroupProtocol.STREAMS:
        raise UnmanagedGroup(fleet_status.STREAMS_PROTOCOL_GROUP, streams_protocol_message(description.group_id, where))
    if coordinator not in KAFKA_KINDS.values():
        if protocol is GroupProtocol.CONSUMER:
            raise UnmanagedGroup(
                fleet_status.CONSUMER_PROTOCOL_GROUP, consumer_protocol_message(description.group_id, where)
            )
        return coordinator
    return KAFKA_KINDS.get(protocol, KAFKA_CLASSIC)


def declared_protocol(fleet: Fleet) -> GroupProtocol:
    """The protocol the fleet's consumers are configured for (classic unless its Kafka spec says consumer)."""
    kafka = fleet.spec.coordinator.kafka
    return GroupProtocol(kafka.group_protocol.value) if kafka is not None else GroupProtocol.CLASSIC


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


def protocol_conditions(fleet: Fleet, description: GroupDescription, kind: CoordinatorKind) -> tuple[Condition, ...]:
    """On Kafka, ``GroupProtocol``: which protocol the group uses, and whether the fleet's pods are set up for it."""
    if fleet.spec.coordinator.kafka is None:
        return ()
    declared = declared_protocol(fleet)
    actual = GroupProtocol.CONSUMER if kind is KAFKA_CONSUMER else GroupProtocol.CLASSIC
    group = description.group_id
    if not description.known:
        return (
            Condition(
                fleet_status.GROUP_PROTOCOL,
                "True",
                "AsDeclared",
                f"group {group} does not exist yet; the fleet's consumers use the {declared.value} protocol",
            ),
        )
    if declared is actual:
        return (
            Condition(
                fleet_status.GROUP_PROTOCOL,
                "True",
                "AsDeclared",
                f"group {group} uses the {actual.value} protocol, as spec.coordinator.kafka.groupProtocol says",
            ),
        )
    if declared is GroupProtocol.CONSUMER:
        message = (
            f"group {group} still uses the classic protocol; the fleet declares consumer: it converts as the pods"
            " restart with group.protocol=consumer (online on Kafka >= 4.0 with group.consumer.migration.policy,"
            " else once the classic members are gone); until then it is managed as a classic group"
        )
    else:
        message = (
            f"group {group} uses the KIP-848 consumer protocol but spec.coordinator.kafka.groupProtocol says"
            " classic: the pods get client-side session and heartbeat settings the consumer protocol refuses; it is"
            " managed as a consumer-protocol group (the session timeout set on the group): set groupProtocol:"
            " consumer"
        )
    return (Condition(fleet_status.GROUP_PROTOCOL, "False", "Converting", message),)


def consumer_protocol_message(group_id: str, where: str) -> str:
    return (
        f"group {group_id} on {where} uses the KIP-848 consumer protocol (group.protocol=consumer), which only a"
        " Kafka cluster coordinates: Berth's coordinator speaks the classic protocol. Run the consumers with"
        " group.protocol=classic, or put the group on Kafka (spec.coordinator.kafka)"
    )


def streams_protocol_message(group_id: str, where: str) -> str:
    return (
        f"group {group_id} on {where} uses Kafka's streams protocol (KIP-1071, group.protocol=streams): Kafka has"
        " no admin removal of a streams group's members, so the operator could neither remove departed pods nor"
        " size its session timeout. Run Kafka Streams with group.protocol=classic (static membership through"
        " consumer.group.instance.id), or manage this group without the operator"
    )
