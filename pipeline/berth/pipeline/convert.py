"""Journal -> partitioned Parquet, so that large histories are parsed once and analysed many times.

Owns the storage layout of converted journals. Rules:
- One pass: read, flag, write. Malformed lines are written too (``malformed_line`` set, other columns as parsed),
  so analysing the Parquet reports the same malformed lines as the JSON Lines it came from.
- Partitioned by UTC ``date`` (``date=YYYY-MM-DD/``) by default, rows sorted by ``group_id, seq`` inside each file
  so Parquet's row-group statistics skip other groups. ``group_id,date`` partitions by group as well: worth it for
  few, large groups; thousands of groups times days make thousands of tiny files, which Spark lists and opens
  slowly. Malformed lines have no date and land in Hive's default partition.
- Assignments are stored decoded as well (``schema.CONVERTED_ASSIGNMENT``): parsing them is most of an analysis'
  cost, paid here once instead of at every analysis.
- No shuffle: each input split writes its own files, which follow the coordinator's time-ordered segments.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from berth.pipeline.arguments import DEFAULT_LAYOUT, PARTITION_LAYOUTS
from berth.pipeline.assignments import decoded_assignments
from berth.pipeline.schema import DAY_MS


def with_storage_partitions(flagged: DataFrame, layout: str = DEFAULT_LAYOUT) -> DataFrame:
    """Flagged events -> the same rows with assignments decoded and a UTC ``date`` column, sorted for storage
    under ``layout``."""
    partition_columns = PARTITION_LAYOUTS[layout]
    utc_day = F.date_from_unix_date(F.floor(F.col("ts_ms") / F.lit(DAY_MS)).cast("int"))
    sort_order = dict.fromkeys((*partition_columns, "group_id", "seq"))  # ordered, without repeats
    return (
        flagged.withColumn("assignments", decoded_assignments(F.col("assignments")))
        .withColumn("date", utc_day)
        .sortWithinPartitions(*sort_order)
    )


def write_partitioned(flagged: DataFrame, out_path: str, layout: str = DEFAULT_LAYOUT) -> None:
    """Write flagged events to ``out_path`` as Parquet partitioned per ``layout`` (replacing what is there)."""
    (
        with_storage_partitions(flagged, layout)
        .write.mode("overwrite")
        .partitionBy(*PARTITION_LAYOUTS[layout])
        .parquet(out_path)
    )
