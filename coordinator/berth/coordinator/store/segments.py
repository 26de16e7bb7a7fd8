"""The journal's JSON Lines segment files under ``<data_dir>/journal/`` (docs/formats.md, "Journal events"), and
the journal's retention.

Rules:
- A segment is ``segment-<first seq, 20 digits>.jsonl``: one event per line, exactly the JSON text the
  journal table holds ("seq" first), each line ended by a newline. A segment holds at most ``max_events``
  events and about ``max_bytes`` bytes (the line that reaches it is the last), then the next one starts, so a
  batch may straddle two segments.
- Segments are flushed to the OS after each append but never fsynced: SQLite is the source of truth and
  segments are derived from it.
- ``reconcile`` makes the segments equal to the journal table again, whatever a crash left: it cuts a torn
  (or unreadable) tail, drops segments left empty and segments older than the table's first event, and appends
  every event the segments miss. It runs when the store opens and after an append failed (disk full), so a
  failed append never loses events for good.
- Segments are written only after their events committed, so they are never ahead of the table. When they
  are (the database was lost, emptied or restored from an older copy), the segments are the only record of
  that history: ``reconcile`` refuses (``SegmentsAheadError``) and never cuts a complete event.
- Retention (``Retention``) drops whole segments, oldest first, never the newest: while the segments hold more
  than ``max_bytes``, and while the oldest one's last event is older than ``max_age_ms`` before the newest event
  (the journal's own clock, so the manual clock drives it in tests). The table's events before the first kept
  segment are deleted first, then the files, so a crash in between leaves only files that ``reconcile`` drops.
- Only the writer thread appends (after each commit) and applies retention; readers may see the newest segment
  grow and the oldest disappear. ``extent`` (the metrics' view: bytes kept, the oldest kept event's ``ts_ms``) reads
  what the writer keeps in memory for each segment, never the files or the table.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

log = logging.getLogger(__name__)

SEGMENT_PREFIX = "segment-"
SEGMENT_SUFFIX = ".jsonl"
_RECONCILE_CHUNK = 10_000
_TS_FIELD = '"ts_ms":'

EventLines = Sequence[tuple[int, str]]  # (seq, JSON line without its newline)


class SegmentsAheadError(Exception):
    """The segments hold events the journal table does not: the database lost history (never cut them)."""

    def __init__(self, path: Path, segment_seq: int, table_seq: int) -> None:
        super().__init__(
            f"journal segment {path} holds events up to seq {segment_seq} but the database only up to seq"
            f" {table_seq}: the database lost history (missing, emptied or restored from an older copy)"
        )
        self.path = path
        self.segment_seq = segment_seq
        self.table_seq = table_seq


def holds_events(directory: Path) -> bool:
    """Whether the folder has a segment with at least one byte in it (a missing folder has none)."""
    try:
        return any(path.stat().st_size > 0 for path in segment_paths(directory))
    except OSError:
        return False


class JournalTable(Protocol):
    """The source of truth the segments are reconciled against (the store's journal table)."""

    def last_seq(self) -> int: ...

    def first_seq(self) -> int:
        """The oldest event's seq (``last_seq() + 1`` when the table is empty)."""
        ...

    def journal_lines_after(self, after: int) -> Iterable[tuple[int, str]]:
        """Every event with seq > after, ascending, as (seq, line)."""
        ...

    def trim_before(self, seq: int) -> None:
        """Delete every event with a seq below ``seq`` (retention); raises when it could not."""
        ...


@dataclass(frozen=True, slots=True)
class Retention:
    """How much journal to keep (``None``: no bound) and how big a segment grows."""

    max_bytes: int | None = None
    max_age_ms: int | None = None
    segment_max_events: int = 100_000
    segment_max_bytes: int = 16 * 2**20

    def __post_init__(self) -> None:
        if self.segment_max_events < 1 or self.segment_max_bytes < 1:
            raise ValueError("segments must hold at least one event and one byte")


@dataclass(slots=True)
class _Segment:
    path: Path
    first_seq: int
    last_seq: int  # 0 while it holds no event
    events: int
    bytes: int
    last_ts_ms: int | None  # the ts_ms of its last event, None when unknown
    first_ts_ms: int | None = None  # the ts_ms of its first event, None when unknown or empty


def segment_name(first_seq: int) -> str:
    return f"{SEGMENT_PREFIX}{first_seq:020d}{SEGMENT_SUFFIX}"


def _first_seq_of(path: Path) -> int:
    return int(path.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)])


