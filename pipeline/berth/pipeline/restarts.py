"""Restarts of static members: how long each instance was away, and the rebalances static membership saved.

Owns the restart-gap and rebalances-avoided transforms. Rules:
- A restart gap is measured per ``group_instance_id`` (dynamic members have no identity across restarts):
  ``static_replacement``: the ``offline_ms`` of a ``static_member_replaced`` (time since the old member was last
  heard from: the whole outage);
  ``leave_rejoin``: a ``member_left`` with ``via=leave`` followed, next for that instance, by its ``member_joined``;
  ``expiry_rejoin``: a ``member_expired`` with ``phase=session`` followed by its ``member_joined``. This gap starts
  when the session ran out, so it understates the outage by the session timeout then in force: a lower bound.
  Admin removals and KIP-389 refusals are scale-downs, not restarts, and a later join does not pair with them.
- Rebalances avoided (docs/pipeline.md states the model): every ``static_member_replaced`` is a restart. Under
  dynamic membership it would have cost two rebalances (one when the old member leaves or expires, one when the
  new member joins); under static membership it cost one when ``rebalance`` is true and none when false.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from berth.pipeline.schema import (
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    RESTART_EXPIRY_PHASE,
    RESTART_LEAVE_VIA,
    STATIC_MEMBER_REPLACED,
)

STATIC_REPLACEMENT = "static_replacement"
LEAVE_REJOIN = "leave_rejoin"
EXPIRY_REJOIN = "expiry_rejoin"

# Under dynamic membership a restart is a departure (leave or session expiry) and a new member's join.
REBALANCES_PER_DYNAMIC_RESTART = 2


def restart_gaps(events: DataFrame) -> DataFrame:
    """Journal events -> ``group_id, group_instance_id, kind, returned_seq, returned_ms, gap_ms``, one per restart."""
    return _replacement_gaps(events).unionByName(_rejoin_gaps(events))


def _replacement_gaps(events: DataFrame) -> DataFrame:
    return events.where(
        (F.col("type") == STATIC_MEMBER_REPLACED)
        & F.col("group_instance_id").isNotNull()
        & F.col("offline_ms").isNotNull()
    ).select(
        "group_id",
        "group_instance_id",
        F.lit(STATIC_REPLACEMENT).alias("kind"),
        F.col("seq").alias("returned_seq"),
        F.col("ts_ms").alias("returned_ms"),
        F.col("offline_ms").alias("gap_ms"),
    )


def _rejoin_gaps(events: DataFrame) -> DataFrame:
    in_instance_order = Window.partitionBy("group_id", "group_instance_id").orderBy("seq")
    comings_and_goings = events.where(
        F.col("type").isin(MEMBER_JOINED, MEMBER_LEFT, MEMBER_EXPIRED) & F.col("group_instance_id").isNotNull()
    ).select(
        "group_id",
        "group_instance_id",
        "ts_ms",
        F.when((F.col("type") == MEMBER_LEFT) & (F.col("via") == RESTART_LEAVE_VIA), F.lit(LEAVE_REJOIN))
        .when((F.col("type") == MEMBER_EXPIRED) & (F.col("phase") == RESTART_EXPIRY_PHASE), F.lit(EXPIRY_REJOIN))
        .alias("kind"),
        F.lead("type").over(in_instance_order).alias("next_type"),
        F.lead("seq").over(in_instance_order).alias("next_seq"),
        F.lead("ts_ms").over(in_instance_order).alias("next_ts_ms"),
    )
    return comings_and_goings.where(F.col("kind").isNotNull() & (F.col("next_type") == MEMBER_JOINED)).select(
        "group_id",
        "group_instance_id",
        "kind",
        F.col("next_seq").alias("returned_seq"),
        F.col("next_ts_ms").alias("returned_ms"),
        (F.col("next_ts_ms") - F.col("ts_ms")).alias("gap_ms"),
    )


def rebalances_avoided(events: DataFrame) -> DataFrame:
    """Journal events -> per group with static restarts: ``static_restarts, restarts_without_rebalance,
    restarts_with_rebalance, rebalances_if_dynamic, rebalances_avoided`` (the model is in the module rules)."""
    replaced = events.where(F.col("type") == STATIC_MEMBER_REPLACED)
    counted = replaced.groupBy("group_id").agg(
        F.count(F.lit(1)).alias("static_restarts"),
        F.count(F.when(~F.col("rebalance"), True)).alias("restarts_without_rebalance"),
        F.count(F.when(F.col("rebalance"), True)).alias("restarts_with_rebalance"),
    )
    return counted.withColumn(
        "rebalances_if_dynamic", F.col("static_restarts") * REBALANCES_PER_DYNAMIC_RESTART
    ).withColumn("rebalances_avoided", F.col("rebalances_if_dynamic") - F.col("restarts_with_rebalance"))
