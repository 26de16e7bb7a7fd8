"""Session-timeout advice per group, from the restart gaps the journal shows, and the ``advice.json`` document.

Owns the advice rule; the document it writes is declared once, for the operator too, in
``berth.coordinator.formats.advice`` (docs/formats.md, "Session-timeout advice"). Rules:
- advised = ceil(percentile of the group's restart gaps x safety margin + one heartbeat interval), clamped to
  [min, max]. A session timeout that long outlasts all but the slowest (1 - percentile) restarts, with margin, so
  those restarts replace the member in place instead of expiring it and costing two rebalances.
- The percentile is ``percentile_approx`` (accuracy 10 000): it returns an observed gap, exact on small samples.
- ``confident`` is false below the confidence threshold of samples; the operator ignores advice that is not.
- A group without a single restart gap gets no advice: there is no evidence to size from.
- Time is a parameter: ``generated_at_ms`` is passed in, never read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from berth.coordinator.formats.advice import ENTRY_FIELDS, AdviceDocument, AdviceEntry, JournalSummary
from berth.coordinator.formats.advice import advice_document as document_of
from berth.pipeline.advice_settings import AdviceSettings as AdviceSettings


@dataclass(frozen=True)
class JournalStats:
    """What was analysed, for the ``journal`` object of ``advice.json``."""

    events: int
    malformed_lines: int
    first_ts_ms: int
    last_ts_ms: int


#: The advice's columns: the group and its entry's fields (``formats.advice.AdviceEntry``), in order.
ADVICE_COLUMNS = ("group_id", *ENTRY_FIELDS)


def restart_gap_stats(gaps: DataFrame, percentile: float) -> DataFrame:
    """Restart gaps (``group_id, gap_ms``) -> ``group_id, samples, restart_gap_p50_ms, restart_gap_p_ms,
    restart_gap_max_ms``: one aggregation (both percentiles from one sketch) for the advice and the summary."""
    per_group = gaps.groupBy("group_id").agg(
        F.count(F.lit(1)).alias("samples"),
        F.percentile_approx("gap_ms", [0.5, percentile]).alias("percentiles"),
        F.max("gap_ms").alias("restart_gap_max_ms"),
    )
    return per_group.select(
        "group_id",
        "samples",
        F.col("percentiles")[0].alias("restart_gap_p50_ms"),
        F.col("percentiles")[1].alias("restart_gap_p_ms"),
        "restart_gap_max_ms",
    )


def session_timeout_advice(gaps: DataFrame, settings: AdviceSettings) -> DataFrame:
    """Restart gaps (``group_id, gap_ms``) -> one row per group with a gap, in ``ADVICE_COLUMNS``."""
    return advice_from_stats(restart_gap_stats(gaps, settings.percentile), settings)


def advice_from_stats(per_group: DataFrame, settings: AdviceSettings) -> DataFrame:
    """``restart_gap_stats`` at ``settings.percentile`` -> the advice, in ``ADVICE_COLUMNS``."""
    unclamped = F.ceil(
        F.col("restart_gap_p_ms") * F.lit(settings.safety_margin) + F.lit(settings.heartbeat_interval_ms)
    ).cast("long")
    with_advice = per_group.withColumn("unclamped_ms", unclamped).withColumn(
        "advised_session_timeout_ms",
        F.greatest(F.lit(settings.min_ms), F.least(F.lit(settings.max_ms), F.col("unclamped_ms"))).cast("long"),
    )
    return with_advice.select(
        "group_id",
        "advised_session_timeout_ms",
        "samples",
        F.lit(settings.percentile).alias("percentile"),
        F.col("restart_gap_p_ms").cast("long").alias("restart_gap_p_ms"),
        F.lit(settings.safety_margin).alias("safety_margin"),
        F.lit(settings.heartbeat_interval_ms).cast("long").alias("heartbeat_interval_ms"),
        F.lit(settings.min_ms).cast("long").alias("min_ms"),
        F.lit(settings.max_ms).cast("long").alias("max_ms"),
        (F.col("samples") >= settings.confident_samples).alias("confident"),
        _reason(settings).alias("reason"),
    )


def _seconds(ms: Column) -> Column:
    return F.format_string("%.1f s", ms / F.lit(1000.0))


def _reason(settings: AdviceSettings) -> Column:
    """E.g. ``p99 of 240 restart gaps is 28.0 s; x1.5 + 3.0 s heartbeat = 45.0 s``, plus any clamp and doubt."""
    samples = F.col("samples").cast("string")
    heartbeat = f"{settings.heartbeat_interval_ms / 1000:.1f} s"
    formula = F.concat(
        F.lit(f"{settings.percentile_label} of "),
        samples,
        _plural(" restart gap", " restart gaps"),
        F.lit(" is "),
        _seconds(F.col("restart_gap_p_ms")),
        F.lit(f"; x{settings.safety_margin:g} + {heartbeat} heartbeat = "),
        _seconds(F.col("unclamped_ms")),
    )
    clamp = (
        F.when(
            F.col("unclamped_ms") < settings.min_ms,
            F.lit(f", raised to the minimum {settings.min_ms / 1000:.1f} s"),
        )
        .when(
            F.col("unclamped_ms") > settings.max_ms,
            F.lit(f", lowered to the maximum {settings.max_ms / 1000:.1f} s"),
        )
        .otherwise(F.lit(""))
    )
    doubt = F.when(
        F.col("samples") < settings.confident_samples,
        F.concat(
            F.lit("; only "),
            samples,
            _plural(" sample", " samples"),
            F.lit(f", fewer than {settings.confident_samples}: not confident"),
        ),
    ).otherwise(F.lit(""))
    return F.concat(formula, clamp, doubt)


def _plural(one: str, many: str) -> Column:
    return F.when(F.col("samples") == 1, F.lit(one)).otherwise(F.lit(many))


def advice_document(advice_rows: list[dict[str, Any]], journal: JournalStats, generated_at_ms: int) -> AdviceDocument:
    """Collected advice rows -> the ``advice.json`` document (``formats.advice``), groups sorted by id."""
    groups = {str(row["group_id"]): _entry(row) for row in advice_rows}
    summary: JournalSummary = {
        "events": journal.events,
        "malformed_lines": journal.malformed_lines,
        "first_ts_ms": journal.first_ts_ms,
        "last_ts_ms": journal.last_ts_ms,
    }
    return document_of(groups, summary, generated_at_ms)


def _entry(row: dict[str, Any]) -> AdviceEntry:
    return {
        "advised_session_timeout_ms": row["advised_session_timeout_ms"],
        "samples": row["samples"],
        "percentile": row["percentile"],
        "restart_gap_p_ms": row["restart_gap_p_ms"],
        "safety_margin": row["safety_margin"],
        "heartbeat_interval_ms": row["heartbeat_interval_ms"],
        "min_ms": row["min_ms"],
        "max_ms": row["max_ms"],
        "confident": row["confident"],
        "reason": row["reason"],
    }
