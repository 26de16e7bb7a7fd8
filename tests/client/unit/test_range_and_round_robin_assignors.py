"""Range and round-robin give Kafka's results (the examples of Kafka's assignor javadoc), in KIP-345 order."""

from __future__ import annotations

from assignor_scenarios import dynamic, static

from berth.coordinator.client.assignors import RangeAssignor, RoundRobinAssignor
from berth.coordinator.client.encoding import Assignment

TWO_TOPICS = {"t0": 3, "t1": 3}


def test_range_gives_each_topic_in_contiguous_ranges_the_first_members_one_extra():
    members = [dynamic("C0", ("t0", "t1")), dynamic("C1", ("t0", "t1"))]

    assert RangeAssignor().assign(members, TWO_TOPICS) == {
        "C0": Assignment({"t0": (0, 1), "t1": (0, 1)}),
        "C1": Assignment({"t0": (2,), "t1": (2,)}),
    }


def test_range_shares_a_topic_only_among_its_subscribers():
    members = [static("m1", "orders-0", ("t0",)), static("m2", "orders-1", ("t0", "t1")), dynamic("d", ("t1",))]

    assert RangeAssignor().assign(members, {"t0": 5, "t1": 2}) == {
        "m1": Assignment({"t0": (0, 1, 2)}),
        "m2": Assignment({"t0": (3, 4), "t1": (0,)}),
        "d": Assignment({"t1": (1,)}),
    }


def test_round_robin_deals_all_partitions_in_turn():
    members = [dynamic("C0", ("t0", "t1")), dynamic("C1", ("t0", "t1"))]

    assert RoundRobinAssignor().assign(members, TWO_TOPICS) == {
        "C0": Assignment({"t0": (0, 2), "t1": (1,)}),
        "C1": Assignment({"t0": (1,), "t1": (0, 2)}),
    }


def test_round_robin_skips_members_not_subscribed_to_the_topic():
    # Kafka's javadoc example with heterogeneous subscriptions.
    members = [dynamic("C0", ("t0",)), dynamic("C1", ("t0", "t1")), dynamic("C2", ("t0", "t1", "t2"))]

    assert RoundRobinAssignor().assign(members, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": Assignment({"t0": (0,)}),
        "C1": Assignment({"t1": (0,)}),
        "C2": Assignment({"t1": (1,), "t2": (0, 1, 2)}),
    }


def test_topics_nobody_subscribes_to_and_unknown_topics_are_left_out():
    members = [dynamic("a", ("orders", "not-created-yet")), dynamic("b", ())]

    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        assert assignor.assign(members, {"orders": 2, "audit": 4}) == {
            "a": Assignment({"orders": (0, 1)}),
            "b": Assignment({}),
        }


def test_owned_partitions_do_not_matter_to_range_or_round_robin():
    fresh = [dynamic("a"), dynamic("b")]
    claiming = [dynamic("a", owned={"orders": (3,)}), dynamic("b", owned={"orders": (0,)})]

    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        assert assignor.assign(claiming, {"orders": 4}) == assignor.assign(fresh, {"orders": 4})


def test_an_empty_group_gets_an_empty_result():
    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        assert assignor.assign([], {"orders": 4}) == {}
