"""What a core call asks the adapter to do: send replies, persist a write.

Every public call of the ``Coordinator`` returns one ``Effects``. Replies are addressed by ticket (the
adapter's handle for a waiting request). A ``Write`` bundles the records and journal events of one call; the
adapter persists it and reports back with ``Coordinator.on_write_done(token, ok)``, which runs the call's
continuation (Kafka's append-future callbacks) and may produce more effects. The adapter releases a reply
only once every write handed to it before that reply is durable (docs/api.md §10, "Durability"), except a reply
in ``own_write`` (made by a continuation, ``CoreState.reply_on_own_write``): what it reveals was fixed by the
writes up to the one continued, so it goes out once that write is durable, not after the group's later writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.coordinator.core.events import JournalEvent
from berth.coordinator.core.records import Record
from berth.coordinator.protocol import Answer

Response = Answer


@dataclass(slots=True)
class Write:
    token: int
    records: list[Record]
    events: list[JournalEvent]


class Effects:
    """The replies (ticket, answer) and writes of one call, in the order they were made; ``own_write``: the
    tickets of replies that need only the continued write durable (None: none)."""

    __slots__ = ("own_write", "replies", "writes")

    def __init__(self, replies: list[tuple[int, Response]] | None = None, writes: list[Write] | None = None) -> None:
        self.replies = [] if replies is None else replies
        self.writes = [] if writes is None else writes
        self.own_write: set[int] | None = None

    def __repr__(self) -> str:
        return f"Effects(replies={self.replies!r}, writes={self.writes!r})"

    def extend(self, other: Effects) -> None:
        self.replies.extend(other.replies)
        self.writes.extend(other.writes)
        if other.own_write:
            self.own_write = (self.own_write or set()) | other.own_write
