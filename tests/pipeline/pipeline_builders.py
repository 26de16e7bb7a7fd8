"""Small explicit journals for the pipeline tests: every test states its whole input.

``event`` builds one event with only the fields given (the others are null, as when the coordinator omits them);
``journal`` turns events into a DataFrame in the journal schema; ``assignment`` encodes partitions as the member
library does; ``rows`` collects a frame in a stated order for exact comparisons.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from berth.pipeline.schema import JOURNAL_COLUMNS, JOURNAL_SCHEMA


def event(seq: int, ts_ms: int, group_id: str, event_type: str, **fields: Any) -> dict[str, Any]:
    """One journal event as the coordinator writes it (only the fields given)."""
    return {"seq": seq, "ts_ms": ts_ms, "group_id": group_id, "type": event_type, **fields}


def journal(spark: SparkSession, *events: dict[str, Any], schema: StructType = JOURNAL_SCHEMA) -> DataFrame:
    """Events -> a DataFrame in the journal schema (or a converted journal's), as the readers return good events."""
    unknown = {key for e in events for key in e} - set(JOURNAL_COLUMNS)
    assert not unknown, f"not journal fields: {unknown}"
    rows = [tuple(e.get(name) for name in JOURNAL_COLUMNS) for e in events]
    return spark.createDataFrame(rows, schema)


def assignment(partitions: dict[str, list[int]], version: int = 1) -> str:
    """An assignment as the member library encodes it: base64 of compact, key-sorted JSON."""
    document = {"partitions": partitions, "user_data": None, "version": version}
    return base64.b64encode(json.dumps(document, separators=(",", ":"), sort_keys=True).encode()).decode()


def rows(frame: DataFrame, *order_by: str) -> list[dict[str, Any]]:
    """The frame's rows as dicts, ordered by the columns given (or all of them), for exact comparisons.

    Sorted here rather than with ``orderBy``: a Spark sort of a handful of rows costs an extra sampling job.
    """
    keys = order_by or tuple(frame.columns)
    collected = [row.asDict(recursive=True) for row in frame.collect()]
    return sorted(collected, key=lambda r: tuple(_sortable(r[k]) for k in keys))


def _sortable(value: Any) -> tuple[bool, Any]:
    return (value is not None, value if value is not None else 0)
