"""The embedded session sized to its input: heap from the journal's bytes within the container's limit, shuffle
partitions from bytes and cores, and what the journal's bytes are (all before Spark starts: no Spark here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from berth.pipeline.sizing import (
    BASE_HEAP,
    GIB,
    MAX_HEAP,
    MIB,
    MIN_HEAP,
    NON_HEAP,
    SMALL_JOURNAL_BYTES,
    adaptive_execution,
    driver_heap_bytes,
    driver_memory,
    memory_limit_bytes,
    shuffle_partitions,
    whole_stage_codegen,
)
from berth.pipeline.sources import JournalSource, journal_bytes, resolve_journal_source


def test_the_heap_grows_with_the_journal_json_lines_by_a_quarter_parquet_byte_for_byte() -> None:
    assert driver_heap_bytes(0, "jsonl", None) == BASE_HEAP
    assert driver_heap_bytes(256 * MIB, "jsonl", None) == BASE_HEAP + 64 * MIB
    assert driver_heap_bytes(256 * MIB, "parquet", None) == BASE_HEAP + 256 * MIB
    # Twenty million events of JSON Lines: beyond the ceiling Spark spills to disk rather than asking for more.
    assert driver_heap_bytes(22 * GIB, "jsonl", None) == MAX_HEAP


def test_the_heap_leaves_the_jvm_and_python_their_share_of_a_containers_limit_but_never_drops_below_the_minimum() -> (
    None
):
    assert driver_heap_bytes(4 * GIB, "parquet", 2 * GIB) == 2 * GIB - NON_HEAP
    assert driver_heap_bytes(0, "jsonl", 2 * GIB) == BASE_HEAP  # the limit leaves more than a small run wants
    assert driver_heap_bytes(0, "jsonl", 768 * MIB) == MIN_HEAP


def test_an_explicit_driver_memory_wins_and_auto_is_given_in_mebibytes() -> None:
    assert driver_memory("6g", 10 * GIB, "jsonl", 2 * GIB) == "6g"
    assert driver_memory("auto", 256 * MIB, "jsonl", None) == f"{(BASE_HEAP + 64 * MIB) // MIB}m"


@pytest.mark.parametrize(
    ("journal", "cores", "partitions"),
    [
        (70_000, 2, 1),  # a demo's journal: one task per stage
        (100 * MIB, 2, 4),
        (11 * GIB, 2, 6),  # three per core at most
        (11 * GIB, 8, 24),
        (None, 4, 12),  # a remote journal: as many as the cores allow
    ],
)
def test_shuffle_partitions_follow_the_journals_size_up_to_three_per_core(
    journal: int | None, cores: int, partitions: int
) -> None:
    assert shuffle_partitions(journal, cores) == partitions


def test_adaptive_execution_only_with_partitions_to_coalesce_and_codegen_only_beyond_a_small_journal() -> None:
    assert not adaptive_execution(1)
    assert adaptive_execution(2)
    assert not whole_stage_codegen(70_000)  # a demo's journal: interpreted rows cost less than compiling them
    assert whole_stage_codegen(SMALL_JOURNAL_BYTES)
    assert whole_stage_codegen(None)  # a remote journal of unknown size: as for a large one


def test_the_memory_limit_comes_from_cgroup_v2_or_v1_and_no_limit_is_none(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    assert memory_limit_bytes((v2, v1)) is None  # no cgroup files at all
    v1.write_text("9223372036854771712\n")  # v1's "unlimited"
    assert memory_limit_bytes((v2, v1)) is None
    v1.write_text("1073741824\n")
    assert memory_limit_bytes((v2, v1)) == GIB
    v2.write_text("max\n")  # v2 is read first: no limit
    assert memory_limit_bytes((v2, v1)) is None
    v2.write_text("2147483648\n")
    assert memory_limit_bytes((v2, v1)) == 2 * GIB


def test_journal_bytes_are_the_files_spark_reads(tmp_path: Path) -> None:
    segments = tmp_path / "journal"
    segments.mkdir()
    (segments / "segment-1.jsonl").write_text("x" * 100)
    (segments / "segment-2.jsonl").write_text("x" * 50)
    (segments / "notes.txt").write_text("x" * 1000)  # not a segment: not read
    parquet = tmp_path / "parquet"
    (parquet / "date=2026-01-01").mkdir(parents=True)
    (parquet / "date=2026-01-01" / "part-0.parquet").write_bytes(b"x" * 70)
    (parquet / "_SUCCESS").write_text("")

    assert journal_bytes(resolve_journal_source(str(segments))) == 150
    assert journal_bytes(resolve_journal_source(str(segments / "segment-2.jsonl"))) == 50
    assert journal_bytes(resolve_journal_source(str(parquet))) == 70
    assert journal_bytes(JournalSource("jsonl", ("s3a://bucket/journal",))) is None
