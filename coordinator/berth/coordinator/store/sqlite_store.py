"""``SqliteStore``: the coordinator's durable state in ``<data_dir>/berth.db`` plus the journal segments.

What it owns: opening (and refusing) a data dir, loading every record for replay, paging the journal, and
committing one prepared batch as one transaction. It does not own threading: ``GroupCommitWriter`` is the
only caller of ``commit_batch``, from its one thread.

Rules:
- Three connections, each used by one thread at a time: the writer's (``commit_batch``), a reader for
  ``journal_page`` from the event loop and for segment repair (serialized by a lock; WAL lets it read while
  the writer commits), and a short-lived one per ``load`` so a replay sees one consistent snapshot.
- Journal seq numbers are contiguous from 1. ``commit_batch`` numbers a batch's events from the last
  committed seq and advances that counter only once COMMIT returned, so a rolled-back batch's numbers are
  reused by the next one.
- Opening takes an exclusive lock on the data dir (an `flock` on the directory itself, so deleting
  `berth.lock` cannot release it) and reconciles the segments with the journal table.
- Every problem with the data dir surfaces as a one-line ``StoreError``; so does a journal row the coordinator could
  not serve (``check_journal_rows``, at open: the rows are read when they are served, not when the store loads).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import msgspec

from berth.coordinator.core import (
    ExpectedMembersRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetRecord,
    Record,
)
from berth.coordinator.protocol import GroupId, InstanceId
from berth.coordinator.store.batch import PreparedBatch, number_events
from berth.coordinator.store.config import StoreConfig
from berth.coordinator.store.errors import StoreError
from berth.coordinator.store.schema import (
    DB_FILENAME,
    check_integrity,
    connect,
    ensure_schema,
    lock_data_dir,
    prepare_data_dir,
    release_data_dir,
)
from berth.coordinator.store.segments import JournalSegments, SegmentsAheadError, holds_events

log = logging.getLogger(__name__)

JOURNAL_DIRNAME = "journal"

_UPSERT_GROUP = "INSERT OR REPLACE INTO groups (group_id, record) VALUES (?, ?)"
_DELETE_GROUP = "DELETE FROM groups WHERE group_id = ?"
_DELETE_GROUP_MEMBERS = "DELETE FROM group_members WHERE group_id = ?"
_UPSERT_MEMBER = "INSERT OR REPLACE INTO group_members (group_id, member_id, record) VALUES (?, ?, ?)"
_DELETE_MEMBER = "DELETE FROM group_members WHERE group_id = ? AND member_id = ?"
_decode_group = msgspec.json.Decoder(GroupMetadata).decode
_decode_member = msgspec.json.Decoder(MemberMetadata).decode
_decode_instance_ids = msgspec.json.Decoder(tuple[InstanceId, ...]).decode
_UPSERT_OFFSET = (
    "INSERT OR REPLACE INTO offsets (group_id, topic, partition, committed_offset, leader_epoch, metadata,"
    " commit_timestamp_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_OFFSET = "DELETE FROM offsets WHERE group_id = ? AND topic = ? AND partition = ?"
_UPSERT_EXPECTED = "INSERT OR REPLACE INTO expected_members (group_id, group_instance_ids) VALUES (?, ?)"
_DELETE_EXPECTED = "DELETE FROM expected_members WHERE group_id = ?"
_INSERT_EVENT = "INSERT INTO journal (seq, event) VALUES (?, ?)"
_PROBE_WRITE = "INSERT OR REPLACE INTO meta (key, value) VALUES ('write_probe', ?)"


_RESTORE_ADVICE = "restore {db} from a backup, or move the journal folder away to start with an empty store"


def refuse_a_lost_database(db_path: Path, journal_dir: Path) -> None:
    """A missing or empty database next to journal segments is history lost, not a fresh store: refuse it
    before SQLite creates an empty file in its place."""
    try:
        size = db_path.stat().st_size
    except FileNotFoundError:
        size = None
    except OSError:
        return  # connect() reports what is wrong with the file
    if (size is None or size == 0) and holds_events(journal_dir):
        state = "missing" if size is None else "empty"
        raise StoreError(
            f"database {db_path} is {state} but the journal segments in {journal_dir} hold history;"
            f" refusing to start ({_RESTORE_ADVICE.format(db=db_path)})"
        )


@dataclass(frozen=True, slots=True)
class JournalWindow:
    """A page of the journal (its events as JSON lines) and the journal's extent when the page was read."""

    lines: list[str]
    first: int  # the oldest retained seq (last + 1 when the journal is empty)
    last: int  # the newest seq (0 when nothing was ever journaled)