def segment_paths(directory: Path) -> list[Path]:
    """The segment files in seq order (zero-padded names sort numerically)."""
    paths = []
    for path in directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
        digits = path.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)]
        if len(digits) == 20 and digits.isdigit():
            paths.append(path)
    return sorted(paths)


class JournalSegments:
    def __init__(self, directory: Path, retention: Retention | int, table: JournalTable) -> None:
        if isinstance(retention, int):  # a segment size in events, no retention (older callers, tests)
            retention = Retention(segment_max_events=retention)
        self.directory = directory
        self.retention = retention
        self._table = table
        self._file: IO[bytes] | None = None
        self._segments: list[_Segment] = []  # oldest first; the last one is appended to
        self._needs_reconcile = True

    @property
    def max_events(self) -> int:
        return self.retention.segment_max_events

    @property
    def total_bytes(self) -> int:
        """Bytes in every segment: what retention bounds."""
        return sum(segment.bytes for segment in self._segments)

    def extent(self) -> tuple[int, int | None]:
        """(bytes kept, the oldest kept event's ``ts_ms`` or None when there is none): from the writer's own record
        of each segment, so any thread may ask, at the cost of a few additions (the segments are few)."""
        segments = list(self._segments)  # a copy taken at once: the writer may drop or add one meanwhile
        oldest = next((s.first_ts_ms for s in segments if s.first_ts_ms is not None), None)
        return sum(segment.bytes for segment in segments), oldest

    def append(self, lines: EventLines) -> None:
        """Append a committed transaction's events, then apply retention; a failure is logged and repaired on
        the next append."""
        try:
            if self._needs_reconcile:
                self.reconcile()  # also covers ``lines``: they are already in the journal table
            else:
                self._write(lines)
                self._retain()
        except Exception as exc:  # disk full, I/O error, or the table unreadable while repairing
            log.error("store: journal segment append failed (repaired on the next commit): %s", exc)
            self._needs_reconcile = True
            self._close_file()

    def reconcile(self) -> None:
        """Make the segments hold exactly the journal table's events (see the module rules)."""
        self._close_file()
        self.directory.mkdir(parents=True, exist_ok=True)
        paths = segment_paths(self.directory)
        self._segments = []
        table_last_seq = self._table.last_seq()
        newest: tuple[int, int] | None = None
        while paths:
            newest = _trim_tail(paths[-1], table_last_seq)
            if newest is not None:
                break
            paths.pop().unlink()
        table_first_seq = self._table.first_seq()
        for path in paths:
            last_seq, last_ts = _last_event(path)
            if last_seq is None or last_seq < table_first_seq:
                path.unlink()  # retention deleted its events from the table before a crash stopped it here
                continue
            events = newest[1] if path == paths[-1] and newest is not None else 0
            self._segments.append(
                _Segment(path, _first_seq_of(path), last_seq, events, path.stat().st_size, last_ts, _first_ts(path))
            )
        after = self._segments[-1].last_seq if self._segments else 0
        chunk: list[tuple[int, str]] = []
        for line in self._table.journal_lines_after(after):
            chunk.append(line)
            if len(chunk) == _RECONCILE_CHUNK:
                self._write(chunk)
                chunk = []
        self._write(chunk)
        self._needs_reconcile = False
        self._retain()

    def close(self) -> None:
        self._close_file()

    # ------------------------------------------------------------------------------------------ writing

    def _write(self, lines: EventLines) -> None:
        retention = self.retention
        buffered: list[bytes] = []
        for seq, line in lines:
            current = self._segments[-1] if self._segments else None
            if (
                current is None
                or current.events >= retention.segment_max_events
                or current.bytes >= retention.segment_max_bytes
            ):
                self._flush(buffered)
                current = self._start_segment(seq)
            data = (line + "\n").encode()
            buffered.append(data)
            current.events += 1
            current.bytes += len(data)
            current.last_seq = seq
            current.last_ts_ms = event_ts(line)
            if current.first_ts_ms is None:
                current.first_ts_ms = current.last_ts_ms
        self._flush(buffered)

    def _flush(self, buffered: list[bytes]) -> None:
        if not buffered:
            return
        if self._file is None:
            self._file = open(self._segments[-1].path, "ab")  # noqa: SIM115 - kept open across appends
        self._file.write(b"".join(buffered))
        self._file.flush()
        buffered.clear()

    def _start_segment(self, first_seq: int) -> _Segment:
        self._close_file()
        segment = _Segment(self.directory / segment_name(first_seq), first_seq, 0, 0, 0, None)
        self._segments.append(segment)
        return segment

    def _close_file(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                log.error("store: closing a journal segment failed: %s", exc)
            self._file = None

    # ---------------------------------------------------------------------------------------- retention

    def _retain(self) -> None:
        """Drop the oldest segments beyond the byte and age bounds (see the module rules)."""
        segments = self._segments
        dropped = retention_drops([(s.bytes, s.last_ts_ms) for s in segments], self.retention)
        if not dropped:
            return
        first_kept = segments[dropped].first_seq
        self._table.trim_before(first_kept)
        for segment in segments[:dropped]:
            segment.path.unlink(missing_ok=True)
        del segments[:dropped]
        log.info("store: journal retention dropped the events before seq %d (%d segments)", first_kept, dropped)


def retention_drops(segments: Sequence[tuple[int, int | None]], retention: Retention) -> int:
    """How many of the oldest segments retention drops, given each one's (bytes, ts_ms of its last event), oldest
    first: while they hold more than ``max_bytes``, and while the oldest one's last event is older than
    ``max_age_ms`` before the newest event; never the newest segment. (The SQLite store's segment files and the
    etcd store's index both keep their journal by this rule.)"""
    if len(segments) < 2 or (retention.max_bytes is None and retention.max_age_ms is None):
        return 0
    newest_ts = segments[-1][1]
    remaining = sum(size for size, _ in segments)
    dropped = 0
    while dropped < len(segments) - 1:
        size, last_ts = segments[dropped]
        too_big = retention.max_bytes is not None and remaining > retention.max_bytes
        too_old = (
            retention.max_age_ms is not None
            and newest_ts is not None
            and last_ts is not None
            and last_ts < newest_ts - retention.max_age_ms
        )
        if not (too_big or too_old):
            break
        remaining -= size
        dropped += 1
    return dropped


def event_ts(line: str) -> int | None:
    """The event's ``ts_ms``, found without parsing the line (the core writes it right after ``seq``)."""
    start = line.find(_TS_FIELD)
    if start < 0:
        return None
    start += len(_TS_FIELD)
    end = start
    while end < len(line) and (line[end].isdigit() or (end == start and line[end] == "-")):
        end += 1
    try:
        return int(line[start:end])
    except ValueError:
        return None


def _first_ts(path: Path) -> int | None:
    """The ``ts_ms`` of the segment's first event (its first line only is read)."""
    with path.open("rb") as f:
        return event_ts(f.readline().decode(errors="replace"))


def _last_event(path: Path) -> tuple[int | None, int | None]:
    """(seq, ts_ms) of the segment's last complete line, read from its end."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        chunk = 4096
        while True:
            start = max(0, size - chunk)
            f.seek(start)
            data = f.read(size - start)
            end = data.rfind(b"\n")
            begin = data.rfind(b"\n", 0, end) + 1 if end > 0 else 0
            if begin > 0 or start == 0:
                line = data[begin:end] if end >= 0 else b""
                text = line.decode(errors="replace")
                return _seq_of(line), event_ts(text)
            chunk *= 4


def _trim_tail(path: Path, table_last_seq: int) -> tuple[int, int] | None:
    """Cut the segment's torn or unreadable tail: its (last seq, event count), None if nothing readable is left.

    Raises ``SegmentsAheadError`` when its last readable event is one the table does not have.
    """
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1  # everything after the last newline is a torn line
    last_seq = None
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        last_seq = _seq_of(data[start : end - 1])
        if last_seq is not None:
            break
        end = start
    if last_seq is not None and last_seq > table_last_seq:
        raise SegmentsAheadError(path, last_seq, table_last_seq)
    if end != len(data):
        log.warning("store: cut %d bytes from the end of journal segment %s", len(data) - end, path.name)
        os.truncate(path, end)
    if last_seq is None or end == 0:
        return None
    return last_seq, data.count(b"\n", 0, end)


def _seq_of(line: bytes) -> int | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    seq = event.get("seq") if isinstance(event, dict) else None
    return seq if isinstance(seq, int) else None
