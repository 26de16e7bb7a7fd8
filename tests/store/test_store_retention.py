"""Journal retention: whole segments go, oldest first, while the journal holds more than its bytes or its oldest
events are older than its age before the newest; the table keeps exactly the segments' events."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from store_test_data import Reports, segment_events, whole_journal, write

from berth.coordinator.store import GroupCommitWriter, SqliteStore, StoreConfig
from berth.coordinator.store.segments import segment_paths

START_MS = 1_700_000_000_000


def an_event(n: int, ts_ms: int, padding: int = 100) -> dict[str, Any]:
    return {"ts_ms": ts_ms, "group_id": "g", "type": "member_joined", "member_id": "m" * padding, "n": n}


def segment_bytes(data_dir: Path) -> int:
    return sum(path.stat().st_size for path in segment_paths(data_dir / "journal"))


def journal_with(data_dir: Path, config: StoreConfig, events: list[dict[str, Any]]) -> SqliteStore:
    store = SqliteStore(data_dir, config)
    with GroupCommitWriter(store, Reports()) as writer:
        for token, event in enumerate(events, 1):
            writer.submit(write(token, events=[event]))
    return store


def test_the_journal_keeps_at_most_its_retention_bytes_and_drops_the_oldest_segments(data_dir: Path) -> None:
    config = StoreConfig(journal_retention_bytes=4_000, journal_retention_ms=None)  # segments of 500 bytes
    store = journal_with(data_dir, config, [an_event(n, START_MS) for n in range(200)])

    assert segment_bytes(data_dir) <= 4_000
    kept = segment_events(data_dir)
    assert kept == whole_journal(store)  # the table holds exactly what the segments hold
    assert kept[-1]["seq"] == 200  # the newest events stay
    assert store.first_seq() == kept[0]["seq"] > 1
    assert store.last_seq() == 200
    store.close()


def test_events_older_than_the_retention_age_before_the_newest_go(data_dir: Path) -> None:
    config = StoreConfig(journal_retention_bytes=None, journal_retention_ms=60_000, segment_max_events=10)
    old = [an_event(n, START_MS + n) for n in range(30)]
    new = [an_event(30 + n, START_MS + 3_600_000 + n) for n in range(5)]
    store = journal_with(data_dir, config, old + new)

    assert [e["seq"] for e in segment_events(data_dir)] == list(range(31, 36))
    assert [e["seq"] for e in whole_journal(store)] == list(range(31, 36))
    assert store.first_seq() == 31
    store.close()


def test_the_newest_segment_is_never_dropped(data_dir: Path) -> None:
    config = StoreConfig(journal_retention_bytes=10, journal_retention_ms=1)
    store = journal_with(data_dir, config, [an_event(n, START_MS + n * 1_000) for n in range(3)])

    assert [e["seq"] for e in whole_journal(store)] == [3]
    assert store.first_seq() == 3
    store.close()


def test_a_crash_between_the_table_trim_and_the_file_deletion_is_finished_at_reopen(data_dir: Path) -> None:
    config = StoreConfig(journal_retention_bytes=None, journal_retention_ms=None, segment_max_events=5)
    journal_with(data_dir, config, [an_event(n, START_MS) for n in range(12)]).close()
    with sqlite3.connect(data_dir / "berth.db") as conn:
        conn.execute("DELETE FROM journal WHERE seq < 6")  # the table trimmed, the files not yet deleted

    with SqliteStore(data_dir, config) as store:
        assert [path.name for path in segment_paths(data_dir / "journal")] == [
            "segment-00000000000000000006.jsonl",
            "segment-00000000000000000011.jsonl",
        ]
        assert segment_events(data_dir) == whole_journal(store)
        assert store.first_seq() == 6


def test_an_empty_journal_starts_after_its_last_seq(data_dir: Path) -> None:
    with SqliteStore(data_dir) as store:
        assert (store.first_seq(), store.last_seq()) == (1, 0)
