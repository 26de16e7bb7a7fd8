"""What the coordinator keeps, measured and bounded per group, per tenant and in total (docs/api.md §6, "What the
coordinator keeps").

Every group has a size in *stored bytes*: an estimate of the memory it takes, which is also what a restart reloads.

    stored bytes = GROUP_BYTES
                 + each member:          MEMBER_BYTES + its protocols' metadata + its assignment
                 + each committed offset: OFFSET_BYTES + its topic + its metadata (UTF-8)

The constants are what CPython takes for the objects around the bytes, measured on a reloaded core (a group's
dicts, sets and counters; a member's slots and ids; an offset's struct and dict entries): docs/reliability.md
compares the estimate with the RSS of a real reload. A ``Ledger`` sums the stored bytes (and counts the groups) of a
set of groups against its bounds: one ledger for all groups, and one per *tenant*, the non-admin token that created
a group (groups created by an admin token, or without tokens, belong to no tenant and count in the total only).
Rules:

- A group joins its ledgers when it is registered with the core and leaves them when it is forgotten; between the
  two, every change of its members' metadata or of its offsets is charged to them (``Group.charge``), so a ledger is
  always the sum of its groups and a check is O(1).
- A change that would take a ledger past its byte bound is refused; one that shrinks a group always goes through
  (a group at its bound can still commit progress on the partitions it has, or lose a member).
- A commit's offsets are charged when they are accepted (reserved) and settled when they are durable (or released
  when the write failed), so commits in flight cannot overshoot a bound together.
- What a restart loads is never refused: a coordinator whose lowered bounds are below what it holds loads it all and
  refuses growth until expiry or deletes make room.
"""

from __future__ import annotations

#: The memory of a group besides its members and offsets (its object, dicts, sets, counters), in bytes.
GROUP_BYTES = 2_048
#: The memory of a member besides its metadata and assignment (its object, ids, protocol tuples), in bytes.
MEMBER_BYTES = 512
#: The memory of a committed offset besides its topic and metadata (its struct, ints and dict entries), in bytes.
OFFSET_BYTES = 128


def text_bytes(text: str | None) -> int:
    """UTF-8 bytes of ``text`` (ASCII: its length, without encoding it)."""
    if not text:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def offset_bytes(topic: str, metadata: str | None) -> int:
    """The stored bytes of one committed offset."""
    return OFFSET_BYTES + text_bytes(topic) + text_bytes(metadata)


class GroupUsage:
    """A group's committed offsets in figures (durable, and accepted but not yet durable) and the ledgers it counts
    in. Kept apart from the group's own attributes, so that those stay few enough (at most 30) for CPython's
    shared-key instance dicts, whose attribute reads the heartbeat path relies on."""

    __slots__ = ("ledgers", "offset_bytes", "offset_count", "reserved_offset_bytes", "reserved_offsets")

    def __init__(self) -> None:
        self.ledgers: tuple[Ledger, ...] = ()
        self.offset_count = 0
        self.offset_bytes = 0
        self.reserved_offsets = 0
        self.reserved_offset_bytes = 0


class Ledger:
    """The stored bytes and the number of groups of a set of groups, with their bounds (None: unbounded)."""

    __slots__ = ("bytes", "groups", "max_bytes", "max_groups", "tenant")

    def __init__(self, tenant: str | None, max_bytes: int | None, max_groups: int | None = None) -> None:
        self.tenant = tenant
        self.max_bytes = max_bytes
        self.max_groups = max_groups
        self.bytes = 0
        self.groups = 0

    def __repr__(self) -> str:
        return f"Ledger({self.tenant!r}, bytes={self.bytes}, groups={self.groups})"

    def refuses(self, delta: int) -> bool:
        """Whether growing by ``delta`` bytes would take it past its byte bound (shrinking never does)."""
        return delta > 0 and self.max_bytes is not None and self.bytes + delta > self.max_bytes

    def full(self) -> bool:
        """Whether one more group would take it past its group bound."""
        return self.max_groups is not None and self.groups >= self.max_groups
