"""Journal sources: what ``--journal`` may name, decided before any JVM starts; missing or empty is an error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from berth.pipeline.sources import JournalError, JournalSource, resolve_journal_source


def test_a_segment_directory_is_read_as_json_lines_through_a_file_filter(tmp_path: Path) -> None:
    (tmp_path / "segment-00000000000000000001.jsonl").write_text('{"seq":1}\n')

    assert resolve_journal_source(str(tmp_path)) == JournalSource("jsonl", (str(tmp_path),), file_filter="*.jsonl")


def test_a_directory_of_parquet_files_in_partitions_is_parquet(tmp_path: Path) -> None:
    (tmp_path / "date=2026-01-01").mkdir()
    (tmp_path / "date=2026-01-01" / "part-0.snappy.parquet").write_bytes(b"PAR1")

    assert resolve_journal_source(str(tmp_path)) == JournalSource("parquet", (str(tmp_path),))


def test_single_files_and_globs_are_listed_and_typed_by_their_names(tmp_path: Path) -> None:
    for name in ("segment-1.jsonl", "segment-2.jsonl", "events.parquet"):
        (tmp_path / name).write_text("x\n")

    assert resolve_journal_source(str(tmp_path / "segment-*.jsonl")) == JournalSource(
        "jsonl", (str(tmp_path / "segment-1.jsonl"), str(tmp_path / "segment-2.jsonl"))
    )
    assert resolve_journal_source(str(tmp_path / "events.parquet")) == JournalSource(
        "parquet", (str(tmp_path / "events.parquet"),)
    )
    assert resolve_journal_source(f"file://{tmp_path}/segment-1.jsonl").format == "jsonl"


def test_remote_uris_pass_through_unchecked() -> None:
    assert resolve_journal_source("s3a://bucket/berth/journal") == JournalSource(
        "jsonl", ("s3a://bucket/berth/journal",)
    )
    assert resolve_journal_source("s3a://bucket/berth/parquet").format == "parquet"
    assert resolve_journal_source("hdfs://nn/journal", "parquet").format == "parquet"


@pytest.mark.parametrize(
    ("layout", "complaint"),
    [
        ({}, "journal is empty: no *.jsonl segment or Parquet files in"),
        ({"segment-1.jsonl": "", "segment-2.jsonl": ""}, "journal is empty: every *.jsonl segment in"),
        ({"notes.txt": "hello"}, "journal is empty: no *.jsonl segment or Parquet files in"),
    ],
)
def test_an_empty_journal_directory_is_an_error(tmp_path: Path, layout: dict[str, str], complaint: str) -> None:
    for name, text in layout.items():
        (tmp_path / name).write_text(text)

    with pytest.raises(JournalError, match=re.escape(complaint)):
        resolve_journal_source(str(tmp_path))


def test_a_missing_journal_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match=r"journal not found: .*/nowhere"):
        resolve_journal_source(str(tmp_path / "nowhere"))
    with pytest.raises(JournalError, match="journal not found: no file matches"):
        resolve_journal_source(str(tmp_path / "*.jsonl"))
    with pytest.raises(JournalError, match="unknown journal format 'csv'"):
        resolve_journal_source(str(tmp_path), "csv")
