"""The SQLite file: where it lives, how a connection is opened, the tables and their schema version.

Rules:
- One file, ``<data_dir>/berth.db``, in WAL mode with ``synchronous=FULL``: a COMMIT returns only once the
  WAL is fsynced, so an acknowledged write survives kill -9 and power loss.
- ``meta.schema_version`` says which layout the file has. A file written by a newer Berth is refused, never
  misread; a file without it that already has tables is not ours and is refused too. An older layout is
  migrated in one transaction when the file is opened (``MIGRATIONS``).
- A group is one row of its own fields (``groups.record``) and one row per member (``group_members``), each the
  JSON of the core's typed record (docs/formats.md "Group records"), so a static member's restart rewrites two
  small rows instead of the whole group. Offsets are columns; expected members a JSON array; journal events the
  exact JSON line the segments hold.
- Every failure to open turns into a one-line ``StoreError`` naming the path.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import IO

from berth.coordinator.store.config import IntegrityCheck
from berth.coordinator.store.errors import StoreError

SCHEMA_VERSION = 2
DB_FILENAME = "berth.db"
LOCK_FILENAME = "berth.lock"

_TABLES = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE groups (
    group_id TEXT PRIMARY KEY,
    record   TEXT NOT NULL            -- the group's own fields as JSON (GroupMetadata, versioned by "version")
);
CREATE TABLE group_members (
    group_id  TEXT NOT NULL,
    member_id TEXT NOT NULL,
    record    TEXT NOT NULL,          -- one member as JSON (MemberMetadata)
    PRIMARY KEY (group_id, member_id)
) WITHOUT ROWID;
CREATE TABLE offsets (
    group_id            TEXT NOT NULL,
    topic               TEXT NOT NULL,
    partition           INTEGER NOT NULL,
    committed_offset    INTEGER NOT NULL,
    leader_epoch        INTEGER NOT NULL,
    metadata            TEXT NOT NULL,
    commit_timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
) WITHOUT ROWID;
CREATE TABLE expected_members (
    group_id           TEXT PRIMARY KEY,
    group_instance_ids TEXT NOT NULL  -- JSON array of instance ids
);
CREATE TABLE journal (
    seq   INTEGER PRIMARY KEY,
    event TEXT NOT NULL               -- the compact JSON line, "seq" first, as written to the segments
);
"""


def prepare_data_dir(data_dir: Path) -> None:
    """Create the data dir if needed and check that it is a writable directory."""
    if data_dir.exists() and not data_dir.is_dir():
        raise StoreError(f"data dir {data_dir} is not a directory")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"data dir {data_dir} cannot be created: {exc.strerror or exc}") from exc
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise StoreError(f"data dir {data_dir} is not writable")


def lock_data_dir(data_dir: Path) -> tuple[int, IO[bytes]]:
    """Lock the data dir so that two coordinators never write one store; the kernel drops the locks on exit.

    The lock that counts is an ``flock`` on the directory itself, held through an open descriptor: deleting
    ``berth.lock`` (or anything else in the dir) cannot release it, and a directory in use cannot be removed.
    ``berth.lock`` is locked as well, so that a coordinator of an older Berth, which locks only that file, is
    still kept out during an upgrade. Returns both descriptors; ``release_data_dir`` closes them.
    """
    try:
        dir_fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise StoreError(f"data dir {data_dir} cannot be opened: {exc.strerror or exc}") from exc
    try:
        _flock_exclusive(dir_fd, data_dir)
        path = data_dir / LOCK_FILENAME
        try:
            handle = open(path, "ab")  # noqa: SIM115 - held open for the store's lifetime
        except OSError as exc:
            raise StoreError(f"data dir {data_dir} is not writable: {exc.strerror or exc}") from exc
        try:
            _flock_exclusive(handle.fileno(), data_dir)
        except BaseException:
            handle.close()
            raise
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, handle


def release_data_dir(lock: tuple[int, IO[bytes]]) -> None:
    """Close the descriptors ``lock_data_dir`` returned, which releases both locks (idempotent)."""
    dir_fd, handle = lock
    if not handle.closed:
        handle.close()
        os.close(dir_fd)


