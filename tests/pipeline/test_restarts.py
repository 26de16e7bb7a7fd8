"""Restart gaps per static instance, and the rebalances static membership saved compared with dynamic members."""

from __future__ import annotations

import pytest
from pipeline_builders import event, journal, rows
from pyspark.sql import SparkSession

from berth.pipeline.restarts import dynamic_restarts, rebalances_avoided, restart_gaps

pytestmark = pytest.mark.spark


def test_a_static_replacement_contributes_its_offline_time(spark: SparkSession) -> None:
    events = journal(
        spark,
        event(
            7,
            50_000,
            "orders",
            "static_member_replaced",
            member_id="orders-0-b",
            group_instance_id="orders-0",
            old_member_id="orders-0-a",
            offline_ms=12_345,
            rebalance=False,
        ),
    )

    assert rows(restart_gaps(events)) == [
        {
            "group_id": "orders",
            "group_instance_id": "orders-0",
            "kind": "static_replacement",
            "returned_seq": 7,
            "returned_ms": 50_000,
            "gap_ms": 12_345,
        }
    ]


def test_leave_or_session_expiry_then_rejoin_of_the_same_instance_is_a_gap(spark: SparkSession) -> None:
    """An expiry's gap runs from when its member was last heard from (``offline_ms`` before the expiry) to its
    return; an expiry without ``offline_ms`` (an older journal) counts from the expiry: a lower bound."""
    events = journal(
        spark,
        event(1, 10_000, "orders", "member_left", member_id="a1", group_instance_id="orders-1", via="leave"),
        event(2, 11_000, "orders", "member_joined", member_id="b1", group_instance_id="orders-2", static=True),
        event(3, 14_000, "orders", "member_joined", member_id="a2", group_instance_id="orders-1", static=True),
        event(
            4,
            20_000,
            "orders",
            "member_expired",
            member_id="b1",
            group_instance_id="orders-2",
            phase="session",
            offline_ms=10_000,
        ),
        event(5, 20_500, "billing", "member_joined", member_id="x", group_instance_id="orders-2", static=True),
        event(6, 29_000, "orders", "member_joined", member_id="b2", group_instance_id="orders-2", static=True),
        event(7, 30_000, "orders", "member_expired", member_id="g1", group_instance_id="orders-7", phase="session"),
        event(8, 33_000, "orders", "member_joined", member_id="g2", group_instance_id="orders-7", static=True),
    )

    assert rows(restart_gaps(events), "returned_seq") == [
        {
            "group_id": "orders",
            "group_instance_id": "orders-1",
            "kind": "leave_rejoin",
            "returned_seq": 3,
            "returned_ms": 14_000,
            "gap_ms": 4_000,
        },
        {
            "group_id": "orders",
            "group_instance_id": "orders-2",
            "kind": "expiry_rejoin",
            "returned_seq": 6,
            "returned_ms": 29_000,
            "gap_ms": 19_000,
        },
        {
            "group_id": "orders",
            "group_instance_id": "orders-7",
            "kind": "expiry_rejoin",
            "returned_seq": 8,
            "returned_ms": 33_000,
            "gap_ms": 3_000,
        },
    ]


def test_scale_downs_other_expiries_dynamic_members_and_departures_without_return_are_no_gaps(
    spark: SparkSession,
) -> None:
    events = journal(
        spark,
        # an admin removal (scale-down) and a much later scale-up of the same ordinal
        event(1, 1_000, "orders", "member_left", member_id="a1", group_instance_id="orders-3", via="admin"),
        event(2, 900_000, "orders", "member_joined", member_id="a2", group_instance_id="orders-3", static=True),
        # a new member's join timing out is not a restart
        event(
            3, 2_000, "orders", "member_expired", member_id="c1", group_instance_id="orders-4", phase="new_member_join"
        ),
        event(4, 3_000, "orders", "member_joined", member_id="c2", group_instance_id="orders-4", static=True),
        # dynamic members have no identity across restarts
        event(5, 4_000, "orders", "member_left", member_id="d1", group_instance_id=None, via="leave"),
        event(6, 5_000, "orders", "member_joined", member_id="d2", group_instance_id=None, static=False),
        # left and never came back
        event(7, 6_000, "orders", "member_left", member_id="e1", group_instance_id="orders-5", via="leave"),
        # a departure followed by another departure (removed by an admin while away) pairs with nothing
        event(8, 7_000, "orders", "member_expired", member_id="f1", group_instance_id="orders-6", phase="session"),
        event(9, 7_500, "orders", "member_left", member_id="f1", group_instance_id="orders-6", via="admin"),
        event(10, 8_000, "orders", "member_joined", member_id="f2", group_instance_id="orders-6", static=True),
    )

    assert rows(restart_gaps(events)) == []


