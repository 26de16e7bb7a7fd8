"""Stickiness, proven on random groups: the sticky assignor moves the fewest partitions any balanced result needs."""

from __future__ import annotations

import math
from collections import defaultdict

from assignor_scenarios import TOPICS, by_identity, groups, identifiers, partition_counts, partitions_moved, sizes
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from berth.coordinator.client.assignors import AssignorMember, StickyAssignor
from berth.coordinator.client.encoding import Assignment, Subscription

sticky = StickyAssignor()
property_settings = settings(max_examples=75, deadline=None)


@st.composite
def scale_changes(draw):
    """Survivors, leavers and joiners of one homogeneous group, and who held what before (any prior ownership:
    unbalanced, partly unowned), keyed by instance id."""
    topics = sorted(draw(st.frozensets(st.sampled_from(TOPICS), min_size=1)))
    counts = {topic: draw(st.integers(min_value=0, max_value=15)) for topic in topics}
    survivors, leavers, joiners = (draw(st.integers(min_value=0, max_value=bound)) for bound in (6, 3, 3))
    assume(survivors + joiners > 0)
    group_size = survivors + leavers + joiners
    instances = draw(st.lists(identifiers, unique=True, min_size=group_size, max_size=group_size))
    previous_holders = instances[: survivors + leavers]
    partitions = [(topic, partition) for topic in topics for partition in range(counts[topic])]
    holders = st.sampled_from([None, *previous_holders])
    holder_of = draw(st.lists(holders, min_size=len(partitions), max_size=len(partitions)))
    held: dict[str, defaultdict[str, list[int]]] = {holder: defaultdict(list) for holder in previous_holders}
    for (topic, partition), holder in zip(partitions, holder_of, strict=True):
        if holder is not None:
            held[holder][topic].append(partition)
    before = {holder: Assignment(dict(by_topic)) for holder, by_topic in held.items()}
    members = [
        AssignorMember(
            f"{instance}-member", instance, Subscription(tuple(topics), before.get(instance, Assignment({})).partitions)
        )
        for instance in instances[:survivors] + instances[survivors + leavers : survivors + leavers + joiners]
    ]
    return counts, members, before, set(instances[survivors : survivors + leavers])


def minimum_moves(counts, members, before, leavers):
    """What any balanced assignment must revoke: the leavers' partitions, and each member's surplus over the
    quota q = P // m, except that r = P % m members may keep one more (given to those with a surplus)."""
    quota, extra = divmod(sum(counts.values()), len(members))
    owned = [
        before[member.group_instance_id].partition_count for member in members if member.group_instance_id in before
    ]
    surplus = sum(max(0, count - quota) for count in owned)
    return (
        sum(before[leaver].partition_count for leaver in leavers)
        + surplus
        - min(extra, sum(count > quota for count in owned))
    )


@property_settings
@given(scale_changes())
def test_a_rebalance_moves_exactly_the_minimum_a_balanced_result_needs(change):
    counts, members, before, leavers = change

    after = by_identity(members, sticky.assign(members, counts))

    held = sizes(after).values()
    assert max(held) - min(held) <= 1
    assert partitions_moved(before, after) == minimum_moves(counts, members, before, leavers)


def settled_fleet(counts, size):
    members = [AssignorMember(f"m{index}", f"i{index:02}", Subscription(tuple(counts), {})) for index in range(size)]
    return by_identity(members, sticky.assign(members, counts))


def rejoin(counts, before, instances):
    members = [
        AssignorMember(
            f"m{instance}", instance, Subscription(tuple(counts), before.get(instance, Assignment({})).partitions)
        )
        for instance in instances
    ]
    return by_identity(members, sticky.assign(members, counts))


@property_settings
@given(partition_counts, st.integers(min_value=2, max_value=10), st.data())
def test_when_members_leave_a_balanced_group_only_their_partitions_move(counts, size, data):
    before = settled_fleet(counts, size)
    leaving = data.draw(st.sets(st.sampled_from(sorted(before)), min_size=1, max_size=size - 1))

    after = rejoin(counts, before, sorted(set(before) - leaving))

    assert partitions_moved(before, after) == sum(before[instance].partition_count for instance in leaving)


@property_settings
@given(partition_counts, st.integers(min_value=1, max_value=10), st.integers(min_value=1, max_value=4))
def test_when_k_members_join_a_balanced_group_they_take_at_most_their_share(counts, size, joining):
    before = settled_fleet(counts, size)
    newcomers = [f"new{index}" for index in range(joining)]

    after = rejoin(counts, before, [*before, *newcomers])

    total = sum(counts.values())
    moved = partitions_moved(before, after)
    assert moved == sum(after[newcomer].partition_count for newcomer in newcomers)  # nobody else is reshuffled
    assert moved <= joining * math.ceil(total / (size + joining))


@property_settings
@given(groups(), partition_counts)
def test_assigning_again_from_its_own_result_changes_nothing(members, counts):
    first = sticky.assign(members, counts)
    rejoined = [
        AssignorMember(
            member.member_id,
            member.group_instance_id,
            Subscription(member.subscription.topics, first[member.member_id].partitions),
        )
        for member in members
    ]

    assert sticky.assign(rejoined, counts) == first


@property_settings
@given(groups(), partition_counts)
def test_with_any_subscriptions_no_partition_could_go_to_a_subscriber_two_lighter(members, counts):
    result = sticky.assign(members, counts)
    held = sizes(result)

    topics_of = {member.member_id: set(member.subscription.topics) & counts.keys() for member in members}
    for holder, assignment in result.items():
        for topic in assignment.partitions:
            assert all(held[holder] - held[other] <= 1 for other, topics in topics_of.items() if topic in topics)
    same_subscriptions = defaultdict(list)
    for member_id, topics in topics_of.items():
        same_subscriptions[frozenset(topics)].append(held[member_id])
    assert all(max(group) - min(group) <= 1 for group in same_subscriptions.values())
