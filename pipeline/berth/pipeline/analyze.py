"""One analysis run: read the journal once, run every transform, write advice.json, summary.parquet, report.html
(and headline.json, the report's cards as JSON).

Owns the order of the stages and all output I/O (the transforms stay pure). Rules:
- A JSON Lines journal is parsed once and cached (only ``ANALYSED_COLUMNS``): parsing dominates the run (see
  SPARK-NOTES.md). A Parquet journal is not cached: each transform reads just its columns, cheaper than a cache.
- Few Spark jobs: every job costs planning, code generation and scheduling, which is most of a small journal's
  run. The journal's counts are one job (they decide whether there is anything to analyse); the summary is one
  action, and every count on the progress stream after it comes from the summary's rows, not from a job of its
  own. A transform's output is cached only when more than one action reads it: the restart-gap statistics (summary
  and advice) always, the restart gaps, rebalance durations and partitions moved when the report reads them too.
- All outputs are written by the driver into ``out_dir`` (a local or mounted directory): they are small (one row
  per group), and so the same run works unchanged on a cluster, where executors cannot reach the driver's disk.
- ``advice.json`` is replaced atomically (written aside, then renamed), because the operator may read it at any time.
- A journal without a single good event raises ``JournalError``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from berth.pipeline.advice import AdviceSettings, JournalStats, advice_document, advice_from_stats, restart_gap_stats
from berth.pipeline.assignments import partitions_moved
from berth.pipeline.cluster import missing_file_error
from berth.pipeline.progress import Progress, count
from berth.pipeline.readers import MALFORMED_LINE, good_events, malformed_lines, read_journal
from berth.pipeline.rebalances import rebalance_durations, rebalances_by_cause
from berth.pipeline.restarts import rebalances_avoided, restart_gaps
from berth.pipeline.schema import ANALYSED_COLUMNS
from berth.pipeline.sources import JournalError, JournalSource
from berth.pipeline.summary import group_summary

ADVICE_FILE = "advice.json"
SUMMARY_FILE = "summary.parquet"
#: The report's cards as JSON (``report.headline``), written with the report.
HEADLINE_FILE = "headline.json"
REPORT_FILE = "report.html"
MALFORMED_SAMPLES = 3


@dataclass(frozen=True)
class AnalyzeOptions:
    journal_path: str
    out_dir: str
    settings: AdviceSettings
    since_ms: int | None = None
    write_report: bool = True


@dataclass(frozen=True)
class AnalysisResult:
    journal: JournalStats
    groups: int
    advised_groups: int
    written: tuple[str, ...]
    advice_text: str  # advice.json as written


@dataclass(frozen=True)
class _Results:
    """Every transform's output (``_transform`` says which are cached)."""

    gaps: DataFrame
    gap_stats: DataFrame
    advice: DataFrame
    by_cause: DataFrame
    durations: DataFrame
    avoided: DataFrame
    moved: DataFrame

    def unpersist(self) -> None:
        for field in fields(self):
            getattr(self, field.name).unpersist()


def analyze(
    spark: SparkSession,
    source: JournalSource,
    options: AnalyzeOptions,
    progress: Progress,
    now_ms: Callable[[], int],
) -> AnalysisResult:
    flagged, stats = _read(spark, source, options, progress)
    events = good_events(flagged)
    results = _transform(events, options.settings, shared=options.write_report)

    os.makedirs(options.out_dir, exist_ok=True)
    progress.say("restart gaps, rebalances, partitions moved and the summary per group")
    summary = group_summary(
        events,
        results.by_cause,
        results.avoided,
        results.gap_stats,
        results.advice,
        results.durations,
        results.moved,
    )
    # Sorted here: a few rows per group, where a Spark sort would cost a sampling job.
    summary_table = _to_arrow(summary).sort_by("group_id")
    written = [_write_summary(summary_table, options.out_dir)]
    summary_rows: list[dict[str, Any]] = summary_table.to_pylist()
    advice_rows = [row.asDict() for row in results.advice.collect()]
    progress.say(
        f"restart gaps: {count(_total(summary_rows, 'restart_gap_samples'))}; advice for "
        f"{count(len(advice_rows), 'group')}; rebalances: {count(_total(summary_rows, 'rebalances'))}; "
        f"assignments compared: {count(_total(summary_rows, 'assignments'))}"
    )
    generated_at_ms = now_ms()
    advice_text = json.dumps(advice_document(advice_rows, stats, generated_at_ms), indent=2) + "\n"
    written.append(_write_text(advice_text, options.out_dir, ADVICE_FILE))
    progress.say(f"wrote {SUMMARY_FILE} ({count(len(summary_rows), 'group')}) and {ADVICE_FILE}")

    if options.write_report:
        # Only here: the report needs matplotlib, which a --no-report run never loads.
        from berth.pipeline.report import headline, render_report
        from berth.pipeline.report_data import collect_report_data

        report = collect_report_data(
            journal_path=options.journal_path,
            generated_at_ms=generated_at_ms,
            journal=stats,
            settings=options.settings,
            events=events,
            durations=results.durations,
            moved=results.moved,
            gaps=results.gaps,
            summary_rows=summary_rows,
            advice_rows=advice_rows,
        )
        written.append(_write_text(render_report(report), options.out_dir, REPORT_FILE))
        written.append(_write_text(json.dumps(headline(summary_rows)) + "\n", options.out_dir, HEADLINE_FILE))
        progress.say(f"wrote {REPORT_FILE} and {HEADLINE_FILE}")
    results.unpersist()
    flagged.unpersist()
    return AnalysisResult(stats, len(summary_rows), len(advice_rows), tuple(written), advice_text)