@dataclass(frozen=True, slots=True)
class JournalSize:
    """The journal against its bound, for ``/metrics`` (docs/api.md §10): read from memory, no scan."""

    bytes: int  # bytes of events retained (the segments' size: what --journal-retention-bytes bounds)
    retention_bytes: int  # the bound; 0: none
    oldest_ts_ms: int | None  # ts_ms of the oldest retained event; None when there is none


class SqliteStore:
    def __init__(
        self, data_dir: Path, config: StoreConfig | None = None, *, segment_max_events: int | None = None
    ) -> None:
        config = config or StoreConfig()
        if segment_max_events is not None:  # tests: small segments
            config = dataclasses.replace(config, segment_max_events=segment_max_events)
        self.config = config
        self.data_dir = Path(data_dir)
        self.db_path = self.data_dir / DB_FILENAME
        prepare_data_dir(self.data_dir)
        self._lock = lock_data_dir(self.data_dir)
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        journal_dir = self.data_dir / JOURNAL_DIRNAME
        try:
            refuse_a_lost_database(self.db_path, journal_dir)
            self._writer = connect(self.db_path)
            check_integrity(self._writer, self.db_path, config.integrity_check)
            ensure_schema(self._writer, self.db_path)
            check_journal_rows(self._writer, self.db_path)
            self._reader = connect(self.db_path)
            self._last_seq = self._query_last_seq()
            self._first_seq = self._query_first_seq()
            self.segments = JournalSegments(journal_dir, config.retention, self)
            self.segments.reconcile()
        except SegmentsAheadError as exc:
            self.close()
            raise StoreError(f"{exc}; refusing to start ({_RESTORE_ADVICE.format(db=self.db_path)})") from exc
        except OSError as exc:
            self.close()
            raise StoreError(f"journal segment dir {journal_dir} is unusable: {exc.strerror or exc}") from exc
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------------------------------ reading

    def load(self) -> Iterator[Record]:
        """Every record for replay: one whole-group record per group, then all offsets, then all expected-members
        lists. Fields a newer Berth added are ignored; fields an older one lacked get their defaults."""
        conn = connect(self.db_path)
        try:
            conn.execute("BEGIN")  # one read snapshot across the tables
            yield from self._records(conn, None)
        finally:
            conn.close()

    def load_group(self, group_id: GroupId) -> list[Record]:
        """One group's records, as ``load`` yields them (its reload after a failed write; safe beside the writer)."""
        conn = connect(self.db_path)
        try:
            conn.execute("BEGIN")
            return list(self._records(conn, group_id))
        finally:
            conn.close()

    def _records(self, conn: sqlite3.Connection, group_id: GroupId | None) -> Iterator[Record]:
        where, args = ("", ()) if group_id is None else (" WHERE group_id = ?", (group_id,))
        try:
            members = conn.execute(
                f"SELECT group_id, member_id, record FROM group_members{where} ORDER BY group_id, member_id", args
            )
            pending = next(members, None)
            for gid, text in conn.execute(f"SELECT group_id, record FROM groups{where} ORDER BY group_id", args):
                while pending is not None and pending[0] < gid:
                    pending = next(members, None)  # a member row without its group (cannot be written)
                own: list[MemberMetadata] = []
                while pending is not None and pending[0] == gid:
                    own.append(_decoded(_decode_member, pending[2], f"group {gid!r}, member {pending[1]!r}"))
                    pending = next(members, None)
                yield GroupRecord(GroupId(_text(gid)), _decoded(_decode_group, text, f"group {gid!r}"), tuple(own))
            for row in conn.execute(
                "SELECT group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_timestamp_ms"
                f" FROM offsets{where}",
                args,
            ):
                gid, topic, partition, offset, epoch, metadata, ts = _checked_offset_row(row)
                yield OffsetRecord(GroupId(gid), topic, partition, OffsetAndMetadata(offset, metadata, epoch, ts))
            for gid, text in conn.execute(f"SELECT group_id, group_instance_ids FROM expected_members{where}", args):
                ids = _decoded(_decode_instance_ids, text, f"expected members of group {gid!r}")
                yield ExpectedMembersRecord(GroupId(_text(gid)), ids)
        except (sqlite3.Error, ValueError, TypeError, msgspec.DecodeError) as exc:
            raise StoreError(f"database {self.db_path} cannot be read: {' '.join(str(exc).split())}") from exc

    def journal_page(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Events with seq > after, ascending, at most ``limit``; safe to call while the writer commits."""
        return [json.loads(line) for line in self.journal_lines(after, limit)]

    def journal_lines(self, after: int, limit: int, max_bytes: int | None = None) -> list[str]:
        """The same events as their JSON lines ("seq" first), as the segments hold them."""
        return self.journal_window(after, limit, max_bytes).lines

    def journal_window(self, after: int, limit: int, max_bytes: int | None = None) -> JournalWindow:
        """Events with seq > after as their JSON lines, at most ``limit`` and (but at least one) ``max_bytes``,
        with the oldest and newest seq of the journal as the same read snapshot saw them."""
        rows = self._read(_window_query, after, limit, max_bytes)
        (first, last), lines = rows[0], rows[1:]
        return JournalWindow(lines, first, last)

    def journal_lines_after(self, after: int) -> Iterator[tuple[int, str]]:
        """Every event with seq > after as (seq, line), in pages (used to reconcile the segments)."""
        page_size = 10_000
        while page := self._read(_page_query, after, page_size):
            yield from page
            after = page[-1][0]

    def journal_size(self) -> JournalSize:
        """Bytes retained, the bound and the oldest retained event's time; any thread, O(segments), no I/O."""
        retained, oldest_ts_ms = self.segments.extent()
        return JournalSize(retained, self.config.journal_retention_bytes or 0, oldest_ts_ms)

    def last_seq(self) -> int:
        """The seq of the last committed journal event (0 when the journal is empty)."""
        return self._last_seq

    def first_seq(self) -> int:
        """The seq of the oldest event retention kept (``last_seq() + 1`` when the journal is empty)."""
        return max(self._first_seq, 1) if self._last_seq else self._last_seq + 1

    # ------------------------------------------------------------------------------------------ writing

    def commit_batch(self, batch: PreparedBatch, before_commit: Callable[[], None]) -> list[tuple[int, str]]:
        """Write ``batch`` in one transaction; return its numbered journal lines. Writer thread only.

        ``before_commit`` runs inside the transaction just before COMMIT (the fault injection point). On any
        exception the transaction is rolled back and the exception propagates; nothing is numbered.
        """
        assert self._writer is not None, "store is closed"
        conn = self._writer
        lines = number_events(batch.event_bodies, self._last_seq + 1)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in (
                (_DELETE_GROUP, batch.group_deletes),
                (_DELETE_GROUP_MEMBERS, batch.group_deletes),
                (_DELETE_GROUP_MEMBERS, batch.member_clears),
                (_UPSERT_GROUP, batch.group_rows),
                (_DELETE_MEMBER, batch.member_deletes),
                (_UPSERT_MEMBER, batch.member_rows),
                (_UPSERT_OFFSET, batch.offset_rows),
                (_DELETE_OFFSET, batch.offset_deletes),
                (_UPSERT_EXPECTED, batch.expected_rows),
                (_DELETE_EXPECTED, batch.expected_deletes),
                (_INSERT_EVENT, lines),
            ):
                if rows:
                    conn.executemany(sql, rows)
            before_commit()
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise
        if lines:
            self._last_seq = lines[-1][0]
        return lines

    def trim_before(self, seq: int) -> None:
        """Delete the journal events before ``seq`` (retention; writer thread only), in one transaction."""
        assert self._writer is not None, "store is closed"
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM journal WHERE seq < ?", (seq,))
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise
        self._first_seq = max(self._first_seq, seq)

    def probe_write(self, before_commit: Callable[[], None]) -> None:
        """A transaction that writes one ``meta`` row and commits (fsync included): does the disk take writes?

        Writer thread only; raises what the transaction raised, after rolling it back."""
        assert self._writer is not None, "store is closed"
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_PROBE_WRITE, (str(self._last_seq),))
            before_commit()
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise

    # ------------------------------------------------------------------------------------------ closing

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and segments and release the data dir (idempotent); close the writer first."""
        if getattr(self, "segments", None) is not None:
            self.segments.close()
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = None
        release_data_dir(self._lock)

    # ---------------------------------------------------------------------------------------- internals

    def _query_last_seq(self) -> int:
        row = self._read(lambda conn: conn.execute("SELECT max(seq) FROM journal").fetchall())
        return int(row[0][0] or 0)

    def _query_first_seq(self) -> int:
        row = self._read(lambda conn: conn.execute("SELECT min(seq) FROM journal").fetchall())
        return int(row[0][0] or 0)

    def _read(self, query: Callable[..., list[Any]], *args: Any) -> list[Any]:
        with self._reader_lock:
            if self._reader is None:
                raise StoreError(f"store {self.data_dir} is closed")
            try:
                return query(self._reader, *args)
            except sqlite3.Error as exc:
                raise StoreError(f"database {self.db_path} cannot be read: {exc}") from exc


T = TypeVar("T")


def _decoded(decode: Callable[[Any], T], text: object, what: str) -> T:
    """``decode(text)``, or ValueError naming the record (``what``) and what is wrong with it."""
    try:
        return decode(text)
    except (msgspec.DecodeError, TypeError) as exc:
        raise ValueError(f"{what}: {exc}") from exc


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, found {type(value).__name__} {value!r:.40}")
    return value


def _integer(value: object) -> int:
    if not isinstance(value, int):
        raise ValueError(f"expected an integer, found {type(value).__name__} {value!r:.40}")
    return value


def _checked_offset_row(row: tuple[Any, ...]) -> tuple[str, str, int, int, int, str, int]:
    """An offsets row as the columns promise it, or ValueError (SQLite keeps whatever type was written)."""
    group_id, topic, partition, offset, epoch, metadata, ts = row
    return (
        _text(group_id),
        _text(topic),
        _integer(partition),
        _integer(offset),
        _integer(epoch),
        _text(metadata),
        _integer(ts),
    )


def _roll_back(conn: sqlite3.Connection) -> None:
    if not conn.in_transaction:  # SQLite already rolled back (some I/O errors do that)
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        log.error("store: rollback failed: %s", exc)


_JOURNAL_EXTENT = "SELECT count(*), min(seq), max(seq) FROM journal"
_JOURNAL_PROBLEM = """
SELECT seq, CASE
    WHEN typeof(event) != 'text' THEN 'is not text'
    WHEN substr(event, 1, 8 + length(seq)) != '{"seq":' || seq || ',' THEN 'does not start with its seq'
    WHEN NOT json_valid(event) THEN 'is not JSON'
