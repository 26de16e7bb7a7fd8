"""The journal's JSON Lines segment files under ``<data_dir>/journal/`` (docs/formats.md, "Journal events").

Rules:
- A segment is ``segment-<first seq, 20 digits>.jsonl``: one event per line, exactly the JSON text the
  journal table holds ("seq" first), each line ended by a newline. A segment holds ``max_events`` events,
  then the next one starts, so a batch may straddle two segments.
- Segments are flushed to the OS after each append but never fsynced: SQLite is the source of truth and
  segments are derived from it.
- ``reconcile`` makes the segments equal to the journal table again, whatever a crash left: it cuts a torn
  (or unreadable) tail, drops segments left empty, and appends every event the segments miss. It runs when
  the store opens and after an append failed (disk full), so a failed append never loses events for good.
- Segments are written only after their events committed, so they are never ahead of the table. When they
  are (the database was lost, emptied or restored from an older copy), the segments are the only record of
  that history: ``reconcile`` refuses (``SegmentsAheadError``) and never cuts a complete event.
- Only the writer thread appends (after each commit); readers may see the newest segment grow.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Protocol

log = logging.getLogger(__name__)

SEGMENT_PREFIX = "segment-"
SEGMENT_SUFFIX = ".jsonl"
_RECONCILE_CHUNK = 10_000

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

    def journal_lines_after(self, after: int) -> Iterable[tuple[int, str]]:
        """Every event with seq > after, ascending, as (seq, line)."""
        ...


def segment_name(first_seq: int) -> str:
    return f"{SEGMENT_PREFIX}{first_seq:020d}{SEGMENT_SUFFIX}"


def segment_paths(directory: Path) -> list[Path]:
    """The segment files in seq order (zero-padded names sort numerically)."""
    paths = []
    for path in directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
        digits = path.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)]
        if len(digits) == 20 and digits.isdigit():
            paths.append(path)
    return sorted(paths)


class JournalSegments:
    def __init__(self, directory: Path, max_events: int, table: JournalTable) -> None:
        if max_events < 1:
            raise ValueError("segment_max_events must be at least 1")
        self.directory = directory
        self.max_events = max_events
        self._table = table
        self._file: IO[bytes] | None = None
        self._current: Path | None = None  # the newest segment
        self._count = 0  # events in the newest segment
        self._last_seq = 0  # the last seq the segments hold
        self._needs_reconcile = True

    def append(self, lines: EventLines) -> None:
        """Append a committed transaction's events; a failure is logged and repaired on the next append."""
        try:
            if self._needs_reconcile:
                self.reconcile()  # also covers ``lines``: they are already in the journal table
            else:
                self._write(lines)
        except Exception as exc:  # disk full, I/O error, or the table unreadable while repairing
            log.error("store: journal segment append failed (repaired on the next commit): %s", exc)
            self._needs_reconcile = True
            self._close_file()

    def reconcile(self) -> None:
        """Make the segments hold exactly the journal table's events (see the module rules)."""
        self._close_file()
        self.directory.mkdir(parents=True, exist_ok=True)
        paths = segment_paths(self.directory)
        self._current, self._count, self._last_seq = None, 0, 0
        table_last_seq = self._table.last_seq()
        while paths:
            kept = _trim_tail(paths[-1], table_last_seq)
            if kept is None:
                paths.pop().unlink()
                continue
            self._current = paths[-1]
            self._last_seq, self._count = kept
            break
        chunk: list[tuple[int, str]] = []
        for line in self._table.journal_lines_after(self._last_seq):
            chunk.append(line)
            if len(chunk) == _RECONCILE_CHUNK:
                self._write(chunk)
                chunk = []
        self._write(chunk)
        self._needs_reconcile = False

    def close(self) -> None:
        self._close_file()

    # ------------------------------------------------------------------------------------------ writing

    def _write(self, lines: EventLines) -> None:
        start = 0
        while start < len(lines):
            if self._file is None or self._count >= self.max_events:
                self._open_for(lines[start][0])
            assert self._file is not None
            end = min(len(lines), start + self.max_events - self._count)
            self._file.write("".join(line + "\n" for _, line in lines[start:end]).encode())
            self._file.flush()
            self._count += end - start
            self._last_seq = lines[end - 1][0]
            start = end

    def _open_for(self, first_seq: int) -> None:
        self._close_file()
        if self._current is None or self._count >= self.max_events:
            self._current, self._count = self.directory / segment_name(first_seq), 0
        self._file = open(self._current, "ab")  # noqa: SIM115 - kept open across appends

    def _close_file(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                log.error("store: closing a journal segment failed: %s", exc)
            self._file = None


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
