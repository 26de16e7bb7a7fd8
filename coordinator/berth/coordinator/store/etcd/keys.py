"""Where the coordinator's state lives in etcd: one key per row of the SQLite layout, under one prefix.

Layout (``P`` is ``--etcd-prefix``; ids are hex-encoded UTF-8, so any group id, ``/`` and NUL included, makes a
key of its own and a prefix of no other; numbers are zero-padded so keys sort as numbers do):

- ``P meta``: ``{"schema": 1}``, written when the prefix is first used. ``P migrating``: present only while
  ``copy-to-etcd`` runs; a coordinator refuses a prefix that holds it (an interrupted copy).
- ``P leader``: the active replica's name, on its lease; its create revision fences every write (``election``).
- ``P probe``: written empty by a replica whose store failed, to see whether etcd takes writes again.
- ``P progress``: the last transaction's id; each transaction requires its mod revision to be the one the writer
  saw last, so a transaction retried after a lost answer applies at most once (``writer``).
- ``P g/<group>``: the group's own fields (``GroupMetadata`` JSON, as in SQLite).
- ``P m/<group>/<epoch>/<member id>``: one member (``MemberMetadata`` JSON). A whole-group record writes its members
  under the next epoch and deletes the previous epoch's range in the same transaction (etcd refuses a put inside a
  range the same transaction deletes), so the stored members are always exactly one record's.
- ``P o/<group>/<topic>``: the group's committed offsets of one topic, ``{"<partition>": [offset, leader epoch,
  metadata, commit ts], ...}``. One key per topic, not per partition: etcd's cost is per key (a commit of 50
  partitions as 50 keys took seven times as long), so a commit rewrites its topics' keys whole (the writer keeps
  their current values, ``store``).
- ``P e/<group>``: the expected members, a JSON array.
- ``P j/<first seq>``: the journal lines of one transaction (``\\n``-joined, "seq" first as in the segments);
  ``P journal``: the journal's index (``journal``).
"""

from __future__ import annotations

SCHEMA = 1
EPOCH_DIGITS = 8
SEQ_DIGITS = 20


def hex_id(text: str) -> bytes:
    return text.encode("utf-8").hex().encode("ascii")


def unhex_id(data: bytes) -> str:
    return bytes.fromhex(data.decode("ascii")).decode("utf-8")


class Keys:
    """The keys of one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.encode("utf-8")
        p = self.prefix
        self.meta = p + b"meta"
        self.migrating = p + b"migrating"
        self.leader = p + b"leader"
        self.progress = p + b"progress"
        self.probe = p + b"probe"
        self.journal_index = p + b"journal"
        self.groups = p + b"g/"
        self.members = p + b"m/"
        self.offsets = p + b"o/"
        self.expected = p + b"e/"
        self.journal = p + b"j/"

    def group(self, group_id: str) -> bytes:
        return self.groups + hex_id(group_id)

    def group_members(self, group_id: str) -> bytes:
        """The prefix of every member key of the group, whatever the epoch."""
        return self.members + hex_id(group_id) + b"/"

    def epoch_members(self, group_id: str, epoch: int) -> bytes:
        return self.group_members(group_id) + f"{epoch:0{EPOCH_DIGITS}x}/".encode()

    def member(self, group_id: str, epoch: int, member_id: str) -> bytes:
        return self.epoch_members(group_id, epoch) + member_id.encode("utf-8")

    def topic_offsets(self, group_id: str, topic: str) -> bytes:
        return self.offsets + hex_id(group_id) + b"/" + hex_id(topic)

    def expected_members(self, group_id: str) -> bytes:
        return self.expected + hex_id(group_id)

    def journal_chunk(self, first_seq: int) -> bytes:
        return self.journal + f"{first_seq:0{SEQ_DIGITS}d}".encode()

    # ------------------------------------------------------------------------------------------ parsing

    def group_id_of(self, key: bytes) -> str:
        return unhex_id(self.group_hex(key))

    def group_hex(self, key: bytes) -> bytes:
        """The group part of a group key, as stored (hex sorts as the UTF-8 bytes do)."""
        return key[len(self.groups) :]

    def member_group_hex(self, key: bytes) -> bytes:
        return key[len(self.members) : key.index(b"/", len(self.members))]

    def member_key_parts(self, key: bytes) -> tuple[str, int, str]:
        """(group id, epoch, member id) of a member key."""
        group_hex, epoch, member_id = key[len(self.members) :].split(b"/", 2)
        return unhex_id(group_hex), int(epoch, 16), member_id.decode("utf-8")

    def topic_offsets_parts(self, key: bytes) -> tuple[str, str]:
        group_hex, topic_hex = key[len(self.offsets) :].split(b"/")
        return unhex_id(group_hex), unhex_id(topic_hex)

    def expected_group_of(self, key: bytes) -> str:
        return unhex_id(key[len(self.expected) :])

    def chunk_first_seq(self, key: bytes) -> int:
        return int(key[len(self.journal) :])
