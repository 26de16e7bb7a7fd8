"""The sticky assignor (protocol name ``sticky``): keep what members own, move the fewest partitions to balance.

Three steps, all in KIP-345 member order so that the result is deterministic and restart-invariant:

1. Keep: each member keeps the partitions its subscription says it owns, after validation. Dropped: partitions of
   topics it no longer subscribes to (or that the leader has no count for) and numbers beyond the topic's
   partition count. A partition claimed by several members goes to the first claimant in KIP-345 order (the
   classic protocol carries no generation per claim to tell the rightful owner; conflicts only follow a member
   that missed a rebalance, and whichever claimant wins, the other claim is revoked).
2. Place: every partition nobody kept goes to its least-loaded subscriber (fewest partitions in total, then
   KIP-345 order). Partitions of topics with fewer subscribers go first: they have fewer places to go, and placing
   them late would overload their few subscribers and force kept partitions off them in step 3 (a heuristic: it
   only matters with heterogeneous subscriptions).
3. Balance: while some member holds a partition that a subscriber of its topic holding two or more fewer
   partitions could take, the most-loaded such member gives one partition of that topic to the least-loaded
   subscriber: one placed in step 2 if it has any (moving it revokes nothing), else its highest-numbered. Each
   move lowers the sum of squared counts, so this ends.

Guarantees. With identical subscriptions the counts end within one of each other (max - min <= 1) and the number
of partitions that change owner is the minimum any balanced assignment needs: with P partitions over m members
(q = P // m, r = P % m) and o_i kept after validation, sum(max(0, o_i - q)) - min(r, #{o_i > q}) owned partitions
move, plus every partition whose owner left. A leave therefore moves only the leaver's partitions and a join to a
balanced group only what the newcomers take. Heterogeneous subscriptions: the result is balanced *locally* (no
partition could go to a subscriber of its topic with two or more fewer partitions), which puts members with the
same subscriptions within one of each other; the total count of moves is small but not proven minimal there, and
counts are balanced in total, not per topic (as Kafka's sticky assignors do).
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


class StickyAssignor:
    name = "sticky"

    def assign(
        self, members: Sequence[AssignorMember], partitions_per_topic: Mapping[str, int]
    ) -> dict[MemberId, Assignment]:
        ordered = order_members(members)
        placement = _Placement(ordered, checked_partition_counts(partitions_per_topic))
        placement.keep_valid_owned(ordered)
        placement.place_unowned()
        placement.balance()
        return assignments_from(ordered, placement.held_partitions())


_Move = tuple[MemberId, MemberId, str]  # donor, receiver, topic


class _Placement:
    """The working state of one ``assign`` call: who holds what, and how many each holds."""

    def __init__(self, ordered: Sequence[AssignorMember], partition_counts: Mapping[str, int]) -> None:
        self._partition_counts = partition_counts
        self._rank = {member.member_id: index for index, member in enumerate(ordered)}
        self._topics_of = {
            member.member_id: frozenset(member.subscription.topics) & partition_counts.keys() for member in ordered
        }
        self._subscribers: dict[str, list[MemberId]] = {}
        for topic in partition_counts:  # sorted, and members in rank order: every list below is deterministic
            subscribers = [member.member_id for member in ordered if topic in self._topics_of[member.member_id]]
            if subscribers:
                self._subscribers[topic] = subscribers
        self._held: dict[MemberId, dict[str, set[int]]] = {member.member_id: {} for member in ordered}
        self._size = dict.fromkeys(self._rank, 0)
        self._owner: dict[TopicPartition, MemberId] = {}
        self._kept: set[TopicPartition] = set()

    def keep_valid_owned(self, ordered: Sequence[AssignorMember]) -> None:
        for member in ordered:
            for topic, partitions in member.subscription.owned_partitions.items():
                if topic not in self._topics_of[member.member_id]:
                    continue
                for partition in partitions:
                    if partition < self._partition_counts[topic] and (topic, partition) not in self._owner:
                        self._give(member.member_id, topic, partition)
                        self._kept.add((topic, partition))

    def place_unowned(self) -> None:
        unowned = [
            (topic, partition)
            for topic in self._subscribers
            for partition in range(self._partition_counts[topic])
            if (topic, partition) not in self._owner
        ]
        unowned.sort(key=lambda topic_partition: (len(self._subscribers[topic_partition[0]]), topic_partition))
        for topic, partition in unowned:
            self._give(self._least_loaded_subscriber(topic), topic, partition)

    def balance(self) -> None:
        while (move := self._next_balancing_move()) is not None:
            donor, receiver, topic = move
            # A partition placed in this call costs nothing to move; one the donor kept costs a revocation.
            partition = max(self._held[donor][topic], key=lambda number: ((topic, number) not in self._kept, number))
            self._take(donor, topic, partition)
            self._give(receiver, topic, partition)
            self._kept.discard((topic, partition))  # its revocation is paid: moving it again costs nothing more

    def held_partitions(self) -> dict[MemberId, list[TopicPartition]]:
        return {
            member_id: [(topic, partition) for topic, partitions in by_topic.items() for partition in partitions]
            for member_id, by_topic in self._held.items()
        }

    def _next_balancing_move(self) -> _Move | None:
        if not self._size:
            return None
        smallest = min(self._size.values())
        for donor in sorted(self._held, key=lambda member_id: (-self._size[member_id], self._rank[member_id])):
            if self._size[donor] - smallest < 2:
                return None  # donors come most-loaded first: nobody after this one can give either
            lightest = {topic: self._least_loaded_subscriber(topic) for topic in sorted(self._held[donor])}
            takers = [
                (self._size[receiver], self._rank[receiver], topic)
                for topic, receiver in lightest.items()
                if self._size[donor] - self._size[receiver] >= 2
            ]
            if takers:
                topic = min(takers)[2]  # the lightest taker over all the donor's topics
                return donor, lightest[topic], topic
        return None

    def _least_loaded_subscriber(self, topic: str) -> MemberId:
        return min(self._subscribers[topic], key=lambda member_id: (self._size[member_id], self._rank[member_id]))

    def _give(self, member_id: MemberId, topic: str, partition: int) -> None:
        self._held[member_id].setdefault(topic, set()).add(partition)
        self._size[member_id] += 1
        self._owner[(topic, partition)] = member_id

    def _take(self, member_id: MemberId, topic: str, partition: int) -> None:
        partitions = self._held[member_id][topic]
        partitions.remove(partition)
        if not partitions:
            del self._held[member_id][topic]  # _next_balancing_move looks only at topics a donor still holds
        self._size[member_id] -= 1
        del self._owner[(topic, partition)]
