"""One etcd transaction from a run of the core's writes (runs on the writer thread; no I/O).

``build`` folds the writes as the SQLite store does (``batch.prepare_batch``: a write whose content cannot be stored
is rejected alone; the records of one key collapse to the last), numbers their journal events from the journal's
last seq, and turns the rows into etcd operations (the layout is ``keys``'). What it returns is adopted by the
writer only when the transaction committed: the groups' new member epochs and the journal's new index.

Limits: etcd refuses a transaction of more than ``--max-txn-ops`` operations or ``--max-request-bytes`` bytes.
``Limits`` is what the writer may use of them (a few operations and bytes are kept for its own fencing compares,
the progress key and the journal index). ``Built.size`` says what a built transaction needs; the writer splits a
run of writes that does not fit, and refuses alone a single write that cannot fit (``oversized``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.coordinator.core import Write
from berth.coordinator.store.batch import PreparedBatch, number_events, prepare_batch
from berth.coordinator.store.etcd.client import prefix_end
from berth.coordinator.store.etcd.journal import JournalIndex, encode_chunk
from berth.coordinator.store.etcd.keys import Keys, member_slot
from berth.coordinator.store.etcd.slots import GroupSlots, SlotChanges
from berth.coordinator.store.segments import Retention

Op = dict[str, Any]
TopicKey = tuple[str, str]  # (group id, topic)
TopicOffsets = dict[int, tuple[int, int, str, int]]  # partition -> (offset, leader epoch, metadata, commit ts)

_decode_topic = msgspec.json.Decoder(TopicOffsets).decode
_encode_topic = msgspec.json.Encoder().encode

#: Operations and bytes a transaction keeps for what the writer adds (compares, progress, index, retention).
RESERVED_OPS = 8
RESERVED_BYTES = 64 * 1024
#: What etcd adds per operation in its request (field tags and lengths): a generous bound.
OP_OVERHEAD_BYTES = 24


@dataclass(frozen=True, slots=True)
class Limits:
    max_txn_ops: int = 128  # etcd's defaults; the chart raises both (docs/high-availability.md)
    max_request_bytes: int = 1_572_864

    def fits(self, ops: int, size: int) -> bool:
        return ops <= self.max_txn_ops - RESERVED_OPS and size <= self.max_request_bytes - RESERVED_BYTES


@dataclass(slots=True)
class Built:
    """A transaction's operations and what it changes when it commits."""

    outcomes: list[tuple[int, bool]]  # (token, accepted) in submission order
    ops: list[Op] = field(default_factory=list)
    size: int = 0  # bytes of keys and values, plus overhead
    lines: list[tuple[int, str]] = field(default_factory=list)  # numbered journal lines
    epochs: dict[str, int | None] = field(default_factory=dict)  # group id -> new member epoch (None: gone)
    slots: dict[str, SlotChanges | None] = field(default_factory=dict)  # group id -> its members' keys (None: gone)
    topics: dict[TopicKey, bytes | None] = field(default_factory=dict)  # a topic's offsets key's new value
    index: JournalIndex | None = None  # the journal's index after it (None: unchanged)

    @property
    def accepted(self) -> bool:
        return any(ok for _, ok in self.outcomes)

    def put(self, key: bytes, value: bytes) -> None:
        self.ops.append({"request_put": {"key": key, "value": value}})  # bytes: base64 when encoded (client)
        self.size += len(key) + len(value) + OP_OVERHEAD_BYTES

    def delete(self, key: bytes, range_end: bytes | None = None) -> None:
        body = {"key": key}
        if range_end is not None:
            body["range_end"] = range_end
        self.ops.append({"request_delete_range": body})
        self.size += len(key) + len(range_end or b"") + OP_OVERHEAD_BYTES


def build(
    writes: Sequence[Write],
    keys: Keys,
    epochs: Mapping[str, int],
    index: JournalIndex,
    retention: Retention,
    topics: Mapping[TopicKey, bytes],
    slots: Mapping[str, GroupSlots],
) -> Built:
    """The transaction of ``writes`` over the stored state the writer knows: the groups' member ``epochs``, the
    journal's ``index``, the ``topics``' committed offsets (their keys' values) and which key holds each stored
    member (``slots``)."""
    batch = prepare_batch(writes)
    built = Built(batch.outcomes)
    if not built.accepted:
        return built
    _rows(built, batch, keys, epochs, topics)
    _members(built, batch, keys, epochs, slots)
    lines = number_events(batch.event_bodies, index.last + 1)
    if lines:
        built.lines = lines
        built.put(keys.journal_chunk(lines[0][0]), encode_chunk(lines))
        new_index, first_kept = index.appended(lines, retention)
        if first_kept is not None:
            built.delete(keys.journal_chunk(0), keys.journal_chunk(first_kept))
        built.put(keys.journal_index, new_index.encode())
        built.index = new_index
    return built


