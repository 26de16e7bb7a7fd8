"""Which key holds each stored member of a group: member id <-> slot (``keys``), the writer's view as ``epochs`` is.

A static member is keyed by its instance's slot, a dynamic one (and any member a schema-1 Berth stored) by its
member id. A member's removal names only its member id, so this map is how a transaction finds the key to delete;
and it gives a slot to a member only while no other stored member holds it, so that one key never holds two
members (the core never has two members of one instance, but the store does not rely on it).

``SlotChanges`` is what one transaction does to one group's map, over the stored map it does not change: the
writer adopts it (``applied``) only once the transaction committed, as it does the epochs.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class GroupSlots:
    """One group's stored members: member id -> slot, and slot -> member id."""

    by_member: dict[str, bytes] = field(default_factory=dict)
    by_slot: dict[bytes, str] = field(default_factory=dict)

    def place(self, member_id: str, slot: bytes) -> None:
        self.by_member[member_id] = slot
        self.by_slot[slot] = member_id


@dataclass(slots=True)
class SlotChanges:
    """One transaction's changes to a group's map. ``reset``: the group's members are rewritten whole (or the group
    is new), so nothing of the stored map stays."""

    stored: GroupSlots | None
    reset: bool = False
    members: dict[str, bytes | None] = field(default_factory=dict)  # member id -> new slot, None: removed
    holders: dict[bytes, str | None] = field(default_factory=dict)  # slot -> new holder, None: freed

    def slot_of(self, member_id: str) -> bytes | None:
        if member_id in self.members:
            return self.members[member_id]
        return None if self.reset or self.stored is None else self.stored.by_member.get(member_id)

    def holder(self, slot: bytes) -> str | None:
        if slot in self.holders:
            return self.holders[slot]
        return None if self.reset or self.stored is None else self.stored.by_slot.get(slot)

    def put(self, member_id: str, slot: bytes | None) -> None:
        """``member_id`` is now held by ``slot`` (None: no longer stored); its previous slot, if any, is freed."""
        previous = self.slot_of(member_id)
        if previous is not None and self.holder(previous) == member_id:
            self.holders[previous] = None
        self.members[member_id] = slot
        if slot is not None:
            self.holders[slot] = member_id

    def applied(self) -> GroupSlots:
        """The group's map once the transaction committed (the stored map is updated in place unless reset)."""
        result = GroupSlots() if self.reset or self.stored is None else self.stored
        for member_id, slot in self.members.items():
            if slot is None:
                result.by_member.pop(member_id, None)
            else:
                result.by_member[member_id] = slot
        for slot, holder in self.holders.items():
            if holder is None:
                result.by_slot.pop(slot, None)
            else:
                result.by_slot[slot] = holder
        return result
