"""Turning a batch of the core's writes into the rows of one transaction (runs on the writer thread).

Rules:
- A write is all or nothing. One whose content cannot be stored (text that is not valid UTF-8, an integer
  outside SQLite's 64 bits, an event that is not JSON) is rejected alone, before the transaction, so a
  malformed request never fails its neighbours' writes.
- Within a batch the last record per key wins: group records are full snapshots, so only the last one per
  group is encoded and written; offsets and expected members collapse the same way. A tombstone is a delete.
- Journal events keep submission order. Each event is encoded here without ``seq``; ``number_events``
  splices the seq in first when the transaction knows where it starts, so a rolled-back batch costs no
  re-encoding and its seq numbers are simply reused.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.coordinator.core import ExpectedMembersRecord, GroupRecord, OffsetAndMetadata, OffsetRecord, Write

log = logging.getLogger(__name__)


def _bytes_as_base64(value: object) -> str:
    """The core hands byte fields over raw; on disk (and in the journal) they are standard base64."""
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False, default=_bytes_as_base64).encode  # ASCII
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

OffsetKey = tuple[str, str, int]


@dataclass(slots=True)
class PreparedBatch:
    """The rows of one transaction and the outcome of each write that went into it."""

    outcomes: list[tuple[int, bool]] = field(default_factory=list)  # (token, accepted) in submission order
    group_rows: list[tuple[str, str]] = field(default_factory=list)
    group_deletes: list[tuple[str]] = field(default_factory=list)
    offset_rows: list[tuple[str, str, int, int, int, str, int]] = field(default_factory=list)
    offset_deletes: list[OffsetKey] = field(default_factory=list)
    expected_rows: list[tuple[str, str]] = field(default_factory=list)
    expected_deletes: list[tuple[str]] = field(default_factory=list)
    event_bodies: list[str] = field(default_factory=list)  # encoded events without seq, in order

    @property
    def accepted_tokens(self) -> list[int]:
        return [token for token, accepted in self.outcomes if accepted]


def prepare_batch(writes: Sequence[Write]) -> PreparedBatch:
    batch = PreparedBatch()
    groups: dict[str, dict[str, Any] | None] = {}
    offsets: dict[OffsetKey, OffsetAndMetadata | None] = {}
    expected: dict[str, tuple[str, ...]] = {}
    for write in writes:
        try:
            bodies = [encode_event(event) for event in write.events]
            for record in write.records:
                check_storable(record)
        except (TypeError, ValueError, RecursionError) as exc:  # incl. UnicodeEncodeError, OverflowError
            log.error("store: rejected write %d, its content cannot be stored: %s", write.token, exc)
            batch.outcomes.append((write.token, False))
            continue
        for record in write.records:
            if isinstance(record, GroupRecord):
                groups[record.group_id] = record.value
            elif isinstance(record, OffsetRecord):
                offsets[(record.group_id, record.topic, record.partition)] = record.value
            else:
                expected[record.group_id] = record.group_instance_ids
        batch.event_bodies.extend(bodies)
        batch.outcomes.append((write.token, True))

    for group_id, value in groups.items():
        if value is None:
            batch.group_deletes.append((group_id,))
        else:
            batch.group_rows.append((group_id, _encode(value)))
    for key, offset in offsets.items():
        if offset is None:
            batch.offset_deletes.append(key)
        else:
            batch.offset_rows.append(
                (
                    *key,
                    offset.committed_offset,
                    offset.committed_leader_epoch,
                    offset.metadata,
                    offset.commit_timestamp_ms,
                )
            )
    for group_id, ids in expected.items():
        if ids:
            batch.expected_rows.append((group_id, _encode(list(ids))))
        else:
            batch.expected_deletes.append((group_id,))
    return batch


def encode_event(event: dict[str, Any]) -> str:
    """The event as compact JSON without ``seq`` (the store owns seq; a stray one is dropped)."""
    if "seq" in event:
        event = {k: v for k, v in event.items() if k != "seq"}
    return _encode(event)


def number_events(bodies: Sequence[str], first_seq: int) -> list[tuple[int, str]]:
    """Give the encoded events contiguous seq numbers from ``first_seq``: ``(seq, line)`` with "seq" first."""
    lines = []
    for seq, body in enumerate(bodies, first_seq):
        lines.append((seq, f'{{"seq":{seq},{body[1:]}' if len(body) > 2 else f'{{"seq":{seq}}}'))
    return lines


def check_storable(record: GroupRecord | OffsetRecord | ExpectedMembersRecord) -> None:
    """Raise ValueError for text SQLite cannot take as UTF-8 or integers beyond 64 bits."""
    _check_text(record.group_id)
    if isinstance(record, OffsetRecord):
        _check_text(record.topic)
        _check_int(record.partition)
        if record.value is not None:
            _check_text(record.value.metadata)
            _check_int(record.value.committed_offset)
            _check_int(record.value.committed_leader_epoch)
            _check_int(record.value.commit_timestamp_ms)


def _check_text(text: str) -> None:
    if not text.isascii():
        text.encode("utf-8")  # raises UnicodeEncodeError for lone surrogates (JSON "\ud800" decodes to one)


def _check_int(number: int) -> None:
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise ValueError(f"integer {number} does not fit in 64 bits")
