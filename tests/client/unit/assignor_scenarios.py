"""Shared vocabulary of the assignor tests: building groups, counting moves, and Hypothesis strategies for groups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hypothesis import strategies as st

from berth.coordinator.client.assignors import AssignorMember
from berth.coordinator.client.encoding import Assignment, Subscription

TOPICS = ("orders", "payments", "refunds")
#: A topic members may subscribe to that the leader has no partition count for.
UNKNOWN_TOPIC = "unknown"


def static(member_id, instance_id, topics=("orders",), owned=None):
    return AssignorMember(member_id, instance_id, Subscription(tuple(topics), owned or {}))


def dynamic(member_id, topics=("orders",), owned=None):
    return AssignorMember(member_id, None, Subscription(tuple(topics), owned or {}))


def fleet(instance_ids, topics=("orders",), owned_by_instance=None):
    """Static members as a StatefulSet runs them: member id ``<instance>-member``, owning what they held."""
    owned_by_instance = owned_by_instance or {}
    return [
        static(f"{instance}-member", instance, topics, dict(owned_by_instance.get(instance, Assignment({})).partitions))
        for instance in instance_ids
    ]


def ordinals(count, name="orders"):
    return [f"{name}-{ordinal}" for ordinal in range(count)]


def by_identity(members: Iterable[AssignorMember], result: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The result keyed by instance id for static members (member id for dynamic ones): what survives a restart."""
    return {member.group_instance_id or member.member_id: result[member.member_id] for member in members}


def owners(assignments: Mapping[str, Assignment]) -> dict[tuple[str, int], str]:
    return {
        (topic, partition): holder
        for holder, assignment in assignments.items()
        for topic, partitions in assignment.partitions.items()
        for partition in partitions
    }


def partitions_moved(before: Mapping[str, Assignment], after: Mapping[str, Assignment]) -> int:
    """Partitions someone held before that now have another holder (or none): what a rebalance revokes."""
    after_owners = owners(after)
    return sum(1 for partition, holder in owners(before).items() if after_owners.get(partition) != holder)


def sizes(assignments: Mapping[str, Assignment]) -> dict[str, int]:
    return {holder: assignment.partition_count for holder, assignment in assignments.items()}


identifiers = st.text(alphabet="abcxyz019-", min_size=1, max_size=5)
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(min_value=0, max_value=12), min_size=1)
topic_sets = st.frozensets(st.sampled_from((*TOPICS, UNKNOWN_TOPIC))).map(sorted).map(tuple)
owned_claims = st.dictionaries(
    st.sampled_from((*TOPICS, UNKNOWN_TOPIC)),
    st.lists(st.integers(min_value=0, max_value=14), max_size=6).map(tuple),
    max_size=3,
)


@st.composite
def groups(draw, *, homogeneous=False, max_members=8):
    """Members with unique random ids, each static or dynamic, with random subscriptions and random (even
    conflicting or stale) owned-partition claims; ``homogeneous`` gives every member the same topics."""
    member_ids = draw(st.lists(identifiers, unique=True, max_size=max_members))
    instance_ids = draw(st.lists(identifiers, unique=True, min_size=len(member_ids), max_size=len(member_ids)))
    shared_topics = draw(topic_sets)
    return [
        AssignorMember(
            member_id,
            instance_id if draw(st.booleans()) else None,
            Subscription(shared_topics if homogeneous else draw(topic_sets), draw(owned_claims)),
        )
        for member_id, instance_id in zip(member_ids, instance_ids, strict=True)
    ]
