"""``EtcdStore``: the coordinator's durable state in etcd, for replicas of which one is active (docs/api.md §10).

What it owns: opening a prefix (refusing one that is not a Berth store, is newer, or holds an interrupted copy),
loading every record for replay at a consistent revision, reading the journal, and committing one built
transaction under a term (``commit``). The writer thread (``writer``) is its only committer; the election
(``election``) decides the term.

Rules:
- Every transaction is conditional on the term: the leader key's create revision is the term's (so a deposed
  leader's writes are refused by etcd itself, whatever its clock says) and the progress key's mod revision is the
  last this store committed (so a transaction whose answer was lost can be sent again and applies at most once).
  A transaction refused on these conditions is ``Fenced``; nothing of it applied.
- ``load`` reads at one revision, after the term began, so it sees every transaction the previous leader
  committed; it also keeps what the writer needs: the members' epochs, the journal index, the progress key and
  the topics' offsets values (a commit rewrites its topics' keys whole: about the size of the offsets in etcd).
- ``commit`` adopts what a committed transaction changed (epochs, offsets values, index); nothing else changes
  them, so they are the writer thread's alone once loaded.
- ``journal_window`` and the metrics read the journal's index from memory (the active replica's), and the events
  from etcd (one range for the chunk holding ``after + 1``, then forward).
- Every problem with the prefix surfaces as a one-line ``StoreError``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

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
from berth.coordinator.daemon import failpoints
from berth.coordinator.protocol import GroupId, InstanceId
from berth.coordinator.store.config import StoreConfig
from berth.coordinator.store.errors import StoreError
from berth.coordinator.store.etcd.client import (
    EtcdClient,
    EtcdError,
    EtcdRefused,
    EtcdUnavailable,
    KeyValue,
    b64,
    num,
    prefix_end,
)
from berth.coordinator.store.etcd.journal import JournalIndex, decode_chunk
from berth.coordinator.store.etcd.keys import SCHEMA, Keys, hex_id
from berth.coordinator.store.etcd.slots import GroupSlots
from berth.coordinator.store.etcd.txn import Built, Limits, TopicKey, decode_topic_offsets
from berth.coordinator.store.sqlite_store import JournalSize, JournalWindow

log = logging.getLogger(__name__)

_decode_group = msgspec.json.Decoder(GroupMetadata).decode
_decode_member = msgspec.json.Decoder(MemberMetadata).decode
_decode_ids = msgspec.json.Decoder(tuple[InstanceId, ...]).decode

#: Keys per range request while loading (each page one round trip; pages are read at one revision).
PAGE_KEYS = 2_000
#: Journal chunks per range request while reading a page of the journal.
JOURNAL_CHUNKS_PER_READ = 64


class Fenced(Exception):
    """The transaction's conditions failed: another replica leads, or another writer wrote. Nothing applied."""


@dataclass(frozen=True, slots=True)
class Term:
    """One tenure as the active replica: the leader key's create revision fences every write."""

    lease: int
    revision: int  # the leader key's create revision
    name: str


