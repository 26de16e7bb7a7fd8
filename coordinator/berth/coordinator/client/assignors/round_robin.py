"""The round-robin assignor (protocol name ``roundrobin``): Kafka's RoundRobinAssignor with KIP-345 member order.

All (topic, partition) pairs, sorted, are dealt one at a time to the members cycled in KIP-345 order, skipping a
member not subscribed to the partition's topic (the cycle carries on from where it stopped, as in Kafka). With
identical subscriptions the counts end within one of each other. Owned partitions are ignored.
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


class RoundRobinAssignor:
    name = "roundrobin"

    def assign(
        self, members: Sequence[AssignorMember], partitions_per_topic: Mapping[str, int]
    ) -> dict[MemberId, Assignment]:
        ordered = order_members(members)
        held: dict[MemberId, list[TopicPartition]] = {member.member_id: [] for member in ordered}
        cursor = 0
        for topic, count in checked_partition_counts(partitions_per_topic).items():
            if not any(topic in member.subscription.topics for member in ordered):
                continue  # nobody takes it: cycling would never stop
            for partition in range(count):
                while topic not in ordered[cursor].subscription.topics:
                    cursor = (cursor + 1) % len(ordered)
                held[ordered[cursor].member_id].append((topic, partition))
                cursor = (cursor + 1) % len(ordered)
        return assignments_from(ordered, held)