def _read(
    spark: SparkSession, source: JournalSource, options: AnalyzeOptions, progress: Progress
) -> tuple[DataFrame, JournalStats]:
    """The flagged journal (cached when it is JSON Lines) and what it holds; no good event is a ``JournalError``."""
    progress.say(f"reading {options.journal_path} ({source.format})")
    flagged = read_journal(spark, source).select(*ANALYSED_COLUMNS, MALFORMED_LINE)
    if options.since_ms is not None:
        flagged = flagged.where(F.col(MALFORMED_LINE).isNotNull() | (F.col("ts_ms") >= options.since_ms))
    if source.format == "jsonl":
        # Parsing JSON dominates a run: parse once. Parquet is cheaper to re-read (only the columns each
        # transform needs) than to cache, which costs as much as the whole read.
        flagged = flagged.cache()
    try:
        stats = _journal_stats(flagged)  # the first job that reads the files
    except Exception as e:
        one_line = missing_file_error(e, options.journal_path)
        if one_line is None:
            raise
        raise one_line from e
    progress.say(f"read {count(stats.events)} events, {count(stats.malformed_lines)} malformed lines")
    if stats.malformed_lines:
        for row in malformed_lines(flagged).limit(MALFORMED_SAMPLES).collect():
            progress.say(f"  malformed: {_shorten(row[MALFORMED_LINE])}")
    if stats.events == 0:
        since = "" if options.since_ms is None else f" since {options.since_ms} ms"
        raise JournalError(
            f"no events{since} in journal {options.journal_path} ({stats.malformed_lines} malformed lines)"
        )
    return flagged, stats


def _transform(events: DataFrame, settings: AdviceSettings, *, shared: bool) -> _Results:
    """Every transform, lazily; cached where several actions read the output (module rules): ``shared`` when the
    report reads the restart gaps, durations and partitions moved after the summary."""

    def kept(frame: DataFrame) -> DataFrame:
        return frame.cache() if shared else frame

    gaps = kept(restart_gaps(events))
    gap_stats = restart_gap_stats(gaps, settings.percentile).cache()
    return _Results(
        gaps=gaps,
        gap_stats=gap_stats,
        advice=advice_from_stats(gap_stats, settings),
        by_cause=rebalances_by_cause(events),
        durations=kept(rebalance_durations(events)),
        avoided=rebalances_avoided(events),
        moved=kept(partitions_moved(events)),
    )


def _total(rows: list[dict[str, Any]], column: str) -> int:
    return sum(int(row[column] or 0) for row in rows)


def _journal_stats(flagged: DataFrame) -> JournalStats:
    """One pass over the flagged journal: counts and time span (this also fills the cache)."""
    good = F.col(MALFORMED_LINE).isNull()
    row = flagged.agg(
        F.count(F.when(good, True)).alias("events"),
        F.count(F.when(~good, True)).alias("malformed"),
        F.min(F.when(good, F.col("ts_ms"))).alias("first_ts_ms"),
        F.max(F.when(good, F.col("ts_ms"))).alias("last_ts_ms"),
    ).first()
    assert row is not None  # a global aggregate always has one row
    return JournalStats(
        events=int(row["events"]),
        malformed_lines=int(row["malformed"]),
        first_ts_ms=int(row["first_ts_ms"] or 0),
        last_ts_ms=int(row["last_ts_ms"] or 0),
    )


def _to_arrow(frame: DataFrame) -> pa.Table:
    """``DataFrame.toArrow`` (Spark 4.0+); Spark 3.5 has the same Arrow batches behind a private method."""
    if hasattr(frame, "toArrow"):
        return frame.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = frame._collect_as_arrow()  # type: ignore[operator]  # Spark 3.5 only; 4.x takes the branch above
    return pa.Table.from_batches(batches, schema=to_arrow_schema(frame.schema))


def _shorten(line: str, limit: int = 160) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _write_summary(summary: pa.Table, out_dir: str) -> str:
    path = os.path.join(out_dir, SUMMARY_FILE)
    aside = f"{path}.tmp-{os.getpid()}"
    pq.write_table(summary, aside)
    os.replace(aside, path)
    return path


def _write_text(text: str, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    aside = f"{path}.tmp-{os.getpid()}"
    with open(aside, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(aside, path)
    return path
