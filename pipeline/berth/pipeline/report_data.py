"""What the HTML report shows, reduced in Spark to a few hundred rows and collected into plain Python values.

Owns the report's aggregates (rebalances and partitions moved per time bucket, restart-gap histograms, the busiest
groups' timelines) and ``ReportData``, the only thing ``report`` sees. Rules:
- Every aggregate is a DataFrame -> DataFrame transform; collecting happens in ``collect_report_data`` alone.
- Time buckets are sized to the journal's span (``bucket_ms``): the smallest of ``BUCKET_WIDTHS_MS`` that keeps a
  chart within ``MAX_BARS`` bars, from a second for a demo's 25-second journal to 30 days for years of history.
  Buckets are aligned to the Unix epoch, UTC.
- Histograms use log-spaced bins (ten per decade of milliseconds): restart gaps span a second to many minutes.
- Timelines are drawn for the ``TIMELINE_GROUPS`` most rebalanced groups, each with at most ``TIMELINE_ITEMS``
  of its latest joins and departures, rebalances and restart gaps; when a kind has more, the timeline starts
  where all kinds are complete (the page says it shows the latest events only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from berth.pipeline.advice import AdviceSettings, JournalStats
from berth.pipeline.rebalances import UNKNOWN_CAUSE
from berth.pipeline.schema import DAY_MS, HOUR_MS, MEMBER_EXPIRED, MEMBER_JOINED, MEMBER_LEFT

BINS_PER_DECADE = 10
HISTOGRAM_GROUPS = 6
TIMELINE_GROUPS = 4
TIMELINE_ITEMS = 150
MAX_BARS = 120
_SECOND_MS, _MINUTE_MS = 1_000, 60_000
BUCKET_WIDTHS_MS = (
    *(s * _SECOND_MS for s in (1, 2, 5, 10, 15, 30)),
    *(m * _MINUTE_MS for m in (1, 2, 5, 10, 15, 30)),
    *(h * HOUR_MS for h in (1, 3, 6, 12)),
    DAY_MS,
    7 * DAY_MS,
    30 * DAY_MS,
)


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
class GroupTimeline:
    """One group's membership history: who came and went, when it rebalanced and why, who was away how long."""

    group_id: str
    comings_and_goings: list[tuple[int, str, str]]  # (ts_ms, joined|left|removed|expired|replaced, who)
    rebalances: list[tuple[int, int | None, str]]  # (started_ms, ended_ms or None while open, cause)
    restart_gaps: list[tuple[int, int, str, str]]  # (away_from_ms, back_ms, instance id, kind)
    truncated: bool = False  # the group had more than TIMELINE_ITEMS of one kind: the latest are shown


@dataclass(frozen=True)
class ReportData:
    journal_path: str
    generated_at_ms: int
    journal: JournalStats
    settings: AdviceSettings
    bucket_ms: int  # width of every time bucket below
    rebalances_by_bucket: list[tuple[int, str, int]]  # (bucket_start_ms, cause, rebalances), all groups
    moved_by_bucket: list[tuple[int, int, int]]  # (bucket_start_ms, partitions_moved, assignments), all groups
    gap_histograms: list[GapHistogram]
    groups: list[dict[str, Any]]  # summary rows
    advice: list[dict[str, Any]]  # advice rows
    timelines: list[GroupTimeline] = field(default_factory=list)


def bucket_ms_for(first_ts_ms: int, last_ts_ms: int) -> int:
    """The smallest bucket width that keeps ``first..last`` within ``MAX_BARS`` epoch-aligned buckets."""
    for width in BUCKET_WIDTHS_MS:
        if last_ts_ms // width - first_ts_ms // width + 1 <= MAX_BARS:
            return width
    return BUCKET_WIDTHS_MS[-1]


def _bucket(ts: str, bucket_ms: int) -> Any:
    return F.col(ts) - F.pmod(F.col(ts), F.lit(bucket_ms))


def fleet_rebalances_by_bucket(durations: DataFrame, bucket_ms: int) -> DataFrame:
    """``rebalance_durations`` output -> ``bucket_start_ms, cause, rebalances``: rebalances started per bucket,
    summed over groups (a missing cause is ``unknown``)."""
    cause = F.coalesce(F.col("cause"), F.lit(UNKNOWN_CAUSE))
    return durations.groupBy(_bucket("started_ms", bucket_ms).alias("bucket_start_ms"), cause.alias("cause")).agg(
        F.count(F.lit(1)).alias("rebalances")
    )


