"""Turning a batch of the core's writes into the rows of one transaction (runs on the writer thread).

Rules:
- A write is all or nothing. One whose content cannot be stored (text that is not valid UTF-8, an integer
  outside SQLite's 64 bits, an event that is not JSON) is rejected alone, before the transaction, so a
  malformed request never fails its neighbours' writes.
- Within a batch the records of one group fold in order: a whole-group record replaces the group's row and
  every member row, a delta replaces the group's row and upserts or deletes the member rows it names, a
  tombstone deletes them all. Only the result is encoded and written. Offsets and expected members collapse
  to the last record per key. A tombstone is a delete.
- Journal events keep submission order. Each event is encoded here without ``seq``; ``number_events``
  splices the seq in first when the transaction knows where it starts, so a rolled-back batch costs no
  re-encoding and its seq numbers are simply reused.
- Records and events are encoded with msgspec (bytes as base64): the writer thread holds the interpreter lock
  while it encodes, so encoding is kept cheap and proportional to what changed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from berth.coordinator.core import (
    GroupDeltaRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetRecord,
    Record,
    Write,
)
from berth.coordinator.formats.journal import JournalEvent

log = logging.getLogger(__name__)

_encode = msgspec.json.Encoder().encode
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

OffsetKey = tuple[str, str, int]


@dataclass(slots=True)
class _GroupChange:
    """What one batch does to one group: its row, and whether it replaces or patches the member rows."""

    value: GroupMetadata | None
    replace_members: bool
    members: dict[str, MemberMetadata | None]  # member id -> new row, None: delete


@dataclass(slots=True)
class PreparedBatch:
    """The rows of one transaction and the outcome of each write that went into it."""

    outcomes: list[tuple[int, bool]] = field(default_factory=list)  # (token, accepted) in submission order
    group_rows: list[tuple[str, str]] = field(default_factory=list)
    group_deletes: list[tuple[str]] = field(default_factory=list)  # the group row and all its member rows
    member_clears: list[tuple[str]] = field(default_factory=list)  # all member rows of a group (then re-added)
    member_rows: list[tuple[str, str, str]] = field(default_factory=list)
    #: (group, member id) -> group.instance.id of each static member in ``member_rows`` (where etcd keys it)
    instances: dict[tuple[str, str], str] = field(default_factory=dict)
    member_deletes: list[tuple[str, str]] = field(default_factory=list)
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
    groups: dict[str, _GroupChange] = {}
    offsets: dict[OffsetKey, OffsetAndMetadata | None] = {}
    expected: dict[str, tuple[str, ...]] = {}
    for write in writes:
        try:
            bodies = [encode_event(event) for event in write.events]
            check_storable(write.records)
        except (TypeError, ValueError, RecursionError, msgspec.EncodeError) as exc:  # incl. UnicodeEncodeError
            log.error("store: rejected write %d, its content cannot be stored: %s", write.token, exc)
            batch.outcomes.append((write.token, False))
            continue
        for record in write.records:
            if isinstance(record, GroupRecord):
                groups[record.group_id] = _GroupChange(
                    record.value, True, {m.member_id: m for m in record.members} if record.value else {}
                )
            elif isinstance(record, GroupDeltaRecord):
                change = groups.setdefault(record.group_id, _GroupChange(record.value, False, {}))
                change.value = record.value
                for member_id in record.removed:
                    change.members[member_id] = None
                for member in record.upserted:
                    change.members[member.member_id] = member
            elif isinstance(record, OffsetRecord):
                offsets[(record.group_id, record.topic, record.partition)] = record.value
            else:
                expected[record.group_id] = record.group_instance_ids
        batch.event_bodies.extend(bodies)
        batch.outcomes.append((write.token, True))

    for group_id, change in groups.items():
        if change.value is None:
            batch.group_deletes.append((group_id,))
            continue
        batch.group_rows.append((group_id, _encode(change.value).decode()))
        if change.replace_members:
            batch.member_clears.append((group_id,))
        for changed_id, row in change.members.items():
            if row is None:
                if not change.replace_members:
                    batch.member_deletes.append((group_id, changed_id))
            else:
                batch.member_rows.append((group_id, changed_id, _encode(row).decode()))
                if row.group_instance_id is not None:
                    batch.instances[(group_id, changed_id)] = row.group_instance_id
    for key, offset in offsets.items():
        if offset is None:
            batch.offset_deletes.append(key)
        else:
            batch.offset_rows.append(
                (
                    *key,
                    offset.offset,
                    -1 if offset.leader_epoch is None else offset.leader_epoch,
                    offset.metadata or "",
                    offset.commit_timestamp_ms,
                )
            )
    for group_id, ids in expected.items():
        if ids:
            batch.expected_rows.append((group_id, _encode(list(ids)).decode()))
        else:
            batch.expected_deletes.append((group_id,))
    return batch


def encode_event(event: JournalEvent) -> str:
    """The event as compact JSON without ``seq`` (the store owns seq; a stray one is dropped)."""
    if "seq" in event:
        return _encode({k: v for k, v in event.items() if k != "seq"}).decode()
    return _encode(event).decode()


def number_events(bodies: Sequence[str], first_seq: int) -> list[tuple[int, str]]:
    """Give the encoded events contiguous seq numbers from ``first_seq``: ``(seq, line)`` with "seq" first."""
    lines = []
    for seq, body in enumerate(bodies, first_seq):
        lines.append((seq, f'{{"seq":{seq},{body[1:]}' if len(body) > 2 else f'{{"seq":{seq}}}'))
    return lines


def check_storable(records: Sequence[Record]) -> None:
    """Raise ValueError for text SQLite cannot take as UTF-8 or integers beyond 64 bits in any of ``records``.

    One pass gathers the distinct texts and the integers, then each text is checked once and the integers by
    their extremes: a commit of many partitions repeats its group, topic and metadata in every record, and the
    writer thread holds the interpreter lock while it checks.
    """
    texts: set[str] = set()
    numbers: list[int] = []
    for record in records:
        texts.add(record.group_id)
        if isinstance(record, OffsetRecord):
            texts.add(record.topic)
            numbers.append(record.partition)
            value = record.value
            if value is not None:
                if value.metadata:
                    texts.add(value.metadata)
                numbers.append(value.offset)
                numbers.append(value.commit_timestamp_ms)
                if value.leader_epoch is not None:
                    numbers.append(value.leader_epoch)
    for text in texts:
        if not text.isascii():
            text.encode("utf-8")  # raises UnicodeEncodeError for lone surrogates (JSON "\ud800" decodes to one)
    if numbers and (min(numbers) < _INT64_MIN or max(numbers) > _INT64_MAX):
        number = next(n for n in numbers if not _INT64_MIN <= n <= _INT64_MAX)
        raise ValueError(f"integer {number} does not fit in 64 bits")
