"""The per-group summary: every transform's totals side by side, zeros for counts a group has nothing for."""

from __future__ import annotations

import pytest
from pipeline_builders import event, journal, rows
from pyspark.sql import SparkSession

from berth.pipeline.advice import restart_gap_stats
from berth.pipeline.report_data import gap_histogram
from berth.pipeline.summary import group_summary

pytestmark = pytest.mark.spark


def test_one_row_per_group_joins_the_transforms_outputs(spark: SparkSession) -> None:
    events = journal(
        spark,
        event(1, 1_000, "orders", "rebalance_started", cause="new_member"),
        event(2, 2_000, "orders", "assignment_stored", assignments=[]),
        event(3, 9_000, "orders", "rebalance_started", cause="member_left"),
        event(4, 5_000, "idle", "group_created"),
    )
    by_cause = spark.createDataFrame(
        [("orders", "new_member", 1), ("orders", "member_left", 1)], "group_id string, cause string, rebalances long"
    )
    avoided = spark.createDataFrame(
        [("orders", 3, 2, 1, 0, 0, 6, 5)],
        "group_id string, static_restarts long, restarts_without_rebalance long, restarts_with_rebalance long, "
        "dynamic_restarts long, dynamic_restart_rebalances long, rebalances_if_dynamic long, rebalances_avoided long",
    )
    gaps = spark.createDataFrame(
        [("orders", 4_000), ("orders", 9_000), ("orders", 5_000)], "group_id string, gap_ms long"
    )
    gap_stats = restart_gap_stats(gaps, percentile=0.99)
    advice = spark.createDataFrame(
        [("orders", 16_500, 9_000, False)],
        "group_id string, advised_session_timeout_ms long, restart_gap_p_ms long, confident boolean",
    )
    durations = spark.createDataFrame([("orders", 1_000), ("orders", None)], "group_id string, duration_ms long")
    moved = spark.createDataFrame(
        [("orders", 2, 3, 1)], "group_id string, seq long, partitions_moved long, unknown_assignments long"
    )

    summary = group_summary(events, by_cause, avoided, gap_stats, advice, durations, moved)

    assert rows(summary, "group_id") == [
        {
            "group_id": "idle",
            "events": 1,
            "first_ts_ms": 5_000,
            "last_ts_ms": 5_000,
            "rebalances_by_cause": {},
            "rebalances": 0,
            "static_restarts": 0,
            "restarts_without_rebalance": 0,
            "dynamic_restarts": 0,
            "dynamic_restart_rebalances": 0,
            "rebalances_if_dynamic": 0,
            "rebalances_avoided": 0,
            "restart_gap_samples": 0,
            "rebalancing_ms": 0,
            "assignments": 0,
            "partitions_moved": 0,
            "unknown_assignments": 0,
            "restart_gap_p50_ms": None,
            "restart_gap_p_ms": None,
            "restart_gap_max_ms": None,
            "longest_rebalance_ms": None,
            "advised_session_timeout_ms": None,
            "advice_confident": None,
        },
        {
            "group_id": "orders",
            "events": 3,
            "first_ts_ms": 1_000,
            "last_ts_ms": 9_000,
            "rebalances_by_cause": {"member_left": 1, "new_member": 1},
            "rebalances": 2,
            "static_restarts": 3,
            "restarts_without_rebalance": 2,
            "dynamic_restarts": 0,
            "dynamic_restart_rebalances": 0,
            "rebalances_if_dynamic": 6,
            "rebalances_avoided": 5,
            "restart_gap_samples": 3,
            "rebalancing_ms": 1_000,  # the open rebalance has no duration yet
            "assignments": 1,
            "partitions_moved": 3,
            "unknown_assignments": 1,
            "restart_gap_p50_ms": 5_000,
            "restart_gap_p_ms": 9_000,
            "restart_gap_max_ms": 9_000,
            "longest_rebalance_ms": 1_000,
            "advised_session_timeout_ms": 16_500,
            "advice_confident": False,
        },
    ]


def test_restart_gaps_are_binned_ten_to_a_decade_for_the_report(spark: SparkSession) -> None:
    gaps = spark.createDataFrame(
        [("orders", 0), ("orders", 1_000), ("orders", 1_200), ("orders", 1_300), ("orders", 10_000)],
        "group_id string, gap_ms long",
    )

    binned = [(r["low_ms"], r["high_ms"], r["restarts"]) for r in rows(gap_histogram(gaps), "low_ms")]

    assert binned == [
        (1.0, pytest.approx(1.2589254), 1),  # under a millisecond counts as one
        (1_000.0, pytest.approx(1_258.9254), 2),
        (pytest.approx(1_258.9254), pytest.approx(1_584.8932), 1),
        (10_000.0, pytest.approx(12_589.254), 1),
    ]
