"""Spark's floor for the issue's first comparison: only rebalances by group and cause, restart gaps and rebalance
durations, computed by Berth's own transforms in a session started as ``berth-analyze`` starts it.

``python -m benchmarks.spark_subset --journal PARQUET_DIR [--master local[2]]``

Owns nothing of the product: it calls ``berth.pipeline``'s readers, session and transforms, and collects each
aggregate per group (nothing is written). Beside ``benchmarks.duckdb_reference --subset`` it shows what the same
three aggregations cost in Spark, the JVM's start included; beside the whole job, what the rest of the job adds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from berth.pipeline.advice import restart_gap_stats
from berth.pipeline.advice_settings import AdviceSettings
from berth.pipeline.cluster import size_sql
from berth.pipeline.readers import good_events, read_journal
from berth.pipeline.rebalances import rebalance_durations, rebalances_by_cause
from berth.pipeline.restarts import restart_gaps
from berth.pipeline.schema import ANALYSED_COLUMNS
from berth.pipeline.session import open_session
from berth.pipeline.sizing import driver_memory, memory_limit_bytes
from berth.pipeline.sources import journal_bytes, resolve_journal_source


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    from pyspark.sql import functions as F

    source = resolve_journal_source(args.journal)
    size = journal_bytes(source)
    owned = open_session(args.master, driver_memory("auto", size, source.format, memory_limit_bytes()))
    try:
        size_sql(owned.spark, size)
        events = good_events(read_journal(owned.spark, source).select(*ANALYSED_COLUMNS, "malformed_line"))
        by_cause = rebalances_by_cause(events).collect()
        gaps = restart_gap_stats(restart_gaps(events), AdviceSettings().percentile).collect()
        durations = (
            rebalance_durations(events)
            .groupBy("group_id")
            .agg(F.sum("duration_ms").alias("rebalancing_ms"), F.max("duration_ms").alias("longest_ms"))
            .collect()
        )
    finally:
        owned.spark.stop()
    print(f"{len(by_cause)} causes, {len(gaps)} groups with gaps, {len(durations)} with rebalances", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
