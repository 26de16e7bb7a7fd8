"""The journal: paging, reading beside an open write transaction, and segments that always match the table."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from store_test_data import Reports, event, segment_events, segment_line_counts, whole_journal, write

from berth.coordinator.store import GroupCommitWriter, SqliteStore, StoreError
from berth.coordinator.store.segments import JournalSegments


def journal_events(data_dir: Path, count: int, *, segment_max_events: int = 3) -> None:
    """Commit ``count`` events (one write each) into the data dir and close it."""
    with (
        SqliteStore(data_dir, segment_max_events=segment_max_events) as store,
        GroupCommitWriter(store, Reports()) as writer,
    ):
        for n in range(1, count + 1):
            writer.submit(write(n, events=[event(f"g{n}", "member_joined", n=n)]))


def newest_segment(data_dir: Path) -> Path:
    return sorted((data_dir / "journal").glob("segment-*.jsonl"))[-1]


def assert_segments_equal_the_journal(data_dir: Path, *, segment_max_events: int = 3) -> None:
    with SqliteStore(data_dir, segment_max_events=segment_max_events) as store:
        assert segment_events(data_dir) == whole_journal(store)


def test_journal_page_returns_events_after_a_seq_in_order_up_to_a_limit(data_dir: Path) -> None:
    journal_events(data_dir, 7)

    with SqliteStore(data_dir) as store:
        assert [e["seq"] for e in store.journal_page(after=0, limit=3)] == [1, 2, 3]
        assert [e["seq"] for e in store.journal_page(after=3, limit=3)] == [4, 5, 6]
        assert [e["seq"] for e in store.journal_page(after=6, limit=3)] == [7]
        assert store.journal_page(after=7, limit=3) == []
        assert store.journal_page(after=1, limit=1) == [{"seq": 2, **event("g2", "member_joined", n=2)}]
        assert store.last_seq() == 7


def test_journal_page_reads_committed_events_while_a_write_transaction_is_open(data_dir: Path) -> None:
    journal_events(data_dir, 2)
    with SqliteStore(data_dir) as store:
        other_writer = sqlite3.connect(data_dir / "berth.db", isolation_level=None)
        other_writer.execute("BEGIN IMMEDIATE")
        other_writer.execute("INSERT INTO journal (seq, event) VALUES (3, '{\"seq\":3}')")

        assert [e["seq"] for e in store.journal_page(after=0, limit=10)] == [1, 2]

        other_writer.execute("ROLLBACK")
        other_writer.close()


def test_segments_rotate_after_segment_max_events(data_dir: Path) -> None:
    journal_events(data_dir, 7, segment_max_events=3)

    assert segment_line_counts(data_dir) == {
        "segment-00000000000000000001.jsonl": 3,
        "segment-00000000000000000004.jsonl": 3,
        "segment-00000000000000000007.jsonl": 1,
    }
    first_line = (data_dir / "journal" / "segment-00000000000000000001.jsonl").read_text().splitlines()[0]
    assert first_line.startswith('{"seq":1,"ts_ms":')
    assert_segments_equal_the_journal(data_dir)


def test_one_transaction_straddling_a_rotation_splits_across_segments(store: SqliteStore, data_dir: Path) -> None:
    with GroupCommitWriter(store, Reports()) as writer:
        writer.submit(write(1, events=[event("g", "member_joined", n=n) for n in range(5)]))

    assert list(segment_line_counts(data_dir).values()) == [3, 2]
    assert segment_events(data_dir) == whole_journal(store)


def test_reopening_cuts_a_torn_last_line(data_dir: Path) -> None:
    journal_events(data_dir, 5)
    with newest_segment(data_dir).open("a") as segment:
        segment.write('{"seq":6,"ts_ms":17000000')  # the crash hit mid-line

    assert_segments_equal_the_journal(data_dir)
    assert [e["seq"] for e in segment_events(data_dir)] == [1, 2, 3, 4, 5]


def test_reopening_appends_events_the_segments_missed(data_dir: Path) -> None:
    journal_events(data_dir, 8)
    newest = newest_segment(data_dir)  # holds 7 and 8
    newest.unlink()
    middle = sorted((data_dir / "journal").glob("segment-*.jsonl"))[-1]  # holds 4, 5, 6
    middle.write_text("".join(line + "\n" for line in middle.read_text().splitlines()[:1]))

    assert_segments_equal_the_journal(data_dir)
    assert list(segment_line_counts(data_dir).values()) == [3, 3, 2]


def test_reopening_refuses_segments_ahead_of_the_table_and_keeps_every_line(data_dir: Path) -> None:
    journal_events(data_dir, 6)
    with newest_segment(data_dir).open("a") as segment:
        segment.write('{"seq":7,"type":"member_joined"}\n')
    before = {path.name: path.read_bytes() for path in (data_dir / "journal").iterdir()}

    with pytest.raises(StoreError) as refused:
        SqliteStore(data_dir, segment_max_events=3)

    assert "holds events up to seq 7 but the database only up to seq 6" in str(refused.value)
    assert {path.name: path.read_bytes() for path in (data_dir / "journal").iterdir()} == before


def test_an_unreadable_last_line_is_cut_like_a_torn_one(data_dir: Path) -> None:
    journal_events(data_dir, 5)
    with newest_segment(data_dir).open("a") as segment:
        segment.write("\x00\x00\x00\n")  # a crash left zeros where the last line was going

    assert_segments_equal_the_journal(data_dir)


def test_appends_continue_in_the_reconciled_segment(data_dir: Path) -> None:
    journal_events(data_dir, 4)  # segments: [1, 2, 3], [4]
    with newest_segment(data_dir).open("a") as segment:
        segment.write('{"seq":5,"ty')

    with SqliteStore(data_dir, segment_max_events=3) as store, GroupCommitWriter(store, Reports()) as writer:
        writer.submit(write(5, events=[event("g", "member_left"), event("g", "group_emptied")]))
        writer.flush()

        assert list(segment_line_counts(data_dir).values()) == [3, 3]
        assert segment_events(data_dir) == whole_journal(store)


def test_a_failed_segment_append_still_acknowledges_and_is_repaired_by_the_next_commit(
    store: SqliteStore, data_dir: Path, reports: Reports, monkeypatch: pytest.MonkeyPatch
) -> None:
    with GroupCommitWriter(store, reports) as writer:
        writer.submit(write(1, events=[event("g", "member_joined")]))
        writer.flush()
        real_write = JournalSegments._write

        def disk_full_once(self: JournalSegments, lines: Sequence[tuple[int, str]]) -> None:
            monkeypatch.setattr(JournalSegments, "_write", real_write)
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(JournalSegments, "_write", disk_full_once)
        writer.submit(write(2, events=[event("g", "member_left")]))
        writer.flush()

        assert [e["seq"] for e in segment_events(data_dir)] == [1]
        writer.submit(write(3, events=[event("g", "group_emptied")]))
        writer.flush()

    assert reports.outcomes == [(1, True), (2, True), (3, True)]
    assert [e["seq"] for e in segment_events(data_dir)] == [1, 2, 3]
    assert segment_events(data_dir) == whole_journal(store)
