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
- ``P m/<group>/<epoch>/<slot>``: one member (``MemberMetadata`` JSON; the value says who it is). A static member's
  slot is ``i/<group.instance.id, hex>`` (schema 2), so a static restart overwrites its instance's key instead of
  deleting one key and creating another (etcd's cost is per key created and deleted: ``benchmarks.etcd_floor``); a
  dynamic member's slot is its member id (and so was every member's in schema 1, whose keys are read as before and
  re-keyed as they are next written). A member id always ends ``-<uuid>`` and a slot ``i/<hex>`` holds no ``-``: the
  two never meet. A whole-group record writes its members under the next epoch and deletes the previous epoch's
  range in the same transaction (etcd refuses a put inside a range the same transaction deletes), so the stored
  members are always exactly one record's.
- ``P o/<group>/<topic>``: the group's committed offsets of one topic, ``{"<partition>": [offset, leader epoch,
  metadata, commit ts], ...}``. One key per topic, not per partition: etcd's cost is per key (a commit of 50
  partitions as 50 keys took seven times as long), so a commit rewrites its topics' keys whole (the writer keeps
  their current values, ``store``).
- ``P e/<group>``: the expected members, a JSON array.
- ``P j/<first seq>``: the journal lines of one transaction (``\\n``-joined, "seq" first as in the segments;
  zlib-compressed since schema 2, ``journal.encode_chunk``);
  ``P journal``: the journal's index (``journal``).
"""

from __future__ import annotations

#: 2: static members keyed by their group.instance.id (``slot``), journal chunks compressed; a schema-1 prefix is
#: read as it is and marked 2 when a replica of this version first leads it, so that an older replica refuses it
#: from then on.
SCHEMA = 2
EPOCH_DIGITS = 8
SEQ_DIGITS = 20


def hex_id(text: str) -> bytes:
    return text.encode("utf-8").hex().encode("ascii")


def member_slot(member_id: str, instance_id: str | None) -> bytes:
    """Where a member is keyed within its group's epoch: its instance's slot when static, else its member id."""
    return b"i/" + hex_id(instance_id) if instance_id is not None else member_id.encode("utf-8")


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

    def member(self, group_id: str, epoch: int, slot: bytes) -> bytes:
        return self.epoch_members(group_id, epoch) + slot

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

    def member_key_parts(self, key: bytes) -> tuple[str, int, bytes]:
        """(group id, epoch, slot: ``i/<hex>`` or a member id) of a member key."""
        group_hex, epoch, slot = key[len(self.members) :].split(b"/", 2)
        return unhex_id(group_hex), int(epoch, 16), slot

    def topic_offsets_parts(self, key: bytes) -> tuple[str, str]:
        group_hex, topic_hex = key[len(self.offsets) :].split(b"/")
        return unhex_id(group_hex), unhex_id(topic_hex)

    def expected_group_of(self, key: bytes) -> str:
        return unhex_id(key[len(self.expected) :])

    def chunk_first_seq(self, key: bytes) -> int:
        return int(key[len(self.journal) :])
