"""Rebalances: counted per cause and per UTC hour, and timed from start to whatever ended them."""

from __future__ import annotations

import pytest
from pipeline_builders import event, journal, rows
from pyspark.sql import SparkSession

from berth.pipeline.rebalances import rebalance_durations, rebalances_by_cause

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000


def test_rebalances_are_counted_per_group_and_cause(spark: SparkSession) -> None:
    events = journal(
        spark,
        event(1, T0, "orders", "rebalance_started", cause="new_member"),
        event(2, T0 + 10, "orders", "member_joined", member_id="m1", static=True),
        event(3, T0 + 20, "orders", "rebalance_started", cause="new_member"),
        event(4, T0 + 30, "orders", "rebalance_started", cause="member_expired"),
        event(5, T0 + 40, "billing", "rebalance_started", cause="member_left"),
        event(6, T0 + 50, "billing", "rebalance_started"),  # no cause at all: counted as "unknown"
    )

    assert rows(rebalances_by_cause(events)) == [
        {"group_id": "billing", "cause": "member_left", "rebalances": 1},
        {"group_id": "billing", "cause": "unknown", "rebalances": 1},
        {"group_id": "orders", "cause": "member_expired", "rebalances": 1},
        {"group_id": "orders", "cause": "new_member", "rebalances": 2},
    ]


def test_a_rebalance_lasts_until_its_assignment_or_whatever_ends_it_first(spark: SparkSession) -> None:
    events = journal(
        spark,
        # completed: started -> assignment stored
        event(1, 1_000, "orders", "rebalance_started", cause="new_member"),
        event(2, 1_200, "orders", "rebalance_completed", members=[]),
        event(3, 1_230, "billing", "assignment_stored", assignments=[]),  # another group's: not the end
        event(4, 1_250, "orders", "assignment_stored", assignments=[]),
        # superseded by another start, which then completes
        event(5, 5_000, "orders", "rebalance_started", cause="member_left"),
        event(6, 5_400, "orders", "rebalance_started", cause="member_expired"),
        event(7, 6_000, "orders", "assignment_stored", assignments=[]),
        # the group emptied before anyone synced
        event(8, 9_000, "orders", "rebalance_started", cause="member_left"),
        event(9, 9_100, "orders", "group_emptied"),
        # still open when the journal ends
        event(10, 9_500, "billing", "rebalance_started", cause="new_member"),
    )

    assert rows(rebalance_durations(events), "seq") == [
        {
            "group_id": "orders",
            "seq": 1,
            "started_ms": 1_000,
            "cause": "new_member",
            "ended_by": "assignment_stored",
            "ended_ms": 1_250,
            "duration_ms": 250,
        },
        {
            "group_id": "orders",
            "seq": 5,
            "started_ms": 5_000,
            "cause": "member_left",
            "ended_by": "rebalance_started",
            "ended_ms": 5_400,
            "duration_ms": 400,
        },
        {
            "group_id": "orders",
            "seq": 6,
            "started_ms": 5_400,
            "cause": "member_expired",
            "ended_by": "assignment_stored",
            "ended_ms": 6_000,
            "duration_ms": 600,
        },
        {
            "group_id": "orders",
            "seq": 8,
            "started_ms": 9_000,
            "cause": "member_left",
            "ended_by": "group_emptied",
            "ended_ms": 9_100,
            "duration_ms": 100,
        },
        {
            "group_id": "billing",
            "seq": 10,
            "started_ms": 9_500,
            "cause": "new_member",
            "ended_by": None,
            "ended_ms": None,
            "duration_ms": None,
        },
    ]