def replaced(seq: int, group: str, rebalance: bool) -> dict[str, object]:
    return event(
        seq,
        seq * 1_000,
        group,
        "static_member_replaced",
        member_id=f"m{seq}",
        group_instance_id=f"{group}-0",
        old_member_id=f"m{seq - 1}",
        offline_ms=5_000,
        rebalance=rebalance,
    )


def dynamic_restart(seq: int, group: str, *, rejoins_in_time: bool) -> list[dict[str, object]]:
    """A dynamic member leaves and a new process joins: within the departure's rebalance (one rebalance), or after
    it completed (a second one for the join)."""
    left = event(seq, seq * 1_000, group, "member_left", member_id=f"d{seq}", via="leave")
    started = event(seq + 1, seq * 1_000, group, "rebalance_started", cause="member_left")
    joined = event(seq + 2, seq * 1_000 + 300, group, "member_joined", member_id=f"d{seq}-new", static=False)
    stored = event(seq + 3, seq * 1_000 + 500, group, "assignment_stored")
    if rejoins_in_time:
        return [left, started, joined, stored]
    late = event(seq + 2, seq * 1_000 + 900, group, "member_joined", member_id=f"d{seq}-new", static=False)
    return [
        left,
        started,
        {**stored, "seq": seq + 2, "ts_ms": seq * 1_000 + 500},
        {**late, "seq": seq + 3},
        event(seq + 4, seq * 1_000 + 900, group, "rebalance_started", cause="new_member"),
        event(seq + 5, seq * 1_000 + 1_200, group, "assignment_stored"),
    ]


def test_a_dynamic_restart_costs_one_rebalance_if_the_new_process_joins_in_time_else_two(spark: SparkSession) -> None:
    events = journal(
        spark,
        *dynamic_restart(10, "billing", rejoins_in_time=True),
        *dynamic_restart(20, "billing", rejoins_in_time=False),
        # a shutdown: the last two leave, nobody comes back. Not a restart.
        event(30, 30_000, "billing", "member_left", member_id="a", via="leave"),
        event(31, 30_000, "billing", "rebalance_started", cause="member_left"),
        event(32, 30_000, "billing", "member_left", member_id="b", via="leave"),
        event(33, 30_000, "billing", "group_emptied"),
    )

    assert rows(dynamic_restarts(events)) == [
        {
            "group_id": "billing",
            "departed_seq": 10,
            "departed_ms": 10_000,
            "returned_seq": 12,
            "returned_ms": 10_300,
            "rebalances": 1,
        },
        {
            "group_id": "billing",
            "departed_seq": 20,
            "departed_ms": 20_000,
            "returned_seq": 23,
            "returned_ms": 20_900,
            "rebalances": 2,
        },
    ]


def test_static_restarts_would_have_cost_what_the_journals_dynamic_restarts_cost(spark: SparkSession) -> None:
    events = journal(
        spark,
        replaced(1, "orders", rebalance=False),
        replaced(2, "orders", rebalance=False),
        replaced(3, "orders", rebalance=True),
        replaced(4, "audit", rebalance=False),
        event(5, 5_000, "quiet", "rebalance_started", cause="new_member"),
        # measured: three dynamic restarts cost 1, 1 and 2 rebalances, 4/3 each; 3 x 4/3 = 4 for orders
        *dynamic_restart(10, "billing", rejoins_in_time=True),
        *dynamic_restart(20, "billing", rejoins_in_time=True),
        *dynamic_restart(30, "billing", rejoins_in_time=False),
    )

    assert rows(rebalances_avoided(events)) == [
        {
            "group_id": "audit",
            "static_restarts": 1,
            "restarts_without_rebalance": 1,
            "restarts_with_rebalance": 0,
            "dynamic_restarts": 0,
            "dynamic_restart_rebalances": 0,
            "rebalances_if_dynamic": 1,  # 4/3 rounded
            "rebalances_avoided": 1,
        },
        {
            "group_id": "billing",
            "static_restarts": 0,
            "restarts_without_rebalance": 0,
            "restarts_with_rebalance": 0,
            "dynamic_restarts": 3,
            "dynamic_restart_rebalances": 4,
            "rebalances_if_dynamic": 0,
            "rebalances_avoided": 0,
        },
        {
            "group_id": "orders",
            "static_restarts": 3,
            "restarts_without_rebalance": 2,
            "restarts_with_rebalance": 1,
            "dynamic_restarts": 0,
            "dynamic_restart_rebalances": 0,
            "rebalances_if_dynamic": 4,
            "rebalances_avoided": 3,
        },
    ]


def test_without_a_measured_dynamic_restart_each_counts_as_the_one_rebalance_it_surely_costs(
    spark: SparkSession,
) -> None:
    events = journal(spark, replaced(1, "orders", rebalance=False), replaced(2, "orders", rebalance=False))

    (orders,) = rows(rebalances_avoided(events))

    assert (orders["rebalances_if_dynamic"], orders["rebalances_avoided"]) == (2, 2)