END AS problem
FROM journal WHERE problem IS NOT NULL ORDER BY seq LIMIT 1
"""


def check_journal_rows(conn: sqlite3.Connection, db_path: Path) -> None:
    """Refuse a journal the coordinator could not serve (docs/api.md §10): seqs that are not contiguous from at least
    1 (retention only ever cuts the oldest), or a row that is not a JSON object as text starting with its own seq
    (what the journal's pages, the segments and their readers take it for). One pass in SQLite over the table; about
    a second for the 256 MiB the default retention keeps (docs/reliability.md)."""
    try:
        rows, first, last = conn.execute(_JOURNAL_EXTENT).fetchone()
        if rows and (first < 1 or last - first + 1 != rows):
            raise StoreError(
                f"database {db_path} cannot be read: its journal has {rows} events from seq {first} to {last},"
                " not one per seq; restore it from a backup"
            )
        problem = conn.execute(_JOURNAL_PROBLEM).fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"database {db_path} cannot be read: {' '.join(str(exc).split())}") from exc
    if problem is not None:
        seq, what = problem
        raise StoreError(f"database {db_path} cannot be read: journal event {seq} {what}; restore it from a backup")


def _window_query(conn: sqlite3.Connection, after: int, limit: int, max_bytes: int | None) -> list[Any]:
    """[(first, last), line, line, ...] in one read transaction; stops reading once ``max_bytes`` is reached."""
    conn.execute("BEGIN")
    try:
        first, last = conn.execute("SELECT min(seq), max(seq) FROM journal").fetchone()
        last = int(last or 0)
        window: list[Any] = [(int(first) if first is not None else last + 1, last)]
        total = 0
        for (line,) in conn.execute("SELECT event FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)):
            total += (len(line) if line.isascii() else len(line.encode())) + 1  # and the comma that joins it
            if max_bytes is not None and total > max_bytes and len(window) > 1:
                break
            window.append(line)
        return window
    finally:
        conn.execute("COMMIT")


def _page_query(conn: sqlite3.Connection, after: int, limit: int) -> list[tuple[int, str]]:
    return conn.execute("SELECT seq, event FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)).fetchall()
