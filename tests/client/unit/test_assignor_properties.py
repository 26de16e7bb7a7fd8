"""Properties every assignor keeps, for any group: full coverage, balance, determinism, restart invariance."""

from __future__ import annotations

from dataclasses import replace

from assignor_scenarios import by_identity, groups, identifiers, owners, partition_counts, sizes
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.coordinator.client.assignors import ASSIGNORS, RangeAssignor

assignors = st.sampled_from(sorted(ASSIGNORS.values(), key=lambda assignor: assignor.name))
property_settings = settings(max_examples=75, deadline=None)


@property_settings
@given(assignors, groups(), partition_counts)
def test_every_partition_of_a_subscribed_topic_goes_to_exactly_one_subscriber(assignor, members, counts):
    result = assignor.assign(members, counts)

    assert set(result) == {member.member_id for member in members}
    held = [
        (topic, partition, member_id)
        for member_id, assignment in result.items()
        for topic, partitions in assignment.partitions.items()
        for partition in partitions
    ]
    subscribed_topics = {topic for member in members for topic in member.subscription.topics if topic in counts}
    expected = {(topic, partition) for topic in subscribed_topics for partition in range(counts[topic])}
    assert sorted((topic, partition) for topic, partition, _ in held) == sorted(expected)
    topics_of = {member.member_id: member.subscription.topics for member in members}
    assert all(topic in topics_of[member_id] for topic, _, member_id in held)


@property_settings
@given(assignors, groups(homogeneous=True), partition_counts)
def test_with_identical_subscriptions_counts_are_within_one(assignor, members, counts):
    result = assignor.assign(members, counts)

    if members and isinstance(assignor, RangeAssignor):
        # Range balances each topic on its own (Kafka's behaviour); its totals may differ by one per topic.
        for topic in counts:
            per_member = [len(assignment.partitions.get(topic, ())) for assignment in result.values()]
            assert max(per_member) - min(per_member) <= 1
    elif members:
        counts_held = sizes(result).values()
        assert max(counts_held) - min(counts_held) <= 1


@property_settings
@given(assignors, groups(), partition_counts, st.randoms(use_true_random=False))
def test_the_same_members_in_any_order_get_the_same_assignment(assignor, members, counts, random):
    shuffled = list(members)
    random.shuffle(shuffled)
    reordered_counts = dict(reversed(list(counts.items())))

    assert assignor.assign(shuffled, reordered_counts) == assignor.assign(members, counts)


@property_settings
@given(assignors, groups(), partition_counts, st.data())
def test_new_member_ids_for_static_members_leave_the_assignment_per_instance_unchanged(assignor, members, counts, data):
    taken = {member.member_id for member in members}
    new_ids = data.draw(
        st.lists(identifiers.map(lambda text: f"new-{text}"), unique=True, min_size=len(members), max_size=len(members))
    )
    assert not taken & set(new_ids)
    restarted = [
        replace(member, member_id=new_id) if member.group_instance_id is not None else member
        for member, new_id in zip(members, new_ids, strict=True)
    ]

    assert by_identity(restarted, assignor.assign(restarted, counts)) == by_identity(
        members, assignor.assign(members, counts)
    )


@property_settings
@given(assignors, groups(), partition_counts)
def test_nobody_gets_a_partition_beyond_the_topic_count(assignor, members, counts):
    assert all(partition < counts[topic] for topic, partition in owners(assignor.assign(members, counts)))
