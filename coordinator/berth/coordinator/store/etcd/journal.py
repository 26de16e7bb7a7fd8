"""The journal in etcd: its chunks, its index of segments and its retention (docs/api.md §8), as pure values.

Each transaction stores its journal lines as one chunk key (``keys``): the lines ``\\n``-joined, compressed with zlib
at level 1 since schema 2 (``encode_chunk``; a chunk is about a fifth of its lines' size, and etcd keeps every
version of it until compaction). A chunk a schema-1 Berth wrote is plain text, and ``decode_chunk`` reads both: a
plain chunk starts with its first line's ``{``, a zlib stream never does. The index, one small key rewritten by every
transaction that journals, groups the chunks into segments ``[first seq, last seq, events, bytes, first ts_ms,
last ts_ms]`` so that the active replica knows the journal's extent and size without reading it, and retention
can drop whole segments with one range delete. Rules (those of the SQLite store's segment files):

- A segment ends at a chunk boundary: a chunk goes whole into the newest segment unless that one already holds
  ``segment_max_events`` events or ``segment_max_bytes`` bytes, then it starts a new one.
- Retention drops the oldest segments, never the newest: while the journal holds more than ``max_bytes``, and
  while the oldest segment's last event is older than ``max_age_ms`` before the newest event.
- ``appended`` returns a new index; the writer stores it in the same transaction as the chunk and adopts it only
  once that transaction committed.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from berth.coordinator.store.segments import Retention, event_ts, retention_drops

Lines = Sequence[tuple[int, str]]
#: zlib's fastest level: the writer thread compresses one chunk per transaction, on the write's path.
CHUNK_LEVEL = 1


def encode_chunk(lines: Lines) -> bytes:
    """A chunk key's value: the lines, compressed."""
    return zlib.compress("\n".join(line for _, line in lines).encode(), CHUNK_LEVEL)


def decode_chunk(value: bytes) -> list[str]:
    """A chunk's lines, compressed (schema 2) or plain (schema 1); ValueError when it is neither."""
    try:
        text = value.decode() if value[:1] == b"{" else zlib.decompress(value).decode()
    except (zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"a journal chunk that is not one: {exc}") from exc
    return text.split("\n")


@dataclass(frozen=True, slots=True)
class Segment:
    first: int
    last: int
    events: int
    bytes: int
    first_ts: int | None
    last_ts: int | None


@dataclass(frozen=True, slots=True)
class JournalIndex:
    segments: tuple[Segment, ...] = ()
    #: The newest seq ever journaled (kept when retention empties nothing: the newest segment always stays).
    last: int = 0

    @property
    def first(self) -> int:
        """The oldest retained seq; ``last + 1`` when the journal is empty."""
        return self.segments[0].first if self.segments else self.last + 1

    @property
    def size(self) -> int:
        """Bytes of events retained."""
        return sum(s.bytes for s in self.segments)

    @property
    def oldest_ts_ms(self) -> int | None:
        return next((s.first_ts for s in self.segments if s.first_ts is not None), None)

    def appended(self, lines: Lines, retention: Retention) -> tuple[JournalIndex, int | None]:
        """The index after a chunk of ``lines`` and retention: (new index, first seq kept when segments were dropped,
        else None). ``lines`` are contiguous from ``last + 1``."""
        if not lines:
            return self, None
        size = sum(len(line.encode()) + 1 for _, line in lines)
        first_ts, last_ts = event_ts(lines[0][1]), event_ts(lines[-1][1])
        segments = list(self.segments)
        newest = segments[-1] if segments else None
        if (
            newest is None
            or newest.events >= retention.segment_max_events
            or newest.bytes >= retention.segment_max_bytes
        ):
            segments.append(Segment(lines[0][0], lines[-1][0], len(lines), size, first_ts, last_ts))
        else:
            segments[-1] = replace(
                newest,
                last=lines[-1][0],
                events=newest.events + len(lines),
                bytes=newest.bytes + size,
                first_ts=newest.first_ts if newest.first_ts is not None else first_ts,
                last_ts=last_ts,
            )
        dropped = retention_drops([(s.bytes, s.last_ts) for s in segments], retention)
        kept = tuple(segments[dropped:])
        return JournalIndex(kept, lines[-1][0]), (kept[0].first if dropped else None)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "last": self.last,
                "segments": [[s.first, s.last, s.events, s.bytes, s.first_ts, s.last_ts] for s in self.segments],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> JournalIndex:
        """The stored index; ValueError when it is not one."""
        try:
            raw = json.loads(data)
            segments = tuple(
                Segment(int(first), int(last), int(events), int(size), _opt_int(first_ts), _opt_int(last_ts))
                for first, last, events, size, first_ts, last_ts in raw["segments"]
            )
            return cls(segments, int(raw["last"]))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"the journal index is not readable: {exc}") from exc


def _opt_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
