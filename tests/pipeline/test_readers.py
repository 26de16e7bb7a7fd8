"""Readers: JSON Lines segments and Parquet into typed events; malformed lines flagged and kept, never dropped."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pipeline_builders import rows
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from berth.pipeline.convert import write_partitioned
from berth.pipeline.readers import good_events, malformed_lines, parse_journal_lines, read_journal
from berth.pipeline.schema import JOURNAL_COLUMNS, JOURNAL_SCHEMA
from berth.pipeline.sources import resolve_journal_source

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z

# {"version":1,"partitions":{"orders":[0,1]},"user_data":null}, as the member library encodes it
LIBRARY_ASSIGNMENT = base64.b64encode(b'{"version":1,"partitions":{"orders":[0,1]},"user_data":null}').decode()

JOINED = {
    "seq": 1,
    "ts_ms": T0,
    "group_id": "orders",
    "type": "member_joined",
    "generation_id": 0,
    "member_id": "orders-0-a",
    "group_instance_id": "orders-0",
    "static": True,
    "client_id": "consumer",
    "a_field_from_the_future": {"ignored": True},
}
COMPLETED = {
    "seq": 2,
    "ts_ms": T0 + 250,
    "group_id": "orders",
    "type": "rebalance_completed",
    "generation_id": 1,
    "leader": "orders-0-a",
    "protocol_name": "range",
    "members": [
        {"member_id": "orders-0-a", "group_instance_id": "orders-0"},
        {"member_id": "c-1", "group_instance_id": None},
    ],
}
STORED = {
    "seq": 3,
    "ts_ms": T0 + 300,
    "group_id": "orders",
    "type": "assignment_stored",
    "generation_id": 1,
    "member_id": "orders-0-a",
    "assignments": [
        {"member_id": "orders-0-a", "group_instance_id": "orders-0", "assignment": LIBRARY_ASSIGNMENT},
        {"member_id": "c-1", "group_instance_id": None, "assignment": "e30="},  # "{}": not the library's encoding
    ],
}
REPLACED = {
    "seq": 4,
    "ts_ms": T0 + 86_400_000,  # the next UTC day
    "group_id": "orders",
    "type": "static_member_replaced",
    "generation_id": 1,
    "member_id": "orders-0-b",
    "group_instance_id": "orders-0",
    "old_member_id": "orders-0-a",
    "offline_ms": 8_000,
    "rebalance": False,
}
MALFORMED = [
    "not json at all",
    '{"seq": "five", "ts_ms": 1, "group_id": "orders", "type": "group_created"}',  # required field mistyped
    '{"seq": 6, "group_id": "orders", "type": "group_created"}',  # required field missing
    '{"seq": 7, "ts_ms": 1, "group_id": "orders", "type": "static_member_replaced", "offline_ms": "long"}',
    "[1, 2, 3]",
    '{"seq": 8, "ts_ms": 1, "group_id": "ord',  # the newest segment, caught mid-write
]


def line(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def expected(event: dict[str, Any]) -> dict[str, Any]:
    """The event as the reader returns it: every journal column, unknown fields gone."""
    return {name: event.get(name) for name in JOURNAL_COLUMNS}


def expected_converted(event: dict[str, Any]) -> dict[str, Any]:
    """The event as read back from the converter's Parquet: assignments carry their decoded partitions."""
    decoded = {LIBRARY_ASSIGNMENT: {"orders": [0, 1]}}
    converted = expected(event)
    if converted["assignments"] is not None:
        converted["assignments"] = [
            {**member, "partitions": decoded.get(member["assignment"])} for member in converted["assignments"]
        ]
    return converted


def test_good_lines_parse_into_every_typed_field_including_the_nested_arrays(spark: SparkSession) -> None:
    lines = spark.createDataFrame([(line(e),) for e in (JOINED, COMPLETED, STORED, REPLACED)], "value string")

    parsed = parse_journal_lines(lines)

    assert StructType(parsed.schema.fields[:-1]) == JOURNAL_SCHEMA
    assert parsed.schema.fields[-1] == StructField("malformed_line", StringType())
    assert rows(good_events(parsed), "seq") == [expected(e) for e in (JOINED, COMPLETED, STORED, REPLACED)]
    assert malformed_lines(parsed).count() == 0


def test_malformed_lines_are_flagged_with_their_text_and_blank_lines_are_not_events(spark: SparkSession) -> None:
    lines = spark.createDataFrame([(text,) for text in [line(JOINED), "", "   ", *MALFORMED]], "value string")

    parsed = parse_journal_lines(lines)

    assert rows(good_events(parsed), "seq") == [expected(JOINED)]
    assert sorted(r["malformed_line"] for r in malformed_lines(parsed).collect()) == sorted(MALFORMED)


def write_segment(directory: Path, first_seq: int, lines: list[str]) -> None:
    (directory / f"segment-{first_seq:020d}.jsonl").write_text("".join(f"{text}\n" for text in lines))


