"""Restart gaps per static instance, and the rebalances static membership saved compared with dynamic members."""

from __future__ import annotations

import pytest
from pipeline_builders import event, journal, rows
from pyspark.sql import SparkSession

from berth.pipeline.restarts import rebalances_avoided, restart_gaps

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
    events = journal(
        spark,
        event(1, 10_000, "orders", "member_left", member_id="a1", group_instance_id="orders-1", via="leave"),
        event(2, 11_000, "orders", "member_joined", member_id="b1", group_instance_id="orders-2", static=True),
        event(3, 14_000, "orders", "member_joined", member_id="a2", group_instance_id="orders-1", static=True),
        event(4, 20_000, "orders", "member_expired", member_id="b1", group_instance_id="orders-2", phase="session"),
        event(5, 20_500, "billing", "member_joined", member_id="x", group_instance_id="orders-2", static=True),
        event(6, 29_000, "orders", "member_joined", member_id="b2", group_instance_id="orders-2", static=True),
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
            "gap_ms": 9_000,
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


def test_each_static_restart_would_have_cost_two_rebalances_as_a_dynamic_member(spark: SparkSession) -> None:
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

    events = journal(
        spark,
        replaced(1, "orders", rebalance=False),
        replaced(2, "orders", rebalance=False),
        replaced(3, "orders", rebalance=True),
        replaced(4, "billing", rebalance=False),
        event(5, 5_000, "quiet", "rebalance_started", cause="new_member"),
    )

    assert rows(rebalances_avoided(events)) == [
        {
            "group_id": "billing",
            "static_restarts": 1,
            "restarts_without_rebalance": 1,
            "restarts_with_rebalance": 0,
            "rebalances_if_dynamic": 2,
            "rebalances_avoided": 2,
        },
        {
            "group_id": "orders",
            "static_restarts": 3,
            "restarts_without_rebalance": 2,
            "restarts_with_rebalance": 1,
            "rebalances_if_dynamic": 6,
            "rebalances_avoided": 5,
        },
    ]
