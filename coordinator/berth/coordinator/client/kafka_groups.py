"""Kafka consumer groups as a Kafka cluster describes them, read with kafka-python's admin client (>= 3.0, < 4): the
group (classic or KIP-848 consumer protocol, a streams group recognised), its committed offsets and its lag.

Used by the operator's Kafka port (``berth.operator.adapters.kafka``) and by ``berth-groups --bootstrap-server``. Rules:

- Blocking functions of a connected ``KafkaAdminClient`` returning plain frozen values; kafka-python's errors
  propagate (callers map them onto their own vocabulary).
- One group, one look: ConsumerGroupDescribe (API 69) first where the broker has it — exact for a consumer-protocol
  group, GROUP_ID_NOT_FOUND for any other — then the classic DescribeGroups v4+; only a group neither knows is
  looked for among the streams groups (ListGroups v5 filtered by type). Nothing here lists every group of a
  cluster to describe one.
- ConsumerGroupDescribe is declared in ``kafka_schemas`` (kafka-python 3.0 has no message for it); where a broker
  leaves a topic's name out of an assignment (kfake), names come from the topics' metadata, cached by topic id.
- Lag per partition is its log end offset (ListOffsets, latest) minus the group's committed offset; a partition
  with no commit has no lag (kafka-consumer-groups.sh shows "-"). Partitions are the committed ones and those
  assigned to members.
- These reach into the admin client's connection manager (``_manager``, ``_find_coordinator_id``) for the raw
  requests; kafka-python is pinned below 4 for that.
"""

from __future__ import annotations

import contextlib
import struct
import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import kafka.errors as errors
from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.structs import TopicPartition

from berth.coordinator.client import kafka_schemas

CLASSIC = "classic"
CONSUMER = "consumer"
STREAMS = "streams"
#: DescribeGroups' answer for a group it does not know (or that is being removed).
NO_GROUP_STATES = frozenset({"Dead", ""})


class ConsumerGroupDescribeRequest(ApiMessage, load_json=kafka_schemas):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=kafka_schemas):  # type: ignore[call-arg,misc]
    pass


@dataclass(frozen=True, slots=True)
class KafkaMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    #: The member's epoch (consumer protocol); None for a classic member.
    member_epoch: int | None
    #: What it owns, (topic, partition), sorted.
    assignment: tuple[tuple[str, int], ...] = ()

    @property
    def name(self) -> str:
        """Its instance id, else its member id."""
        return self.instance_id or self.member_id


@dataclass(frozen=True, slots=True)
class KafkaGroup:
    group_id: str
    #: ``classic``, ``consumer`` or ``streams``; "" when the cluster has no such group.
    protocol: str
    state: str  # as the broker says it ("Stable", "Empty", "Assigning", "Reconciling", ...); "" when none
    members: tuple[KafkaMember, ...] = ()
    #: The group's epoch and its assignment's (consumer protocol only).
    epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return bool(self.protocol)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the group committed nothing here
    log_end: int | None  # None: not known (the partition's leader did not answer)
    owner: str | None = None  # the member it is assigned to (instance id, else member id)

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


def describe_group(
    admin: KafkaAdminClient, group_id: str, topic_names: MutableMapping[uuid.UUID, str] | None = None
) -> KafkaGroup:
    """The group as the cluster knows it (see the module's rules); raises kafka-python's error for an ACL."""
    consumer = _consumer_group_describe(admin, group_id, {} if topic_names is None else topic_names)
    if consumer is not None:
        return consumer
    classic = _classic_describe(admin, group_id)
    if classic is not None:
        return classic
    if _is_streams_group(admin, group_id):
        return KafkaGroup(group_id, STREAMS, "")
    return KafkaGroup(group_id, "", "")


def group_lag(
    admin: KafkaAdminClient, group_id: str, owners: Mapping[tuple[str, int], str] | None = None
) -> tuple[PartitionLag, ...]:
    """Each committed or assigned partition's committed offset, log end offset and owner (``owners``: who is
    assigned which partition, as a describe showed; see :func:`owners_of`), sorted."""
    committed: dict[tuple[str, int], int] = {}
    try:
        offsets = admin.list_group_offsets({group_id: None}).get(group_id, {})
    except errors.GroupIdNotFoundError:
        offsets = {}
    for tp, meta in offsets.items():
        if meta is not None and meta.offset is not None and meta.offset >= 0:
            committed[(tp.topic, tp.partition)] = int(meta.offset)
    owners = owners or {}
    partitions = sorted(set(committed) | set(owners))
    if not partitions:
        return ()
    ends: dict[tuple[str, int], int] = {}
    specs = {TopicPartition(topic, partition): OffsetSpec.LATEST for topic, partition in partitions}
    with contextlib.suppress(errors.KafkaError):  # an unknown topic or a leader away: no log end for now
        for tp, found in admin.list_partition_offsets(specs).items():
            ends[(tp.topic, tp.partition)] = int(found.offset)
    return tuple(
        PartitionLag(topic, partition, committed.get(t := (topic, partition)), ends.get(t), owners.get(t))
        for topic, partition in partitions
    )


