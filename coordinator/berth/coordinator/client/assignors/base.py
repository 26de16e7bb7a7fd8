"""What every assignor shares: its input (``AssignorMember``), the ``Assignor`` protocol, and the KIP-345 member order.

Rules every assignor here follows:

- Members are ordered by ``group.instance.id`` first: static members sorted by instance id, then dynamic members by
  member id (KIP-345, "Client Behavior Changes"). Nothing else about a static member's member id is looked at, so a
  restarted static member (new member id, same instance id) gets the same partitions back.
- The result has an entry for every member (an empty ``Assignment`` when it gets nothing); only subscribers of a
  topic get its partitions; topics without a partition count (unknown to the leader) are skipped, as Kafka does.
- Deterministic: the same members in any input order give the same result. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from berth.coordinator.client.encoding import Assignment, Subscription

#: A member id as the coordinator hands it out (KIP-394).
MemberId: TypeAlias = str
#: One partition: (topic, partition number).
TopicPartition: TypeAlias = tuple[str, int]


@dataclass(frozen=True)
class AssignorMember:
    """One member as the leader sees it in a join response: its ids and its decoded subscription."""

    member_id: MemberId
    group_instance_id: str | None
    subscription: Subscription


class Assignor(Protocol):
    """A partition assignor the group leader runs; ``name`` is the protocol name members send in joins."""

    @property
    def name(self) -> str: ...

    def assign(
        self, members: Sequence[AssignorMember], partitions_per_topic: Mapping[str, int]
    ) -> dict[MemberId, Assignment]: ...


def kip345_order_key(member: AssignorMember) -> tuple[int, str, str]:
    """Static members first by instance id, then dynamic ones by member id.

    The member id only breaks ties between static members that share an instance id, which the coordinator
    never lets happen (it fences the older one); it keeps the order total anyway.
    """
    if member.group_instance_id is not None:
        return (0, member.group_instance_id, member.member_id)
    return (1, member.member_id, "")


def order_members(members: Sequence[AssignorMember]) -> tuple[AssignorMember, ...]:
    """The members in KIP-345 order; duplicate member ids are a caller bug and raise ``ValueError``."""
    seen: set[MemberId] = set()
    for member in members:
        if member.member_id in seen:
            raise ValueError(f"member id {member.member_id!r} appears twice")
        seen.add(member.member_id)
    return tuple(sorted(members, key=kip345_order_key))


def checked_partition_counts(partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    """The partition counts, sorted by topic; a negative count is a caller bug and raises ``ValueError``."""
    for topic, count in partitions_per_topic.items():
        if count < 0:
            raise ValueError(f"topic {topic!r} has a negative partition count {count}")
    return {topic: partitions_per_topic[topic] for topic in sorted(partitions_per_topic)}


def assignments_from(
    ordered_members: Sequence[AssignorMember], held: Mapping[MemberId, Iterable[TopicPartition]]
) -> dict[MemberId, Assignment]:
    """One ``Assignment`` per member, in member order; members absent from ``held`` get an empty one."""
    result: dict[MemberId, Assignment] = {}
    for member in ordered_members:
        by_topic: defaultdict[str, list[int]] = defaultdict(list)
        for topic, partition in held.get(member.member_id, ()):
            by_topic[topic].append(partition)
        result[member.member_id] = Assignment(partitions={topic: tuple(numbers) for topic, numbers in by_topic.items()})
    return result
