"""The range assignor (protocol name ``range``): Kafka's RangeAssignor with KIP-345 member order.

Per topic, the topic's subscribers in KIP-345 order get contiguous ranges of partitions; with n partitions and m
subscribers each gets n // m, and the first n % m one extra. Topics are independent, so with several topics the
first members can end up with several extras: that is Kafka's behaviour, kept so that results match it.
Owned partitions are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from berth.coordinator.client.assignors.base import (
    AssignorMember,
    MemberId,
    TopicPartition,
    assignments_from,
    checked_partition_counts,
    order_members,
)
from berth.coordinator.client.encoding import Assignment


class RangeAssignor:
    name = "range"

    def assign(
        self, members: Sequence[AssignorMember], partitions_per_topic: Mapping[str, int]
    ) -> dict[MemberId, Assignment]:
        ordered = order_members(members)
        held: dict[MemberId, list[TopicPartition]] = {member.member_id: [] for member in ordered}
        for topic, count in checked_partition_counts(partitions_per_topic).items():
            subscribers = [member for member in ordered if topic in member.subscription.topics]
            if not subscribers:
                continue
            per_member, extra = divmod(count, len(subscribers))
            for index, member in enumerate(subscribers):
                start = index * per_member + min(index, extra)
                length = per_member + (1 if index < extra else 0)
                held[member.member_id].extend((topic, partition) for partition in range(start, start + length))
        return assignments_from(ordered, held)