def owners_of(group: KafkaGroup) -> dict[tuple[str, int], str]:
    """Who owns each assigned partition: (topic, partition) -> the member's instance id, else its member id."""
    return {tp: member.name for member in group.members for tp in member.assignment}


def list_groups(admin: KafkaAdminClient) -> list[tuple[str, str, str]]:
    """Every group: (group id, protocol, state), sorted by id."""
    found = []
    for group in admin.list_groups():
        kind = group.get("group_type") or (CLASSIC if group.get("protocol_type") == "consumer" else "")
        found.append((str(group["group_id"]), str(kind), str(group.get("group_state") or "")))
    return sorted(found)


# ------------------------------------------------------------------------------------------------- describes


def _describe_at_coordinator(admin: KafkaAdminClient, group_id: str, request: Any, what: str) -> tuple[Any, Any]:
    """``request`` (a describe of ``group_id`` alone) sent to the group's coordinator: the group's entry and its error
    class; a refused authorization raises (naming ``what``), every other error is the caller's to read."""

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    (group,) = [g for g in response.groups if g.group_id == group_id]
    error = errors.for_code(group.error_code)
    if error is errors.GroupAuthorizationFailedError:
        raise error(f"{what} for group {group_id}")
    return group, error


def _consumer_group_describe(
    admin: KafkaAdminClient, group_id: str, topic_names: MutableMapping[uuid.UUID, str]
) -> KafkaGroup | None:
    try:
        admin._manager.broker_version_data.api_version(ConsumerGroupDescribeRequest)
    except errors.IncompatibleBrokerVersion:
        return None  # a broker before KIP-848 has no consumer-protocol groups

    request = ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)
    group, error = _describe_at_coordinator(admin, group_id, request, "ConsumerGroupDescribe")
    if error is not errors.NoError:
        return None  # GROUP_ID_NOT_FOUND: not a consumer-protocol group (or none at all)
    unnamed = {
        tp.topic_id
        for member in group.members
        for tp in member.assignment.topic_partitions
        if not tp.topic_name and tp.topic_id not in topic_names
    }
    if unnamed:
        subscribed = sorted({name for member in group.members for name in member.subscribed_topic_names})
        topic_names.update(_topic_ids(admin, subscribed))
    members = tuple(
        KafkaMember(
            member_id=member.member_id,
            instance_id=member.instance_id or None,
            client_id=member.client_id,
            client_host=member.client_host,
            member_epoch=member.member_epoch,
            assignment=tuple(
                sorted(
                    (tp.topic_name or topic_names.get(tp.topic_id, str(tp.topic_id)), int(partition))
                    for tp in member.assignment.topic_partitions
                    for partition in tp.partitions
                )
            ),
        )
        for member in group.members
    )
    return KafkaGroup(
        group_id, CONSUMER, group.group_state, members, epoch=group.group_epoch, assignment_epoch=group.assignment_epoch
    )


def _classic_describe(admin: KafkaAdminClient, group_id: str) -> KafkaGroup | None:
    request = DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False, min_version=4)
    group, error = _describe_at_coordinator(admin, group_id, request, "DescribeGroups")
    if error is not errors.NoError or group.group_state in NO_GROUP_STATES:
        return None
    members = tuple(
        KafkaMember(
            member_id=member.member_id,
            instance_id=member.group_instance_id or None,
            client_id=member.client_id,
            client_host=member.client_host,
            member_epoch=None,
            assignment=_classic_assignment(member.member_assignment),
        )
        for member in group.members
    )
    return KafkaGroup(group_id, CLASSIC, group.group_state, members)


def _classic_assignment(raw: bytes | None) -> tuple[tuple[str, int], ...]:
    if not raw:
        return ()
    try:
        decoded = ConsumerProtocolAssignment.decode(raw)
    except (struct.error, ValueError, TypeError):
        return ()  # not the consumer protocol's encoding (Connect, a custom protocol): shown as nothing
    return tuple(sorted((str(tp.topic), int(tp.partition)) for tp in decoded.partitions()))


def _is_streams_group(admin: KafkaAdminClient, group_id: str) -> bool:
    """Whether the group's coordinator lists it among its streams groups (ListGroups v5, KIP-1071's type)."""

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        request = ListGroupsRequest(types_filter=[STREAMS], min_version=5)
        return await admin._manager.send(request, node_id=coordinator)

    try:
        response = admin._manager.run(call)
    except (errors.IncompatibleBrokerVersion, errors.UnsupportedVersionError):
        return False  # a broker without ListGroups v5 has no streams groups
    return any(group.group_id == group_id for group in response.groups)


def _topic_ids(admin: KafkaAdminClient, topics: Iterable[str]) -> Mapping[uuid.UUID, str]:
    names = list(topics)
    if not names:
        return {}
    found = {}
    for topic in admin.describe_topics(names):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            found[uuid.UUID(str(topic["topic_id"]))] = str(topic["name"])
    return found