def fleet_moved_by_bucket(moved: DataFrame, bucket_ms: int) -> DataFrame:
    """``partitions_moved`` output -> ``bucket_start_ms, partitions_moved, assignments`` summed over groups."""
    return moved.groupBy(_bucket("ts_ms", bucket_ms).alias("bucket_start_ms")).agg(
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


def comings_and_goings(events: DataFrame) -> DataFrame:
    """Journal events -> ``group_id, ts_ms, what, who``: every join, departure and in-place replacement, ``who``
    the instance id (a dynamic member: ``dynamic``)."""
    what = (
        F.when(F.col("type") == MEMBER_JOINED, F.lit("joined"))
        .when((F.col("type") == MEMBER_LEFT) & (F.col("via") == "admin"), F.lit("removed"))
        .when(F.col("type") == MEMBER_LEFT, F.lit("left"))
        .when(F.col("type") == MEMBER_EXPIRED, F.lit("expired"))
        .when(F.col("type") == "static_member_replaced", F.lit("replaced"))
    )
    return events.select(
        "group_id", "ts_ms", what.alias("what"), F.coalesce("group_instance_id", F.lit("dynamic")).alias("who")
    ).where(F.col("what").isNotNull())


def latest_per_group(frame: DataFrame, time_column: str, limit: int) -> DataFrame:
    """The ``limit`` latest rows of each group (by ``time_column``), and ``of`` = how many the group had."""
    latest_first = Window.partitionBy("group_id").orderBy(F.col(time_column).desc())
    per_group = Window.partitionBy("group_id")
    return (
        frame.withColumn("rank", F.row_number().over(latest_first))
        .withColumn("of", F.count(F.lit(1)).over(per_group))
        .where(F.col("rank") <= limit)
        .drop("rank")
    )


def collect_report_data(
    *,
    journal_path: str,
    generated_at_ms: int,
    journal: JournalStats,
    settings: AdviceSettings,
    events: DataFrame,
    durations: DataFrame,
    moved: DataFrame,
    gaps: DataFrame,
    summary_rows: list[dict[str, Any]],
    advice_rows: list[dict[str, Any]],
) -> ReportData:
    """Run the report aggregates and gather them; histograms for the groups with the most restart samples,
    timelines for the most rebalanced groups."""
    bucket_ms = bucket_ms_for(journal.first_ts_ms, journal.last_ts_ms)
    return ReportData(
        journal_path=journal_path,
        generated_at_ms=generated_at_ms,
        journal=journal,
        settings=settings,
        bucket_ms=bucket_ms,
        rebalances_by_bucket=sorted(
            (r["bucket_start_ms"], r["cause"], r["rebalances"])
            for r in fleet_rebalances_by_bucket(durations, bucket_ms).collect()
        ),
        moved_by_bucket=sorted(
            (r["bucket_start_ms"], r["partitions_moved"], r["assignments"])
            for r in fleet_moved_by_bucket(moved, bucket_ms).collect()
        ),
        gap_histograms=_gap_histograms(gaps, advice_rows),
        groups=summary_rows,
        advice=advice_rows,
        timelines=_timelines(events, durations, gaps, summary_rows),
    )


def _gap_histograms(gaps: DataFrame, advice_rows: list[dict[str, Any]]) -> list[GapHistogram]:
    busiest = sorted(advice_rows, key=lambda r: (-int(r["samples"]), str(r["group_id"])))[:HISTOGRAM_GROUPS]
    chosen = [str(r["group_id"]) for r in busiest]
    bins_by_group: dict[str, list[tuple[float, float, int]]] = {g: [] for g in chosen}
    if chosen:
        for row in gap_histogram(gaps.where(F.col("group_id").isin(chosen))).collect():
            bins_by_group[row["group_id"]].append((row["low_ms"], row["high_ms"], row["restarts"]))
    return [
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


def _timelines(
    events: DataFrame, durations: DataFrame, gaps: DataFrame, summary_rows: list[dict[str, Any]]
) -> list[GroupTimeline]:
    busiest = sorted(summary_rows, key=lambda r: (-int(r["rebalances"]), str(r["group_id"])))[:TIMELINE_GROUPS]
    chosen = [str(r["group_id"]) for r in busiest]
    if not chosen:
        return []
    mine = F.col("group_id").isin(chosen)
    moves: dict[str, list[tuple[int, str, str]]] = {g: [] for g in chosen}
    rebalances: dict[str, list[tuple[int, int | None, str]]] = {g: [] for g in chosen}
    away: dict[str, list[tuple[int, int, str, str]]] = {g: [] for g in chosen}
    truncated: set[str] = set()
    for row in latest_per_group(comings_and_goings(events.where(mine)), "ts_ms", TIMELINE_ITEMS).collect():
        moves[row["group_id"]].append((row["ts_ms"], row["what"], row["who"]))
        if row["of"] > TIMELINE_ITEMS:
            truncated.add(row["group_id"])
    for row in latest_per_group(durations.where(mine), "started_ms", TIMELINE_ITEMS).collect():
        rebalances[row["group_id"]].append((row["started_ms"], row["ended_ms"], row["cause"] or UNKNOWN_CAUSE))
        if row["of"] > TIMELINE_ITEMS:
            truncated.add(row["group_id"])
    for row in latest_per_group(gaps.where(mine), "returned_ms", TIMELINE_ITEMS).collect():
        away[row["group_id"]].append(
            (row["returned_ms"] - row["gap_ms"], row["returned_ms"], row["group_instance_id"], row["kind"])
        )
        if row["of"] > TIMELINE_ITEMS:
            truncated.add(row["group_id"])
    return [
        _since_complete(g, moves[g], rebalances[g], away[g])
        if g in truncated
        else GroupTimeline(
            group_id=g,
            comings_and_goings=sorted(moves[g]),
            rebalances=sorted(rebalances[g], key=lambda r: r[0]),
            restart_gaps=sorted(away[g]),
        )
        for g in chosen
    ]


def _since_complete(
    group_id: str,
    moves: list[tuple[int, str, str]],
    rebalances: list[tuple[int, int | None, str]],
    away: list[tuple[int, int, str, str]],
) -> GroupTimeline:
    """A truncated timeline from the latest time at which no kind has lost an item: the lanes stay comparable."""
    kinds = ([m[0] for m in moves], [r[0] for r in rebalances], [a[1] for a in away])
    firsts = [min(ts) for ts in kinds if len(ts) >= TIMELINE_ITEMS]  # the kinds that were cut
    start = max(firsts, default=0)
    return GroupTimeline(
        group_id=group_id,
        comings_and_goings=sorted(m for m in moves if m[0] >= start),
        rebalances=sorted((r for r in rebalances if r[0] >= start), key=lambda r: r[0]),
        restart_gaps=sorted(a for a in away if a[1] >= start),
        truncated=True,
    )
