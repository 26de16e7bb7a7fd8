"""The per-group summary table (``summary.parquet``): one row per group joining every transform's totals.

Owns the summary's columns. Rules: one row per group that has at least one event; a count a group has nothing
for is 0, a statistic it has no sample for is null (no advice without restart gaps). Inputs are the outputs of the
other transforms, so nothing is computed twice.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from berth.pipeline.schema import REBALANCE_STARTED

SUMMARY_COUNTS = (
    "rebalances",
    "static_restarts",
    "restarts_without_rebalance",
    "dynamic_restarts",
    "dynamic_restart_rebalances",
    "rebalances_if_dynamic",
    "rebalances_avoided",
    "restart_gap_samples",
    "rebalancing_ms",
    "assignments",
    "partitions_moved",
    "unknown_assignments",
)


def group_summary(
    events: DataFrame,
    by_cause: DataFrame,
    avoided: DataFrame,
    gap_stats: DataFrame,
    advice: DataFrame,
    durations: DataFrame,
    moved: DataFrame,
) -> DataFrame:
    """The transforms' outputs -> one summary row per group (columns: see the select below).

    Each input is reduced to one row per group on its own, those rows are stacked (every input's columns, the
    others null) and one small aggregation takes each column from the row that has it. Reducing first keeps the
    percentile and the cause map (sort-based aggregations) off the millions of event rows.
    """
    per_input = [
        events.groupBy("group_id").agg(
            F.count(F.lit(1)).alias("events"),
            F.min("ts_ms").alias("first_ts_ms"),
            F.max("ts_ms").alias("last_ts_ms"),
            F.count(F.when(F.col("type") == REBALANCE_STARTED, True)).alias("rebalances"),
        ),
        by_cause.groupBy("group_id").agg(
            F.map_from_entries(F.sort_array(F.collect_list(F.struct("cause", "rebalances")))).alias(
                "rebalances_by_cause"
            )
        ),
        avoided.select(
            "group_id",
            "static_restarts",
            "restarts_without_rebalance",
            "dynamic_restarts",
            "dynamic_restart_rebalances",
            "rebalances_if_dynamic",
            "rebalances_avoided",
        ),
        gap_stats.select(
            "group_id",
            F.col("samples").alias("restart_gap_samples"),
            "restart_gap_p50_ms",
            "restart_gap_max_ms",
        ),
        durations.groupBy("group_id").agg(
            F.sum("duration_ms").alias("rebalancing_ms"), F.max("duration_ms").alias("longest_rebalance_ms")
        ),
        moved.groupBy("group_id").agg(
            F.count(F.lit(1)).alias("assignments"),
            F.sum("partitions_moved").alias("partitions_moved"),
            F.sum("unknown_assignments").alias("unknown_assignments"),
        ),
        advice.select(
            "group_id", "restart_gap_p_ms", "advised_session_timeout_ms", F.col("confident").alias("advice_confident")
        ),
    ]
    stacked = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), per_input)
    per_group = stacked.groupBy("group_id").agg(
        *(F.first(name, ignorenulls=True).alias(name) for name in stacked.columns if name != "group_id")
    )
    # Only groups with events: every other input derives from events, so this drops nothing real.
    return per_group.where(F.col("events").isNotNull()).select(
        "group_id",
        "events",
        "first_ts_ms",
        "last_ts_ms",
        F.coalesce("rebalances_by_cause", F.create_map().cast("map<string,bigint>")).alias("rebalances_by_cause"),
        *(F.coalesce(F.col(name).cast("long"), F.lit(0).cast("long")).alias(name) for name in SUMMARY_COUNTS),
        "restart_gap_p50_ms",
        "restart_gap_p_ms",
        "restart_gap_max_ms",
        "longest_rebalance_ms",
        "advised_session_timeout_ms",
        "advice_confident",
    )
