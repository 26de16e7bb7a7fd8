"""Restarts: how long each static instance was away, what a dynamic restart cost, what static membership saved.

Owns the restart-gap, dynamic-restart and rebalances-avoided transforms. Rules:
- A restart gap is measured per ``group_instance_id`` (dynamic members have no identity across restarts):
  ``static_replacement``: the ``offline_ms`` of a ``static_member_replaced`` (time since the old member was last
  heard from: the whole outage);
  ``leave_rejoin``: a ``member_left`` with ``via=leave`` followed, next for that instance, by its ``member_joined``;
  ``expiry_rejoin``: a ``member_expired`` with ``phase=session`` followed by its ``member_joined``. The gap is the
  whole outage, from when the member was last heard from: the expiry's ``offline_ms`` before the expiry, then on to
  the join. An expiry without ``offline_ms`` (a journal from before it existed) counts from the expiry, which
  understates the outage by the session timeout then in force: a lower bound.
  Admin removals and KIP-389 refusals are scale-downs, not restarts, and a later join does not pair with them.
- A dynamic restart is measured where the journal shows one: a dynamic member's departure (``member_left`` with
  ``via=leave``, or ``member_expired`` with ``phase=session``) whose group's next dynamic coming or going is a
  dynamic ``member_joined`` (the replacement process). It cost the ``rebalance_started`` events from the departure
  until the group's first ``assignment_stored`` after the arrival: one when the newcomer joined within the
  departure's rebalance, two when it came after that rebalance had completed. A departure followed by another
  departure (a shutdown, or restarts overlapping) is not measured.
- Rebalances avoided (docs/pipeline.md states the model), from what was measured: every
  ``static_member_replaced`` is a restart; it cost one rebalance when ``rebalance`` is true, none when false. As a
  dynamic member the same restart would have cost what the journal's dynamic restarts cost on average
  (``rebalances_per_dynamic_restart``, over all groups). A journal without a dynamic restart measures no such
  cost: then each counts as ``AT_LEAST_PER_DYNAMIC_RESTART`` (a dynamic departure always starts a rebalance), and
  the figure is a lower bound.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from berth.pipeline.schema import (
    ASSIGNMENT_STORED,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    REBALANCE_STARTED,
    RESTART_EXPIRY_PHASE,
    RESTART_LEAVE_VIA,
    STATIC_MEMBER_REPLACED,
)

STATIC_REPLACEMENT = "static_replacement"
LEAVE_REJOIN = "leave_rejoin"
EXPIRY_REJOIN = "expiry_rejoin"

# A dynamic member's departure always starts a rebalance; its replacement's join may share it or start another.
AT_LEAST_PER_DYNAMIC_RESTART = 1


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
        # How long an expired member had been silent when its session ran out (0: unknown, a lower bound).
        F.when(F.col("type") == MEMBER_EXPIRED, F.coalesce(F.col("offline_ms"), F.lit(0))).otherwise(0).alias("before"),
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
        (F.col("next_ts_ms") - F.col("ts_ms") + F.col("before")).alias("gap_ms"),
    )


def _departure_or_arrival(events: DataFrame) -> Column:
    """``departure``/``arrival`` for a dynamic member leaving (as in a restart) or joining, else null."""
    dynamic = F.col("group_instance_id").isNull()
    leaves = (F.col("type") == MEMBER_LEFT) & (F.col("via") == RESTART_LEAVE_VIA)
    expires = (F.col("type") == MEMBER_EXPIRED) & (F.col("phase") == RESTART_EXPIRY_PHASE)
    return (
        F.when(dynamic & (leaves | expires), F.lit("departure"))
        .when(dynamic & (F.col("type") == MEMBER_JOINED), F.lit("arrival"))
        .when(F.col("type") == REBALANCE_STARTED, F.lit("started"))
        .when(F.col("type") == ASSIGNMENT_STORED, F.lit("stored"))
    )


def dynamic_restarts(events: DataFrame) -> DataFrame:
    """Journal events -> ``group_id, departed_seq, departed_ms, returned_seq, returned_ms, rebalances``: one row
    per measured dynamic restart (module rules)."""
    kinds = events.select("group_id", "seq", "ts_ms", _departure_or_arrival(events).alias("kind")).where(
        F.col("kind").isNotNull()
    )
    up_to_here = Window.partitionBy("group_id").orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    # Ordered backwards, "up to here" is "from here on": a running frame, where an unbounded following one would
    # rescan the rest of the group for every row.
    from_here_on = Window.partitionBy("group_id").orderBy(F.col("seq").desc()).rowsBetween(Window.unboundedPreceding, 0)
    started = kinds.withColumn(
        "started_so_far", F.sum(F.when(F.col("kind") == "started", 1).otherwise(0)).over(up_to_here)
    )
    settled = started.withColumn(
        "started_by_next_store",
        F.last(F.when(F.col("kind") == "stored", F.col("started_so_far")), ignorenulls=True).over(from_here_on),
    )
    in_order = Window.partitionBy("group_id").orderBy("seq")
    comings_and_goings = settled.where(F.col("kind").isin("departure", "arrival")).select(
        "group_id",
        "seq",
        "ts_ms",
        "kind",
        "started_so_far",
        F.lead("kind").over(in_order).alias("next_kind"),
        F.lead("seq").over(in_order).alias("next_seq"),
        F.lead("ts_ms").over(in_order).alias("next_ts_ms"),
        F.lead("started_by_next_store").over(in_order).alias("settled_at"),
    )
    return comings_and_goings.where(
        (F.col("kind") == "departure") & (F.col("next_kind") == "arrival") & F.col("settled_at").isNotNull()
    ).select(
        "group_id",
        F.col("seq").alias("departed_seq"),
        F.col("ts_ms").alias("departed_ms"),
        F.col("next_seq").alias("returned_seq"),
        F.col("next_ts_ms").alias("returned_ms"),
        (F.col("settled_at") - F.col("started_so_far")).alias("rebalances"),
    )


def rebalances_avoided(events: DataFrame) -> DataFrame:
    """Journal events -> per group with static or measured dynamic restarts: ``static_restarts,
    restarts_without_rebalance, restarts_with_rebalance, dynamic_restarts, dynamic_restart_rebalances,
    rebalances_if_dynamic, rebalances_avoided`` (the model is in the module rules)."""
    static = (
        events.where(F.col("type") == STATIC_MEMBER_REPLACED)
        .groupBy("group_id")
        .agg(
            F.count(F.lit(1)).alias("static_restarts"),
            F.count(F.when(~F.col("rebalance"), True)).alias("restarts_without_rebalance"),
            F.count(F.when(F.col("rebalance"), True)).alias("restarts_with_rebalance"),
        )
    )
    dynamic = (
        dynamic_restarts(events)
        .groupBy("group_id")
        .agg(F.count(F.lit(1)).alias("dynamic_restarts"), F.sum("rebalances").alias("dynamic_restart_rebalances"))
    )
    counts = ("static_restarts", "restarts_without_rebalance", "restarts_with_rebalance")
    per_group = static.join(dynamic, "group_id", "full").select(
        "group_id",
        *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in counts),
        F.coalesce("dynamic_restarts", F.lit(0)).cast("long").alias("dynamic_restarts"),
        F.coalesce("dynamic_restart_rebalances", F.lit(0)).cast("long").alias("dynamic_restart_rebalances"),
    )
    rate = per_group.agg(rebalances_per_dynamic_restart(F.sum("dynamic_restart_rebalances"), F.sum("dynamic_restarts")))
    if_dynamic = F.round(F.col("static_restarts") * F.col("rebalances_per_dynamic_restart")).cast("long")
    return (
        per_group.crossJoin(rate)
        .withColumn("rebalances_if_dynamic", if_dynamic)
        .withColumn("rebalances_avoided", F.col("rebalances_if_dynamic") - F.col("restarts_with_rebalance"))
        .drop("rebalances_per_dynamic_restart")
    )


def rebalances_per_dynamic_restart(rebalances: Column, restarts: Column) -> Column:
    """The measured average, or ``AT_LEAST_PER_DYNAMIC_RESTART`` when nothing was measured."""
    measured = F.when(restarts > 0, rebalances / restarts)
    return F.coalesce(measured, F.lit(float(AT_LEAST_PER_DYNAMIC_RESTART))).alias("rebalances_per_dynamic_restart")
