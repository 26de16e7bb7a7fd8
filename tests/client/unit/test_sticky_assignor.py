"""The sticky assignor keeps what members own, validates their claims, and moves only what balance needs."""

from __future__ import annotations

import pytest
from assignor_scenarios import by_identity, fleet, ordinals, partitions_moved, sizes, static

from berth.coordinator.client.assignors import RangeAssignor, RoundRobinAssignor, StickyAssignor
from berth.coordinator.client.encoding import Assignment

sticky = StickyAssignor()


def rescale(assignor, from_count, to_count, counts):
    """A StatefulSet fleet settled at ``from_count`` pods, rebalanced at ``to_count``: partitions moved."""
    settled = fleet(ordinals(from_count))
    before = by_identity(settled, assignor.assign(settled, counts))
    rescaled = fleet(ordinals(to_count), owned_by_instance=before)
    return partitions_moved(before, by_identity(rescaled, assignor.assign(rescaled, counts)))


def test_a_balanced_group_keeps_exactly_what_it_owns():
    members = [
        static("m1", "orders-0", owned={"orders": (7, 8, 0)}),
        static("m2", "orders-1", owned={"orders": (1, 2, 3)}),
        static("m3", "orders-2", owned={"orders": (4, 5, 6)}),
    ]

    assert sticky.assign(members, {"orders": 9}) == {
        "m1": Assignment({"orders": (0, 7, 8)}),
        "m2": Assignment({"orders": (1, 2, 3)}),
        "m3": Assignment({"orders": (4, 5, 6)}),
    }


def test_a_partition_claimed_twice_goes_to_the_first_claimant_in_kip345_order():
    # orders-1 missed a rebalance and still claims partition 0, which orders-0 now holds.
    members = [
        static("late", "orders-1", owned={"orders": (0, 1)}),
        static("current", "orders-0", owned={"orders": (0, 2)}),
    ]

    assert sticky.assign(members, {"orders": 4}) == {
        "current": Assignment({"orders": (0, 2)}),
        "late": Assignment({"orders": (1, 3)}),
    }


def test_claims_on_unsubscribed_unknown_or_missing_partitions_are_dropped():
    member = static(
        "m1",
        "orders-0",
        topics=("orders",),
        owned={"orders": (1, 9), "payments": (0,), "deleted-topic": (0,)},
    )
    other = static("m2", "orders-1", topics=("orders", "payments"))

    assert sticky.assign([member, other], {"orders": 2, "payments": 2}) == {
        "m1": Assignment({"orders": (0, 1)}),
        "m2": Assignment({"payments": (0, 1)}),
    }


def test_an_overloaded_member_gives_up_only_its_surplus():
    members = [static("m1", "orders-0", owned={"orders": tuple(range(8))}), static("m2", "orders-1")]

    result = sticky.assign(members, {"orders": 8})

    assert result["m1"] == Assignment({"orders": (0, 1, 2, 3)})
    assert result["m2"] == Assignment({"orders": (4, 5, 6, 7)})


def test_with_different_subscriptions_partitions_flow_to_whoever_can_take_them():
    # Only m2 can take payments, so m2 keeps them and takes one order from m1 to even out 9 partitions as 5 and 4.
    members = [
        static("m1", "orders-0", topics=("orders",), owned={"orders": tuple(range(6))}),
        static("m2", "orders-1", topics=("orders", "payments"), owned={"payments": (0, 1, 2)}),
    ]

    result = sticky.assign(members, {"orders": 6, "payments": 3})

    assert sizes(result) == {"m1": 5, "m2": 4}
    assert result["m2"].partitions["payments"] == (0, 1, 2)


def test_partitions_with_few_possible_holders_are_placed_first_so_kept_ones_stay():
    # Only the first two can take payments-0. Placed after orders-1, it would land on orders-0 (then the
    # most loaded) and orders-0 would have to give up the orders-0 partition it kept to even things out.
    members = [
        static("m0", "orders-0", topics=("orders", "payments"), owned={"orders": (0,)}),
        static("m1", "orders-1", topics=("orders", "payments")),
        static("m2", "orders-2", topics=("orders",)),
    ]

    assert sticky.assign(members, {"orders": 2, "payments": 1}) == {
        "m0": Assignment({"orders": (0,)}),
        "m1": Assignment({"payments": (0,)}),
        "m2": Assignment({"orders": (1,)}),
    }


def test_a_member_evening_out_gives_a_partition_it_was_just_handed_before_one_it_kept():
    # orders-2 can take only orders-0, so orders-1 must hand it over and then needs payments. orders-0 kept
    # payments-3 and was handed 0 and 2 this round: it gives 2 (costs nothing), not 3 (its highest, but kept).
    members = [
        static("m0", "orders-0", topics=("orders", "payments"), owned={"payments": (3,)}),
        static("m1", "orders-1", topics=("orders", "payments"), owned={"orders": (0,)}),
        static("m2", "orders-2", topics=("orders",)),
    ]

    assert sticky.assign(members, {"orders": 1, "payments": 4}) == {
        "m0": Assignment({"payments": (0, 3)}),
        "m1": Assignment({"payments": (1, 2)}),
        "m2": Assignment({"orders": (0,)}),
    }


@pytest.mark.parametrize(
    ("from_count", "to_count", "moved"),
    [
        pytest.param(3, 2, 20, id="one of 3 leaves: its 20"),
        pytest.param(3, 4, 15, id="one joins 3: takes 15"),
        pytest.param(4, 3, 15, id="one of 4 leaves: its 15"),
        pytest.param(5, 4, 12, id="one of 5 leaves: its 12"),
        pytest.param(6, 4, 20, id="two of 6 leave: their 20"),
        pytest.param(4, 6, 20, id="two join 4: take 10 each"),
        pytest.param(10, 5, 30, id="half of 10 leave: their 30"),
        pytest.param(5, 10, 30, id="5 join 5: take 6 each"),
        pytest.param(11, 10, 6, id="one of 11 leaves: its 6"),
        pytest.param(10, 11, 5, id="one joins 10: takes 5"),
    ],
)
def test_stickiness_figures_for_60_partitions(from_count, to_count, moved):
    counts = {"orders": 60}

    assert rescale(sticky, from_count, to_count, counts) == moved
    assert moved <= rescale(RangeAssignor(), from_count, to_count, counts)
    assert moved <= rescale(RoundRobinAssignor(), from_count, to_count, counts)


def test_the_whole_fleet_restarting_at_once_keeps_every_partition_in_place():
    settled = fleet(ordinals(5))
    before = by_identity(settled, sticky.assign(settled, {"orders": 60}))
    restarted = [static(f"new-{member.member_id}", member.group_instance_id) for member in reversed(settled)]

    assert by_identity(restarted, sticky.assign(restarted, {"orders": 60})) == before