class EtcdStore:
    def __init__(
        self, client: EtcdClient, prefix: str, config: StoreConfig | None = None, limits: Limits | None = None
    ) -> None:
        if not prefix or not prefix.endswith("/"):
            raise StoreError(f"etcd prefix {prefix!r} must end with '/'")
        self.client = client
        self.keys = Keys(prefix)
        self.config = config or StoreConfig()
        self.limits = limits or Limits()
        self.retention = self.config.retention
        self.where = f"etcd {client} prefix {prefix}"
        # What the writer needs, set by ``load`` and then owned by the writer thread.
        self.index = JournalIndex()
        self.epochs: dict[str, int] = {}
        self.slots: dict[str, GroupSlots] = {}  # group -> which key holds each stored member
        self.topic_offsets: dict[TopicKey, bytes] = {}  # (group, topic) -> its offsets key's value
        self.progress_revision = 0
        self.transactions = 0

    # -------------------------------------------------------------------------------------- opening, loading

    def check(self) -> None:
        """Refuse a prefix that is not usable (before any term): one ``StoreError`` line. Raises ``EtcdUnavailable``
        when etcd does not answer (the caller waits for it).

        The four reads are one read-only transaction, so they see one revision: replicas started together on an
        empty prefix see either no keys, or a leader key only, or the meta key the winner wrote with it; never a
        prefix that "holds keys but no meta key" because another replica's campaign landed between two reads."""
        keys = self.keys
        try:
            meta, migrating, leader, count = self._snapshot(
                {"key": b64(keys.meta)},
                {"key": b64(keys.migrating), "count_only": True},
                {"key": b64(keys.leader), "count_only": True},
                {"key": b64(keys.prefix), "range_end": b64(prefix_end(keys.prefix)), "count_only": True},
            )
        except EtcdRefused as exc:
            raise StoreError(f"{self.where} cannot be read: {exc}") from exc
        if migrating[1]:
            raise StoreError(
                f"{self.where} holds an interrupted copy-to-etcd (key {keys.migrating.decode()!r}); delete the"
                " prefix and copy again"
            )
        if meta[0]:
            _check_schema(meta[0][0].value, self.where)
        elif count[1] > leader[1]:
            raise StoreError(f"{self.where} holds keys but no Berth meta key: not a Berth store")

    def _snapshot(self, *ranges: dict[str, Any]) -> list[tuple[list[KeyValue], int]]:
        """Several range requests answered at one revision: (key-values, count) of each."""
        if failpoints.enabled("bug.unguarded_first_start"):  # the reads one by one, as before issue 28 ...
            answers = [self.client.call("/v3/kv/range", ranges[0])]
            self._await_other_campaign(answers[0], ranges[-1])  # ... and another replica's campaign between them
            answers += [self.client.call("/v3/kv/range", body) for body in ranges[1:]]
        else:
            answer = self.client.txn([], [{"request_range": body} for body in ranges])
            answers = [response.get("response_range", {}) for response in answer.get("responses", [])]
        return [([KeyValue.of(kv) for kv in a.get("kvs", ())], num(a.get("count"))) for a in answers]

    def _await_other_campaign(self, first: dict[str, Any], everything: dict[str, Any], wait_s: float = 10.0) -> None:
        """Test-only (``bug.unguarded_first_start``): when the first read found nothing, wait up to ``wait_s`` for
        another replica's campaign and first write to land in the prefix, so that the window the bug had is met
        whatever the machine's speed (the lab starts the other replicas after this one)."""
        if first.get("kvs"):
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and num(self.client.call("/v3/kv/range", everything).get("count")) < 2:
            time.sleep(0.05)

    def begin(self, term: Term) -> None:
        """Make the prefix a Berth store if it is new, or mark an older schema's prefix as this one's, under the term
        (nothing is written once the term is over). Raises ``StoreError`` for a prefix a newer Berth marked since
        ``check``: a standby of an older version never writes under a layout it does not know."""
        meta = {"request_put": {"key": b64(self.keys.meta), "value": b64(json.dumps({"schema": SCHEMA}).encode())}}
        answer = self.client.txn(
            [
                _leader_is(self.keys, term),
                {"key": b64(self.keys.meta), "target": "CREATE", "result": "EQUAL", "create_revision": 0},
            ],
            [meta],
            [{"request_range": {"key": b64(self.keys.meta)}}],
        )
        if answer.get("succeeded"):
            log.info("store: %s initialised as a Berth store", self.where)
            return
        found = answer.get("responses", [{}])[0].get("response_range", {}).get("kvs", [])
        if not found:
            return  # the meta key is absent, so the leader compare failed: the term is over
        stored = KeyValue.of(found[0])
        if _check_schema(stored.value, self.where) < SCHEMA:
            upgraded = self.client.txn(
                [
                    _leader_is(self.keys, term),
                    {
                        "key": b64(self.keys.meta),
                        "target": "MOD",
                        "result": "EQUAL",
                        "mod_revision": stored.mod_revision,
                    },
                ],
                [meta],
            )
            if upgraded.get("succeeded"):
                log.info("store: %s marked schema %d (static members keyed by their instance)", self.where, SCHEMA)

    def load(self) -> Iterator[Record]:
        """Every record for replay, read at one revision; also resets the writer's view (epochs, index, progress).
        Raises ``EtcdUnavailable`` when etcd does not answer (a load that may succeed later), ``StoreError`` for
        anything else."""
        try:
            yield from self._load()
        except EtcdUnavailable:
            raise
        except EtcdError as exc:
            raise StoreError(f"{self.where} cannot be read: {exc}") from exc
        except (ValueError, TypeError, msgspec.DecodeError) as exc:
            raise StoreError(f"{self.where} cannot be read: {' '.join(str(exc).split())}") from exc

    def _load(self) -> Iterator[Record]:
        keys = self.keys
        revision = 0
        singles, revision = self._page(keys.progress, keys.progress + b"\x00", revision)
        self.progress_revision = singles[0].mod_revision if singles else 0
        index, revision = self._page(keys.journal_index, keys.journal_index + b"\x00", revision)
        self.index = JournalIndex.decode(index[0].value) if index else JournalIndex()
        self.epochs = {}
        self.slots = {}
        members = self._scan(keys.members, revision)
        pending = next(members, None)
        for kv in self._scan(keys.groups, revision):
            group_hex = keys.group_hex(kv.key)
            group_id = keys.group_id_of(kv.key)
            own: list[MemberMetadata] = []
            while pending is not None and keys.member_group_hex(pending.key) <= group_hex:
                if keys.member_group_hex(pending.key) == group_hex:  # else a member without its group: skipped
                    _, epoch, slot = keys.member_key_parts(pending.key)
                    self.epochs[group_id] = epoch
                    member = _decoded(_decode_member, pending.value, f"group {group_id!r}, member key {slot!r}")
                    self.slots.setdefault(group_id, GroupSlots()).place(member.member_id, slot)
                    own.append(member)
                pending = next(members, None)
            yield GroupRecord(GroupId(group_id), _decoded(_decode_group, kv.value, f"group {group_id!r}"), tuple(own))
        self.topic_offsets = {}
        for kv in self._scan(keys.offsets, revision):
            group_id, topic = keys.topic_offsets_parts(kv.key)
            partitions = _decoded(decode_topic_offsets, kv.value, f"offsets of group {group_id!r}, topic {topic!r}")
            self.topic_offsets[(group_id, topic)] = kv.value
            for partition, (offset, epoch, metadata, ts) in sorted(partitions.items()):
                yield OffsetRecord(GroupId(group_id), topic, partition, OffsetAndMetadata(offset, metadata, epoch, ts))
        for kv in self._scan(keys.expected, revision):
            group_id = keys.expected_group_of(kv.key)
            ids = _decoded(_decode_ids, kv.value, f"expected members of group {group_id!r}")
            yield ExpectedMembersRecord(GroupId(group_id), ids)

    def load_group(self, group_id: GroupId) -> list[Record]:
        """One group's records at one revision, as ``load`` yields them (its reload after a failed write). Unlike
        ``load`` it changes nothing the writer keeps: those are durable values already. Raises as ``load``."""
        try:
            return list(self._group_records(group_id))
        except EtcdUnavailable:
            raise
        except EtcdError as exc:
            raise StoreError(f"{self.where} cannot be read: {exc}") from exc
        except (ValueError, TypeError, msgspec.DecodeError) as exc:
            raise StoreError(f"{self.where} cannot be read: {' '.join(str(exc).split())}") from exc

    def _group_records(self, group_id: GroupId) -> Iterator[Record]:
        keys = self.keys
        found, revision = self._page(keys.group(group_id), keys.group(group_id) + b"\x00", 0)
        members = [
            _decoded(_decode_member, kv.value, f"group {group_id!r}, member key {keys.member_key_parts(kv.key)[2]!r}")
            for kv in self._scan(keys.group_members(group_id), revision)
        ]
        if found:
            yield GroupRecord(group_id, _decoded(_decode_group, found[0].value, f"group {group_id!r}"), tuple(members))
        for kv in self._scan(keys.offsets + hex_id(group_id) + b"/", revision):
            _, topic = keys.topic_offsets_parts(kv.key)
            partitions = _decoded(decode_topic_offsets, kv.value, f"offsets of group {group_id!r}, topic {topic!r}")
            for partition, (offset, epoch, metadata, ts) in sorted(partitions.items()):
                yield OffsetRecord(group_id, topic, partition, OffsetAndMetadata(offset, metadata, epoch, ts))
        expected, _ = self._page(keys.expected_members(group_id), keys.expected_members(group_id) + b"\x00", revision)
        if expected:
            ids = _decoded(_decode_ids, expected[0].value, f"expected members of group {group_id!r}")
            yield ExpectedMembersRecord(group_id, ids)

    def _page(self, key: bytes, end: bytes, revision: int, limit: int = 0) -> tuple[list[KeyValue], int]:
        kvs, header_revision, _, _ = self.client.range(key, end, limit=limit, revision=revision)
        return kvs, revision or header_revision

    def _scan(self, prefix: bytes, revision: int) -> Iterator[KeyValue]:
        """Every key under ``prefix`` at ``revision``, in key order, a page at a time."""
        start, end = prefix, prefix_end(prefix)
        while True:
            kvs, _, more, _ = self.client.range(start, end, limit=PAGE_KEYS, revision=revision)
            yield from kvs
            if not more or not kvs:
                return
            start = kvs[-1].key + b"\x00"

    # ------------------------------------------------------------------------------------------- journal

    def last_seq(self) -> int:
        return self.index.last

    def first_seq(self) -> int:
        return self.index.first

    def journal_size(self) -> JournalSize:
        index = self.index
        return JournalSize(index.size, self.config.journal_retention_bytes or 0, index.oldest_ts_ms)

    def journal_window(self, after: int, limit: int, max_bytes: int | None = None) -> JournalWindow:
        index = self.index
        first, last = index.first, index.last
        start = max(after + 1, first)
        if start > last or limit <= 0:
            return JournalWindow([], first, last)
        keys = self.keys
        lines: list[str] = []
        total = 0
        try:
            found, revision, _, _ = self.client.range(
                keys.journal, keys.journal_chunk(start + 1), limit=1, descending=True
            )
            chunks = list(found)
            cursor = keys.journal_chunk(start + 1)
            while True:
                for kv in chunks:
                    for line in decode_chunk(kv.value):
                        seq = _seq_of(line)
                        if seq < start:
                            continue
                        if seq > last or len(lines) >= limit:
                            return JournalWindow(lines, first, last)
                        total += len(line.encode()) + 1
                        if max_bytes is not None and total > max_bytes and lines:
                            return JournalWindow(lines, first, last)
                        lines.append(line)
                chunks, _, _, _ = self.client.range(
                    cursor, prefix_end(keys.journal), limit=JOURNAL_CHUNKS_PER_READ, revision=revision
                )
                if not chunks:
                    return JournalWindow(lines, first, last)
                cursor = chunks[-1].key + b"\x00"
        except (EtcdError, ValueError) as exc:
            raise StoreError(f"{self.where}: the journal cannot be read: {exc}") from exc

    def journal_lines_after(self, after: int) -> Iterator[tuple[int, str]]:
        """Every retained event with seq > after as (seq, line)."""
        while True:
            window = self.journal_window(after, 10_000)
            if not window.lines:
                return
            for line in window.lines:
                yield _seq_of(line), line
            after = _seq_of(window.lines[-1])

    # ------------------------------------------------------------------------------------------- writing

    def commit(self, built: Built, term: Term, txn_id: str) -> None:
        """Commit ``built`` under ``term`` as transaction ``txn_id``; ``Fenced`` when its conditions fail.

        Raises ``EtcdUnavailable`` when the answer was lost: sending the same transaction again (same ``txn_id``)
        either applies it or finds it applied (``commit`` then returns normally), never applies it twice."""
        keys = self.keys
        compare = [
            _leader_is(keys, term),
            {"key": keys.progress, "target": "MOD", "result": "EQUAL", "mod_revision": self.progress_revision},
        ]
        success = [*built.ops, {"request_put": {"key": keys.progress, "value": txn_id.encode()}}]
        failure = [{"request_range": {"key": keys.progress}}]
        answer = self.client.txn(compare, success, failure)
        if answer.get("succeeded"):
            self.progress_revision = num(answer.get("header", {}).get("revision"))
        else:
            ranged = answer.get("responses", [{}])[0].get("response_range", {}).get("kvs", [])
            found = KeyValue.of(ranged[0]) if ranged else None
            if found is None or found.value != txn_id.encode():
                raise Fenced(f"{self.where}: the transaction was refused: this replica no longer leads")
            self.progress_revision = found.mod_revision  # an earlier attempt whose answer was lost applied it
        self.transactions += 1
        self.adopt(built)

    def adopt(self, built: Built) -> None:
        """Take what a committed transaction changed into the writer's view (epochs, slots, offsets, index)."""
        for group_id, epoch in built.epochs.items():
            if epoch is None:
                self.epochs.pop(group_id, None)
            else:
                self.epochs[group_id] = epoch
        for group_id, changes in built.slots.items():
            if changes is None:
                self.slots.pop(group_id, None)
            else:
                self.slots[group_id] = changes.applied()
        for topic, value in built.topics.items():
            if value is None:
                self.topic_offsets.pop(topic, None)
            else:
                self.topic_offsets[topic] = value
        if built.index is not None:
            self.index = built.index

    def probe(self, term: Term) -> None:
        """Does the store take writes? A small put under the term's condition (a read would pass while etcd is
        out of space). Raises ``EtcdError``: ``EtcdRefused`` when etcd answers that it does not."""
        self.client.txn([_leader_is(self.keys, term)], [{"request_put": {"key": b64(self.keys.probe), "value": ""}}])


def _leader_is(keys: Keys, term: Term) -> dict[str, Any]:
    return {"key": keys.leader, "target": "CREATE", "result": "EQUAL", "create_revision": term.revision}


def _check_schema(value: bytes, where: str) -> int:
    """The prefix's schema; ``StoreError`` when it is not readable or newer than this Berth's."""
    try:
        schema = int(json.loads(value)["schema"])
    except (ValueError, TypeError, KeyError):
        raise StoreError(f"{where}: the meta key is not readable") from None
    if schema > SCHEMA:
        raise StoreError(f"{where} has schema {schema}, newer than this Berth supports ({SCHEMA}); upgrade Berth")
    return schema


def _decoded(decode: Callable[[Any], Any], data: bytes, what: str) -> Any:
    try:
        return decode(data)
    except (msgspec.DecodeError, TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {exc}") from exc


def _seq_of(line: str) -> int:
    # A journal line starts with its seq: {"seq":123,...} (docs/formats.md "Journal events").
    end = line.find(",", 7)
    return int(line[7:end] if end > 0 else line[7:-1])