def _rows(
    built: Built, batch: PreparedBatch, keys: Keys, epochs: Mapping[str, int], topics: Mapping[TopicKey, bytes]
) -> None:
    for (group_id,) in batch.group_deletes:
        built.delete(keys.group(group_id))
        prefix = keys.group_members(group_id)
        built.delete(prefix, prefix_end(prefix))
        built.epochs[group_id] = None
        built.slots[group_id] = None
    for (group_id,) in batch.member_clears:
        old = epochs.get(group_id, 0)
        prefix = keys.epoch_members(group_id, old)
        built.delete(prefix, prefix_end(prefix))
        built.epochs[group_id] = old + 1
        built.slots[group_id] = SlotChanges(None, reset=True)
    for group_id, record in batch.group_rows:
        built.put(keys.group(group_id), record.encode())
    _offsets(built, batch, keys, topics)
    for group_id, ids in batch.expected_rows:
        built.put(keys.expected_members(group_id), ids.encode())
    for (group_id,) in batch.expected_deletes:
        built.delete(keys.expected_members(group_id))


def _members(
    built: Built, batch: PreparedBatch, keys: Keys, epochs: Mapping[str, int], slots: Mapping[str, GroupSlots]
) -> None:
    """The member keys: each removed member's key deleted, each upserted member put under its slot (``slots``). A
    slot deleted and put in one transaction (a static member's restart) is only put: the new member overwrites the
    old one's key (etcd refuses a delete and a put of one key in one transaction). A member a schema-1 Berth stored
    under its member id is moved to its slot when it is next written."""

    def changes(group_id: str) -> SlotChanges:
        found = built.slots.get(group_id)
        if found is None:
            found = built.slots[group_id] = SlotChanges(slots.get(group_id))
        return found

    doomed: list[tuple[str, bytes]] = []
    for group_id, member_id in batch.member_deletes:
        group = changes(group_id)
        slot = group.slot_of(member_id)
        if slot is not None:  # else never stored (joined and left within this transaction)
            doomed.append((group_id, slot))
            group.put(member_id, None)
    placed: set[tuple[str, bytes]] = set()
    for group_id, member_id, record in batch.member_rows:
        group = changes(group_id)
        was = group.slot_of(member_id)
        slot = member_slot(member_id, batch.instances.get((group_id, member_id)))
        if group.holder(slot) not in (None, member_id):
            slot = member_slot(member_id, None)  # the instance's slot holds another member: keyed by its id
        if was is not None and was != slot:
            doomed.append((group_id, was))
        group.put(member_id, slot)
        epoch = built.epochs.get(group_id)
        built.put(keys.member(group_id, epochs.get(group_id, 0) if epoch is None else epoch, slot), record.encode())
        placed.add((group_id, slot))
    for group_id, slot in dict.fromkeys(doomed):
        if (group_id, slot) not in placed:
            built.delete(keys.member(group_id, epochs.get(group_id, 0), slot))


def fitting(writes: Sequence[Write], make: Callable[[Sequence[Write]], Built], limits: Limits) -> tuple[int, Built]:
    """The longest head of ``writes`` (halving) whose transaction fits ``limits``: (how many, built). When not even
    the first write fits alone, (1, its oversized build): the caller refuses it."""
    take = len(writes)
    built = make(writes)
    while take > 1 and not limits.fits(len(built.ops), built.size):
        take //= 2
        built = make(writes[:take])
    return take, built


def decode_topic_offsets(value: bytes) -> TopicOffsets:
    """A topic's offsets key's value (ValueError, msgspec.DecodeError when it is not one)."""
    return _decode_topic(value)


def _offsets(built: Built, batch: PreparedBatch, keys: Keys, topics: Mapping[TopicKey, bytes]) -> None:
    changed: dict[TopicKey, dict[int, tuple[int, int, str, int] | None]] = {}
    for group_id, topic, partition, offset, leader_epoch, metadata, ts in batch.offset_rows:
        changed.setdefault((group_id, topic), {})[partition] = (offset, leader_epoch, metadata, ts)
    for group_id, topic, partition in batch.offset_deletes:
        changed.setdefault((group_id, topic), {})[partition] = None
    for (group_id, topic), partitions in changed.items():
        stored = topics.get((group_id, topic))
        current = _decode_topic(stored) if stored is not None else {}
        for partition, entry in partitions.items():
            if entry is None:
                current.pop(partition, None)
            else:
                current[partition] = entry
        key = keys.topic_offsets(group_id, topic)
        if current:
            value = _encode_topic(dict(sorted(current.items())))
            built.put(key, value)
            built.topics[(group_id, topic)] = value
        elif stored is not None:
            built.delete(key)
            built.topics[(group_id, topic)] = None
