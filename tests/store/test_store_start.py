"""Start-up that refuses to lose data: a database that lost its history next to the journal segments, damaged
pages, and records that cannot be loaded are refused with one line (``StoreError``), never taken as a fresh
store and never cut to match."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from store_test_data import Reports, event, group_snapshot, loaded, write

from berth.coordinator.store import GroupCommitWriter, SqliteStore, StoreConfig, StoreError


def a_store_with_history(data_dir: Path, groups: int = 1, events: int = 4) -> None:
    with SqliteStore(data_dir) as store, GroupCommitWriter(store, Reports()) as writer:
        for n in range(groups):
            writer.submit(write(n + 1, group_snapshot(f"g{n}")))
        for n in range(events):
            writer.submit(write(groups + n + 1, events=[event("g0", "member_joined", n=n)]))


def journal_files(data_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((data_dir / "journal").iterdir())}


def refusal(data_dir: Path, config: StoreConfig | None = None) -> str:
    with pytest.raises(StoreError) as refused:
        SqliteStore(data_dir, config)
    message = str(refused.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("how", ["missing", "empty"])
def test_a_missing_or_empty_database_next_to_segments_is_refused_and_nothing_is_cut(data_dir: Path, how: str) -> None:
    a_store_with_history(data_dir)
    segments = journal_files(data_dir)
    if how == "missing":
        (data_dir / "berth.db").unlink()
    else:
        (data_dir / "berth.db").write_bytes(b"")

    message = refusal(data_dir)

    assert f"database {data_dir / 'berth.db'} is {how} but the journal segments" in message
    assert "refusing to start" in message
    assert journal_files(data_dir) == segments
    assert (data_dir / "berth.db").exists() == (how == "empty")  # no empty database was created in its place


def test_a_fresh_database_in_place_of_the_old_one_is_refused(data_dir: Path, tmp_path: Path) -> None:
    a_store_with_history(data_dir)
    segments = journal_files(data_dir)
    SqliteStore(tmp_path / "fresh").close()
    (data_dir / "berth.db").write_bytes((tmp_path / "fresh" / "berth.db").read_bytes())

    message = refusal(data_dir)

    assert "holds events up to seq 4 but the database only up to seq 0" in message
    assert journal_files(data_dir) == segments


def test_an_empty_journal_folder_is_a_fresh_store(data_dir: Path) -> None:
    (data_dir / "journal").mkdir(parents=True)
    (data_dir / "journal" / "segment-00000000000000000001.jsonl").write_bytes(b"")

    with SqliteStore(data_dir) as store:
        assert loaded(store) == []


def scribble_page_of(data_dir: Path, table: str) -> None:
    db = data_dir / "berth.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself, none newer in the WAL
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.close()
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(os.urandom(page_size))


@pytest.mark.parametrize("check", ["quick", "full"])
def test_a_database_with_damaged_pages_is_refused_before_it_is_used(data_dir: Path, check: str) -> None:
    a_store_with_history(data_dir, groups=3)
    scribble_page_of(data_dir, "group_members")

    message = refusal(data_dir, StoreConfig(integrity_check=check))  # type: ignore[arg-type]

    assert message.startswith(f"database {data_dir / 'berth.db'} failed its integrity check")


def test_the_integrity_check_can_be_switched_off(data_dir: Path) -> None:
    a_store_with_history(data_dir)

    with SqliteStore(data_dir, StoreConfig(integrity_check="off")) as store:
        assert len(loaded(store)) == 1


@pytest.mark.parametrize(
    ("table", "statement", "complaint"),
    [
        ("groups", "UPDATE groups SET record = '{not json'", "group 'g0': JSON is malformed"),
        ("groups", 'UPDATE groups SET record = \'{"version": "two"}\'', "group 'g0': Expected `int`, got `str`"),
        ("groups", "UPDATE groups SET record = '{\"version\": 0}'", "group 'g0': Expected `int` >= 1"),
        ("groups", "UPDATE groups SET record = '[1, 2]'", "group 'g0': Expected `object`, got `array`"),
        ("group_members", "UPDATE group_members SET record = '{\"member_id\": 5}'", "Expected `str`, got `int`"),
        ("offsets", "INSERT INTO offsets VALUES ('g0', 't', 0, 'many', -1, '', 0)", "expected an integer, found str"),
        ("expected_members", "INSERT INTO expected_members VALUES ('g0', '{\"a\": 1}')", "Expected `array`, got"),
    ],
)
def test_a_record_that_cannot_be_loaded_is_refused_naming_it(
    data_dir: Path, table: str, statement: str, complaint: str
) -> None:
    a_store_with_history(data_dir)
    with sqlite3.connect(data_dir / "berth.db") as conn:
        conn.execute(statement)

    with SqliteStore(data_dir) as store, pytest.raises(StoreError) as refused:
        loaded(store)

    assert str(refused.value).startswith(f"database {data_dir / 'berth.db'} cannot be read: ")
    assert complaint in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("statement", "complaint"),
    [
        ("UPDATE journal SET event = X'7b7d' WHERE seq = 2", "journal event 2 is not text"),
        ("""UPDATE journal SET event = '{"seq":7,"ts_ms":1}' WHERE seq = 2""", "journal event 2 does not start with"),
        ("""UPDATE journal SET event = '{"seq":2,"ts_ms":' WHERE seq = 2""", "journal event 2 is not JSON"),
        ("UPDATE journal SET event = 'nothing' WHERE seq = 3", "journal event 3 does not start with its seq"),
        ("DELETE FROM journal WHERE seq = 2", "its journal has 3 events from seq 1 to 4, not one per seq"),
    ],
)
def test_a_journal_row_that_cannot_be_served_is_refused_at_start_naming_it(
    data_dir: Path, statement: str, complaint: str
) -> None:
    """Issue 22, point 9: journal rows are checked at start like the rest of the store, one line naming the row,
    never a coordinator that serves a page it cannot make (or a segment repair that fails with a traceback)."""
    a_store_with_history(data_dir)
    segments = journal_files(data_dir)
    with sqlite3.connect(data_dir / "berth.db") as conn:
        conn.execute(statement)

    message = refusal(data_dir)

    assert message.startswith(f"database {data_dir / 'berth.db'} cannot be read: ")
    assert complaint in message and "restore it from a backup" in message
    assert journal_files(data_dir) == segments
