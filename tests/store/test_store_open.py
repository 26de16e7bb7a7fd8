"""Opening a data dir: created when missing, refused with one clear line when it cannot be used."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from berth.coordinator.store import SCHEMA_VERSION, SqliteStore, StoreError


def open_error(data_dir: Path) -> str:
    with pytest.raises(StoreError) as refused:
        SqliteStore(data_dir)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_a_missing_data_dir_is_created_with_an_empty_store(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "a" / "b") as store:
        assert list(store.load()) == []
        assert store.last_seq() == 0
    assert (tmp_path / "a" / "b" / "berth.db").is_file()
    assert (tmp_path / "a" / "b" / "journal").is_dir()


def test_a_file_instead_of_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("not a dir")

    assert open_error(tmp_path / "data") == f"data dir {tmp_path / 'data'} is not a directory"


def test_a_dir_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    # Even root cannot create a directory under a regular file.
    (tmp_path / "file").write_text("")

    assert "cannot be created" in open_error(tmp_path / "file" / "data")


def test_a_corrupt_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "berth.db").write_bytes(b"this is not an SQLite file, just garbage " * 200)

    assert "is not a usable SQLite database" in open_error(tmp_path)


def test_a_database_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "berth.db").mkdir()

    assert "berth.db" in open_error(tmp_path)


def test_a_database_from_a_newer_berth_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "berth.db") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))

    assert f"schema version {SCHEMA_VERSION + 1}, newer than this Berth supports" in open_error(tmp_path)


def test_an_sqlite_database_that_is_not_berths_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "berth.db") as conn:
        conn.execute("CREATE TABLE something_else (x)")

    assert "is not a Berth database" in open_error(tmp_path)


def test_a_data_dir_in_use_by_another_store_is_refused_until_it_closes(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path)

    assert "in use by another Berth coordinator" in open_error(tmp_path)

    first.close()
    SqliteStore(tmp_path).close()


def test_deleting_the_lock_file_does_not_let_a_second_store_open_the_data_dir(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path)
    (tmp_path / "berth.lock").unlink()

    assert "in use by another Berth coordinator" in open_error(tmp_path)

    first.close()
    SqliteStore(tmp_path).close()


def test_a_journal_path_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "journal").write_text("")

    assert open_error(tmp_path) == f"journal segment dir {tmp_path / 'journal'} is unusable: File exists"
