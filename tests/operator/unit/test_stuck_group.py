"""``planners.stuck_group``: a group is stuck when partitions have no owner, or Ready pods own none while a member
owns several, for longer than the threshold; a fleet larger than its partition count is not stuck; a situation that
clears starts its clock again; the clock survives in status (a restarted operator goes on counting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from berth.operator.planners.observations import GroupDescription, GroupMember
from berth.operator.planners.stuck_group import judge, membership, subscribed_topics

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
THRESHOLD = timedelta(seconds=60)
SIX = [f"orders:{n}" for n in range(6)]


def group(**assigned: list[int]) -> GroupDescription:
    members = tuple(
        GroupMember(f"m-{name}", name.replace("_", "-"), assignment=tuple(f"orders:{p}" for p in partitions))
        for name, partitions in assigned.items()
    )
    return GroupDescription("orders", "Stable", 3, None, members)


def test_partitions_without_an_owner_make_the_group_stuck_once_the_threshold_passes() -> None:
    described = group(orders_0=[0, 1], orders_1=[2, 3])  # 4 and 5: nobody's
    first = judge(described, SIX, {"orders-0", "orders-1"}, None, now=T0, threshold=THRESHOLD)
    assert first.unowned == ("orders:4", "orders:5") and not first.stuck
    assert first.condition.status == "False" and first.again_at == T0 + THRESHOLD
    assert first.status is not None and first.status["unownedSince"] == "2026-11-28T12:00:00Z"

    later = judge(described, SIX, {"orders-0", "orders-1"}, first.status, now=T0 + THRESHOLD, threshold=THRESHOLD)
    assert later.stuck and later.again_at is None
    assert (later.condition.status, later.condition.reason) == ("True", "PartitionsUnowned")
    assert "orders:4, orders:5" in later.condition.message and "?" not in later.condition.message


def test_ready_pods_owning_nothing_while_another_owns_several_is_stuck() -> None:
    described = group(orders_0=[0, 1, 2, 3, 4, 5])
    ready = {"orders-0", "orders-1", "orders-2"}
    first = judge(described, SIX, ready, None, now=T0, threshold=THRESHOLD)
    assert first.idle == ("orders-1", "orders-2") and first.busiest == 6 and not first.stuck
    later = judge(described, SIX, ready, first.status, now=T0 + timedelta(seconds=61), threshold=THRESHOLD)
    assert later.stuck and later.condition.reason == "ReadyPodsIdle"
    assert "orders-1, orders-2" in later.condition.message and "owns 6" in later.condition.message


def test_a_fleet_larger_than_its_partition_count_is_not_stuck() -> None:
    described = group(**{f"orders_{n}": [n] for n in range(6)}, orders_6=[], orders_7=[])
    ready = {f"orders-{n}" for n in range(8)}
    for seconds in (0, 600, 3600):
        verdict = judge(described, SIX, ready, None, now=T0 + timedelta(seconds=seconds), threshold=THRESHOLD)
        assert (verdict.unowned, verdict.idle, verdict.stuck) == ((), (), False)
        assert verdict.condition.reason == "PartitionsOwned" and verdict.status is None


def test_a_situation_that_clears_starts_its_clock_again() -> None:
    stuck_at = judge(group(orders_0=[0, 1, 2, 3]), SIX, {"orders-0"}, None, now=T0, threshold=THRESHOLD)
    cleared = judge(
        group(orders_0=[0, 1, 2], orders_1=[3, 4, 5]), SIX, set(), stuck_at.status, now=T0, threshold=THRESHOLD
    )
    assert cleared.status is None and not cleared.stuck
    again = judge(
        group(orders_0=[0, 1, 2, 3]), SIX, {"orders-0"}, cleared.status, now=T0 + THRESHOLD, threshold=THRESHOLD
    )
    assert not again.stuck and again.status is not None and again.status["unownedSince"] == "2026-11-28T12:01:00Z"


def test_a_group_without_members_is_unknown_unless_partitions_are_known() -> None:
    empty = GroupDescription("orders", "Empty", 3, None, ())
    assert judge(empty, (), set(), None, now=T0, threshold=THRESHOLD).condition.status == "Unknown"
    # Every consumer gone (stopped polling, dropped), its pods Ready, and the partitions known: nobody owns them.
    verdict = judge(empty, SIX, {"orders-0"}, {"unownedSince": "2026-11-28T11:00:00Z"}, now=T0, threshold=THRESHOLD)
    assert verdict.stuck and verdict.unowned == tuple(SIX)


def test_a_fleet_with_no_member_and_no_ready_pod_is_not_stuck_for_its_committed_partitions() -> None:
    """Scaled to zero (or no pod up yet): nobody is there to own the committed partitions; other conditions say
    why, and ``GroupStuck`` is Unknown rather than True."""
    empty = GroupDescription("orders", "Empty", 3, None, ())
    before = {"unownedSince": "2026-11-28T11:00:00Z"}
    verdict = judge(empty, SIX, set(), before, now=T0, threshold=THRESHOLD)
    assert (verdict.unowned, verdict.stuck, verdict.status) == ((), False, None)
    assert (verdict.condition.status, verdict.condition.reason) == ("Unknown", "NoAssignment")


def test_the_group_s_topics_are_those_its_members_subscribe_to() -> None:
    members = (
        GroupMember("m-0", "orders-0", assignment=("orders:0",), subscribed=("orders",)),
        GroupMember("m-1", "orders-1", subscribed=("orders", "audit")),
        GroupMember("m-2", "orders-2"),  # a subscription the coordinator does not show
    )
    assert subscribed_topics(GroupDescription("orders", "Stable", 3, None, members)) == {"orders", "audit"}
    unknown = (GroupMember("m-0", "orders-0", assignment=("orders:0",)),)
    assert subscribed_topics(GroupDescription("orders", "PreparingRebalance", 4, None, unknown)) is None


def test_the_committed_partitions_are_read_again_whenever_a_partition_could_have_lost_its_owner() -> None:
    """A member that expires starts a rebalance at the same generation: its partitions lose their owner then, so the
    state and the members count as much as the generation; a pass that sees the same group reads nothing again."""
    stable = group(orders_0=[0, 1, 2], orders_1=[3, 4, 5])
    assert membership(stable) == membership(group(orders_0=[0, 1, 2], orders_1=[3, 4, 5]))
    expired = GroupDescription("orders", "PreparingRebalance", 3, None, stable.members[:1])
    assert membership(expired) != membership(stable)  # same generation, another state and fewer members
    assert membership(GroupDescription("orders", "Stable", 3, None, stable.members[:1])) != membership(stable)
    assert membership(GroupDescription("orders", "Stable", 4, None, stable.members)) != membership(stable)