def _flock_exclusive(fd: int, data_dir: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise StoreError(f"data dir {data_dir} is in use by another Berth coordinator") from exc
    except OSError as exc:  # e.g. a filesystem without locks
        raise StoreError(f"data dir {data_dir} cannot be locked: {exc.strerror or exc}") from exc


def connect(db_path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any one thread at a time."""
    try:
        conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"database {db_path} cannot be opened: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"database {db_path} cannot use WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = FULL")
        # Checkpoint less often than the default 1000 pages: each checkpoint costs the committing batch extra
        # fsyncs, and group records are large.
        conn.execute("PRAGMA wal_autocheckpoint = 10000")
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"database {db_path} is not a usable SQLite database: {exc}") from exc
    except StoreError:
        conn.close()
        raise
    return conn


#: Problems the integrity check reports at most in its one line (the first is usually the telling one).
_PROBLEMS_SHOWN = 3


def check_integrity(conn: sqlite3.Connection, db_path: Path, mode: IntegrityCheck) -> None:
    """Refuse a database whose pages are damaged, before anything reads or writes it.

    ``quick`` is ``PRAGMA quick_check`` (every page and record, not the indexes' agreement with their tables),
    ``full`` is ``PRAGMA integrity_check``; both read the whole file once (docs/reliability.md has the cost).
    """
    if mode == "off":
        return
    pragma = "quick_check" if mode == "quick" else "integrity_check"
    try:
        problems = [row[0] for row in conn.execute(f"PRAGMA {pragma}({_PROBLEMS_SHOWN})")]
    except sqlite3.Error as exc:
        raise StoreError(f"database {db_path} failed its integrity check: {exc}") from exc
    if problems != ["ok"]:
        shown = "; ".join(" ".join(str(p).split()) for p in problems)
        raise StoreError(f"database {db_path} failed its integrity check ({shown}); restore it from a backup")


def ensure_schema(conn: sqlite3.Connection, db_path: Path) -> None:
    """Create the tables in a new file; check the schema version of an existing one."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                for statement in _TABLES.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise StoreError(f"database {db_path} is not a usable SQLite database: {exc}") from exc
    if "meta" not in tables and tables:
        raise StoreError(f"database {db_path} is not a Berth database (no meta table)")
    _check_version(conn, db_path)


def _check_version(conn: sqlite3.Connection, db_path: Path) -> None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"database {db_path} is not a usable SQLite database: {exc}") from exc
    try:
        version = int(row[0]) if row is not None else None
    except ValueError:
        version = None
    if version is None:
        raise StoreError(f"database {db_path} has no valid schema version")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"database {db_path} has schema version {version}, newer than this Berth supports ({SCHEMA_VERSION});"
            " upgrade Berth"
        )
    while version < SCHEMA_VERSION:
        migrate = MIGRATIONS.get(version)
        if migrate is None:
            raise StoreError(f"database {db_path} has unknown old schema version {version}")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                migrate(conn)
                version += 1
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"database {db_path} could not be migrated to schema version {version + 1}: {exc}"
            ) from exc


def _members_into_their_own_rows(conn: sqlite3.Connection) -> None:
    """1 -> 2: a group row held the whole group, members included; move each member into its own row."""
    conn.execute(
        "CREATE TABLE group_members (group_id TEXT NOT NULL, member_id TEXT NOT NULL, record TEXT NOT NULL,"
        " PRIMARY KEY (group_id, member_id)) WITHOUT ROWID"
    )
    for group_id, text in conn.execute("SELECT group_id, record FROM groups").fetchall():
        whole = json.loads(text)
        members = whole.pop("members", [])
        conn.execute("UPDATE groups SET record = ? WHERE group_id = ?", (json.dumps(whole), group_id))
        conn.executemany(
            "INSERT INTO group_members (group_id, member_id, record) VALUES (?, ?, ?)",
            [(group_id, member["member_id"], json.dumps(member)) for member in members],
        )


#: Schema version -> the migration from it to the next one, run inside one transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _members_into_their_own_rows}
