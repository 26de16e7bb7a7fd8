"""What the HTML report shows, reduced in Spark to a few hundred rows and collected into plain Python values.

Owns the report's aggregates (rebalances per hour by cause, partitions moved per hour, restart-gap histograms) and
``ReportData``, the only thing ``report`` sees. Rules: every aggregate is a DataFrame -> DataFrame transform;
collecting happens in ``collect_report_data`` alone; histograms use log-spaced bins (ten per decade of
milliseconds) because restart gaps span from a second to many minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from berth.pipeline.advice import AdviceSettings, JournalStats
from berth.pipeline.schema import HOUR_MS

BINS_PER_DECADE = 10
HISTOGRAM_GROUPS = 6


@dataclass(frozen=True)
class GapHistogram:
    """One group's restart gaps in log bins, with its advice for the chart's markers."""

    group_id: str
    bins: list[tuple[float, float, int]]  # (low_ms, high_ms, restarts)
    samples: int
    restart_gap_p_ms: int | None
    advised_session_timeout_ms: int | None
    confident: bool


@dataclass(frozen=True)
class ReportData:
    journal_path: str
    generated_at_ms: int
    journal: JournalStats
    settings: AdviceSettings
    rebalances_by_hour: list[tuple[int, str, int]]  # (hour_start_ms, cause, rebalances), all groups
    moved_by_hour: list[tuple[int, int, int]]  # (hour_start_ms, partitions_moved, assignments), all groups
    gap_histograms: list[GapHistogram]
    groups: list[dict[str, Any]]  # summary rows
    advice: list[dict[str, Any]]  # advice rows


def fleet_rebalances_by_hour(per_hour: DataFrame) -> DataFrame:
    """``rebalances_per_hour`` output -> ``hour_start_ms, cause, rebalances`` summed over groups."""
    return per_hour.groupBy("hour_start_ms", "cause").agg(F.sum("rebalances").alias("rebalances"))


def fleet_moved_by_hour(moved: DataFrame) -> DataFrame:
    """``partitions_moved`` output -> ``hour_start_ms, partitions_moved, assignments`` summed over groups."""
    hour = F.col("ts_ms") - F.pmod(F.col("ts_ms"), F.lit(HOUR_MS))
    return moved.groupBy(hour.alias("hour_start_ms")).agg(
        F.sum("partitions_moved").alias("partitions_moved"), F.count(F.lit(1)).alias("assignments")
    )


def gap_histogram(gaps: DataFrame) -> DataFrame:
    """Restart gaps -> ``group_id, low_ms, high_ms, restarts`` in log bins; gaps under 1 ms fall in [1, 1.26)."""
    log_bin = F.floor(F.log10(F.greatest(F.col("gap_ms"), F.lit(1)).cast("double")) * BINS_PER_DECADE)
    binned = gaps.groupBy("group_id", log_bin.alias("bin")).agg(F.count(F.lit(1)).alias("restarts"))
    return binned.select(
        "group_id",
        F.pow(F.lit(10.0), F.col("bin") / BINS_PER_DECADE).alias("low_ms"),
        F.pow(F.lit(10.0), (F.col("bin") + 1) / BINS_PER_DECADE).alias("high_ms"),
        "restarts",
    )


def collect_report_data(
    *,
    journal_path: str,
    generated_at_ms: int,
    journal: JournalStats,
    settings: AdviceSettings,
    per_hour: DataFrame,
    moved: DataFrame,
    gaps: DataFrame,
    summary_rows: list[dict[str, Any]],
    advice_rows: list[dict[str, Any]],
) -> ReportData:
    """Run the report aggregates and gather them; histograms for the groups with the most restart samples."""
    busiest = sorted(advice_rows, key=lambda r: (-int(r["samples"]), str(r["group_id"])))[:HISTOGRAM_GROUPS]
    chosen = [str(r["group_id"]) for r in busiest]
    bins_by_group: dict[str, list[tuple[float, float, int]]] = {g: [] for g in chosen}
    if chosen:
        for row in gap_histogram(gaps.where(F.col("group_id").isin(chosen))).collect():
            bins_by_group[row["group_id"]].append((row["low_ms"], row["high_ms"], row["restarts"]))
    histograms = [
        GapHistogram(
            group_id=str(r["group_id"]),
            bins=sorted(bins_by_group[str(r["group_id"])]),
            samples=int(r["samples"]),
            restart_gap_p_ms=r["restart_gap_p_ms"],
            advised_session_timeout_ms=r["advised_session_timeout_ms"],
            confident=bool(r["confident"]),
        )
        for r in busiest
    ]
    return ReportData(
        journal_path=journal_path,
        generated_at_ms=generated_at_ms,
        journal=journal,
        settings=settings,
        rebalances_by_hour=sorted(
            (r["hour_start_ms"], r["cause"], r["rebalances"]) for r in fleet_rebalances_by_hour(per_hour).collect()
        ),
        moved_by_hour=sorted(
            (r["hour_start_ms"], r["partitions_moved"], r["assignments"]) for r in fleet_moved_by_hour(moved).collect()
        ),
        gap_histograms=histograms,
        groups=summary_rows,
        advice=advice_rows,
    )
