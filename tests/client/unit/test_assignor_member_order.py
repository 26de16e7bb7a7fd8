"""KIP-345's example: with group.instance.id as the first sort key, a restarted static member keeps its partitions."""

from __future__ import annotations

import pytest
from assignor_scenarios import by_identity, dynamic, static

from berth.coordinator.client.assignors import (
    ASSIGNORS,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_by_name,
    order_members,
)
from berth.coordinator.client.encoding import Assignment

NINE_PARTITIONS = {"orders": 9}


@pytest.mark.parametrize("assignor", ASSIGNORS.values(), ids=ASSIGNORS.keys())
def test_a_restarted_static_member_gets_the_same_partitions_back(assignor):
    # Members A=1, B=2, C=3; then A restarts and the coordinator hands it member id 4 (KIP-345's example).
    before = [static("1", "A"), static("2", "B"), static("3", "C")]
    first = by_identity(before, assignor.assign(before, NINE_PARTITIONS))

    # A restarted process owns nothing yet; its old partitions are unowned, so even the sticky assignor must
    # find them through the order, not through ownership.
    after = [static("2", "B", owned=dict(first["B"].partitions)), static("3", "C", owned=dict(first["C"].partitions))]
    after.append(static("4", "A"))
    second = by_identity(after, assignor.assign(after, NINE_PARTITIONS))

    assert second == first


def test_range_gives_the_kip_example_ranges_by_instance_id_whatever_the_member_ids():
    members = [static("4", "A"), static("2", "B"), static("3", "C")]

    assert by_identity(members, RangeAssignor().assign(members, NINE_PARTITIONS)) == {
        "A": Assignment({"orders": (0, 1, 2)}),
        "B": Assignment({"orders": (3, 4, 5)}),
        "C": Assignment({"orders": (6, 7, 8)}),
    }


def test_without_instance_ids_the_same_restart_reshuffles_everything():
    # Why KIP-345 sorts by instance id: dynamic members sort by member id, so "4" now comes last.
    members = [dynamic("4"), dynamic("2"), dynamic("3")]

    assert RangeAssignor().assign(members, NINE_PARTITIONS) == {
        "2": Assignment({"orders": (0, 1, 2)}),
        "3": Assignment({"orders": (3, 4, 5)}),
        "4": Assignment({"orders": (6, 7, 8)}),
    }


def test_static_members_come_first_by_instance_id_then_dynamic_ones_by_member_id():
    members = [dynamic("a"), static("z", "orders-1"), dynamic("0"), static("b", "orders-0")]

    assert [member.member_id for member in order_members(members)] == ["b", "z", "0", "a"]


def test_a_member_id_given_twice_is_a_caller_bug():
    with pytest.raises(ValueError, match="twice"):
        order_members([dynamic("a"), dynamic("a")])


def test_a_negative_partition_count_is_a_caller_bug():
    with pytest.raises(ValueError, match="negative"):
        StickyAssignor().assign([dynamic("a")], {"orders": -1})


def test_assignors_are_found_by_the_protocol_name_members_send():
    assert isinstance(assignor_by_name("range"), RangeAssignor)
    assert isinstance(assignor_by_name("roundrobin"), RoundRobinAssignor)
    assert isinstance(assignor_by_name("sticky"), StickyAssignor)


def test_an_unknown_protocol_name_says_which_ones_exist():
    with pytest.raises(ValueError, match="range, roundrobin, sticky"):
        assignor_by_name("cooperative-sticky")
