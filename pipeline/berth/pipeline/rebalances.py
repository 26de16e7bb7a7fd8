"""Rebalances: how many, why, when, and how long each one kept the group from consuming.

Owns the transforms over ``rebalance_started`` and the events that end a rebalance. Rules (docs/formats.md):
a rebalance begins with ``rebalance_started`` and ends at the group's next ``assignment_stored``, or earlier when
another ``rebalance_started`` supersedes it or the group empties or is deleted. ``ended_by`` names the event type
that ended it; null means still open when the journal ends. Events are ordered by ``seq``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from berth.pipeline.schema import (
    ASSIGNMENT_STORED,
    GROUP_DELETED,
    GROUP_EMPTIED,
    REBALANCE_STARTED,
)

UNKNOWN_CAUSE = "unknown"
_ENDS_OR_STARTS_A_REBALANCE = (REBALANCE_STARTED, ASSIGNMENT_STORED, GROUP_EMPTIED, GROUP_DELETED)


def rebalances_by_cause(events: DataFrame) -> DataFrame:
    """Journal events -> ``group_id, cause, rebalances``: one row per group and cause seen."""
    return _started(events).groupBy("group_id", "cause").agg(F.count(F.lit(1)).alias("rebalances"))


def _started(events: DataFrame) -> DataFrame:
    """The ``rebalance_started`` events, a missing cause named ``unknown`` (it keys maps and chart legends)."""
    return events.where(F.col("type") == REBALANCE_STARTED).withColumn(
        "cause", F.coalesce(F.col("cause"), F.lit(UNKNOWN_CAUSE))
    )


def rebalance_durations(events: DataFrame) -> DataFrame:
    """Journal events -> ``group_id, seq, started_ms, cause, ended_by, ended_ms, duration_ms``, one row per start.

    ``duration_ms`` runs to whatever ended the rebalance (module rules): summed over a group it is the time the
    group spent rebalancing, superseded restarts included, without counting any stretch twice.
    """
    in_group_order = Window.partitionBy("group_id").orderBy("seq")
    boundaries = events.where(F.col("type").isin(*_ENDS_OR_STARTS_A_REBALANCE)).select(
        "group_id",
        "seq",
        "ts_ms",
        "type",
        "cause",
        F.lead("type").over(in_group_order).alias("next_type"),
        F.lead("ts_ms").over(in_group_order).alias("next_ts_ms"),
    )
    return boundaries.where(F.col("type") == REBALANCE_STARTED).select(
        "group_id",
        "seq",
        F.col("ts_ms").alias("started_ms"),
        "cause",
        F.col("next_type").alias("ended_by"),
        F.col("next_ts_ms").alias("ended_ms"),
        (F.col("next_ts_ms") - F.col("ts_ms")).alias("duration_ms"),
    )
