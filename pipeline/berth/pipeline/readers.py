"""Journal readers: JSON Lines segments and Parquet into one DataFrame of events, malformed lines kept and flagged.

Owns parsing. Rules: the schema is explicit (``schema.JOURNAL_SCHEMA``); JSON Lines are read as text and parsed with
``from_json`` so that a line that does not parse, has a field of the wrong type, lacks a required field
(``seq``, ``ts_ms``, ``group_id``, ``type``), or names its group against its source (:func:`keyed_against_source`:
the operator's Kafka evidence names groups ``kafka://<cluster>/<group>``, a coordinator's journal never may, so
neither is analysed as the other's group of the same name) is *flagged*, never silently dropped: the
``malformed_line`` column holds its text, and is null for a good event. Blank lines are not events and are
skipped. The converter stores flagged rows in Parquet as they are, so a Parquet journal reports the same malformed
lines as its JSON source. Callers count the flagged rows, then keep ``good_events``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from berth.pipeline.schema import (
    CONVERTED_SCHEMA,
    EVIDENCE_SOURCE,
    JOURNAL_COLUMNS,
    JOURNAL_SCHEMA,
    KAFKA_GROUP_PREFIX,
    REQUIRED_COLUMNS,
)
from berth.pipeline.sources import JournalSource

MALFORMED_LINE = "malformed_line"
_CORRUPT_FIELD = "_corrupt_record"
_PARSE_SCHEMA = StructType([*JOURNAL_SCHEMA.fields, StructField(_CORRUPT_FIELD, StringType())])
# A converted journal's rows (the converter writes every Parquet journal).
FLAGGED_SCHEMA = StructType([*CONVERTED_SCHEMA.fields, StructField(MALFORMED_LINE, StringType())])


def read_journal(spark: SparkSession, source: JournalSource) -> DataFrame:
    """Every event of the journal with the ``malformed_line`` flag column (see the module rules)."""
    reader = spark.read if source.file_filter is None else spark.read.option("pathGlobFilter", source.file_filter)
    if source.format == "parquet":
        return flag_incomplete_events(reader.schema(FLAGGED_SCHEMA).parquet(*source.paths))
    return parse_journal_lines(reader.text(list(source.paths)))


def parse_journal_lines(lines: DataFrame) -> DataFrame:
    """``value`` (one JSON text per row) -> the journal columns plus ``malformed_line``."""
    parsed = lines.where(F.trim(F.col("value")) != "").select(
        F.col("value"),
        F.from_json("value", _PARSE_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT_FIELD}).alias(
            "event"
        ),
    )
    # from_json keeps the well-typed fields of a partly bad line: the corrupt-record field is what tells.
    unparsable = F.col(f"event.{_CORRUPT_FIELD}").isNotNull() | F.col("event").isNull()
    event_column = lambda name: F.col(f"event.{name}")  # noqa: E731
    is_malformed = unparsable | _any_required_missing(event_column) | keyed_against_source(event_column)
    return parsed.select(
        *(F.col(f"event.{name}").alias(name) for name in JOURNAL_COLUMNS),
        F.when(is_malformed, F.col("value")).alias(MALFORMED_LINE),
    )


def flag_incomplete_events(events: DataFrame) -> DataFrame:
    """Typed events (Parquet; ``malformed_line`` optional) -> the journal columns plus ``malformed_line``, set for
    rows flagged already and for rows missing a required field (shown by their required fields only, so that
    filtering on the flag reads four columns, not the nested ones)."""
    already_flagged = F.col(MALFORMED_LINE) if MALFORMED_LINE in events.columns else F.lit(None).cast("string")
    return events.select(
        *JOURNAL_COLUMNS,
        F.coalesce(
            already_flagged,
            F.when(_any_required_missing(F.col) | keyed_against_source(F.col), F.to_json(F.struct(*REQUIRED_COLUMNS))),
        ).alias(MALFORMED_LINE),
    )


def good_events(flagged: DataFrame) -> DataFrame:
    """The events that parsed, without the ``malformed_line`` column."""
    return flagged.where(F.col(MALFORMED_LINE).isNull()).drop(MALFORMED_LINE)


def malformed_lines(flagged: DataFrame) -> DataFrame:
    """The text of every malformed line (one column, ``malformed_line``)."""
    return flagged.where(F.col(MALFORMED_LINE).isNotNull()).select(MALFORMED_LINE)


def keyed_against_source(column_of: Callable[[str], Column]) -> Column:
    """An event of the operator's evidence (``source: operator``) whose group is not ``kafka://...``, or one of a
    coordinator's journal whose group is (advice is keyed by what a group belongs to: docs/formats.md)."""
    evidence = F.coalesce(column_of("source") == F.lit(EVIDENCE_SOURCE), F.lit(False))
    scoped = F.coalesce(column_of("group_id").startswith(KAFKA_GROUP_PREFIX), F.lit(False))
    return evidence != scoped


def _any_required_missing(column_of: Callable[[str], Column]) -> Column:
    return reduce(lambda a, b: a | b, (column_of(name).isNull() for name in REQUIRED_COLUMNS))