def test_a_segment_directory_is_read_whole_and_only_its_jsonl_files(spark: SparkSession, tmp_path: Path) -> None:
    write_segment(tmp_path, 1, [line(JOINED), line(COMPLETED)])
    write_segment(tmp_path, 3, [line(STORED), MALFORMED[0], line(REPLACED)])
    (tmp_path / "README.txt").write_text("not a segment\n")

    flagged = read_journal(spark, resolve_journal_source(str(tmp_path)))

    assert [r["seq"] for r in rows(good_events(flagged), "seq")] == [1, 2, 3, 4]
    assert [r["malformed_line"] for r in malformed_lines(flagged).collect()] == [MALFORMED[0]]


def test_the_parquet_conversion_keeps_events_and_malformed_lines_partitioned_by_utc_date_assignments_decoded(
    spark: SparkSession, tmp_path: Path
) -> None:
    segments = tmp_path / "journal"
    segments.mkdir()
    write_segment(segments, 1, [line(JOINED), line(COMPLETED), line(STORED), line(REPLACED), MALFORMED[2]])
    converted = tmp_path / "parquet"

    write_partitioned(read_journal(spark, resolve_journal_source(str(segments))), str(converted))
    flagged = read_journal(spark, resolve_journal_source(str(converted)))

    assert sorted(p for p in os.listdir(converted) if not p.startswith((".", "_"))) == [
        "date=2026-01-01",
        "date=2026-01-02",
        "date=__HIVE_DEFAULT_PARTITION__",  # the malformed line has no time
    ]
    assert rows(good_events(flagged), "seq") == [expected_converted(e) for e in (JOINED, COMPLETED, STORED, REPLACED)]
    assert [r["malformed_line"] for r in malformed_lines(flagged).collect()] == [MALFORMED[2]]


def test_the_parquet_conversion_can_partition_by_group_as_well(spark: SparkSession, tmp_path: Path) -> None:
    segments = tmp_path / "journal"
    segments.mkdir()
    billing = {**JOINED, "seq": 9, "group_id": "billing/eu"}  # a group id that is no safe path segment
    write_segment(segments, 1, [line(JOINED), line(billing)])
    converted = tmp_path / "parquet"

    write_partitioned(read_journal(spark, resolve_journal_source(str(segments))), str(converted), "group_id,date")
    flagged = read_journal(spark, resolve_journal_source(str(converted)))

    assert sorted(p for p in os.listdir(converted) if not p.startswith((".", "_"))) == [
        "group_id=billing%2Feu",
        "group_id=orders",
    ]
    assert rows(good_events(flagged), "seq") == [expected_converted(JOINED), expected_converted(billing)]


# What the coordinator's bounds and owner records add (docs/formats.md "Bounded events", docs/api.md §7a): new
# event types and fields the pipeline does not read. They must parse as good events, never as malformed lines.
SUMMARISED = {
    "seq": 9,
    "ts_ms": T0 + 400,
    "group_id": "orders",
    "type": "assignment_stored",
    "generation_id": 2,
    "member_id": "orders-0-a",
    "summarised": True,
    "assignments": [
        {
            "member_id": "orders-0-a",
            "group_instance_id": "orders-0",
            "assignment": base64.b64encode(b'{"partitions":{"orders":[0,1]},"version":1}').decode(),
            "assignment_bytes": 700_000,
        },
        {"member_id": "c-1", "group_instance_id": None, "assignment": None, "assignment_bytes": 12},
    ],
}
COUNTED_ONLY = {"seq": 10, "ts_ms": T0 + 500, "group_id": "big", "type": "assignment_stored", "generation_id": 1,
                "member_id": "big-0", "summarised": True, "member_count": 10_000}  # fmt: skip
OWNER_CLAIMED = {"seq": 11, "ts_ms": T0 + 600, "group_id": "orders", "type": "owner_claimed", "generation_id": 2,
                 "owner": {"namespace": "team-a", "name": "orders", "uid": "u-1"}, "adopted": True}  # fmt: skip
EXPIRED = {"seq": 12, "ts_ms": T0 + 700, "group_id": "old", "type": "group_deleted", "generation_id": 0,
           "via": "expired"}  # fmt: skip


def test_summarised_events_owner_events_and_expiry_parse_as_good_events(spark: SparkSession) -> None:
    events = (SUMMARISED, COUNTED_ONLY, OWNER_CLAIMED, EXPIRED)
    lines = spark.createDataFrame([(line(e),) for e in events], "value string")

    parsed = parse_journal_lines(lines)

    assert malformed_lines(parsed).count() == 0
    read = rows(good_events(parsed), "seq")
    assert read == [expected(e) | {"assignments": read[i]["assignments"]} for i, e in enumerate(events)]
    assert read[0]["assignments"] == [  # the nested fields it does not know are gone too
        {k: v for k, v in a.items() if k != "assignment_bytes"} for a in SUMMARISED["assignments"]
    ]
    assert read[1]["assignments"] is None
