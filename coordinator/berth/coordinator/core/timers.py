"""A keyed timer queue driven by an injected clock: the core's only notion of time passing.

Rules:
- ``schedule(key, deadline)`` replaces any timer with that key; ``cancel(key)`` drops it.
- Due timers pop in deadline order; ties pop in the order they were (last) scheduled (docs/api.md §9).
- Rescheduling a key to a *later* deadline is O(1): the key keeps its one heap entry (its "anchor"), and when
  the anchor surfaces the entry is re-pushed at its current deadline. Session timers move later on every
  heartbeat, so the heartbeat path never touches the heap. Moving a key earlier pushes a new anchor.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import count
from typing import Generic, TypeVar

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class DueTimer(Generic[P]):
    key: Hashable
    deadline_ms: int
    payload: P


class TimerQueue(Generic[P]):
    __slots__ = ("_anchor", "_entries", "_heap", "_seq", "pushes")

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[int, int, P]] = {}
        self._anchor: dict[Hashable, tuple[int, int]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = count()
        # Counts anchors pushed by ``schedule``: while it stands still, ``next_deadline`` has not moved earlier.
        self.pushes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def schedule(self, key: Hashable, deadline_ms: int, payload: P) -> None:
        seq = next(self._seq)
        self._entries[key] = (deadline_ms, seq, payload)
        anchor = self._anchor.get(key)
        if anchor is None or deadline_ms < anchor[0]:
            self._anchor[key] = (deadline_ms, seq)
            heapq.heappush(self._heap, (deadline_ms, seq, key))
            self.pushes += 1

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def next_deadline(self) -> int | None:
        """A deadline no later than the earliest due timer, in O(1).

        It may be early (the top anchor may be stale or cancelled): a driver that wakes up then finds nothing
        due and asks again. Settling here instead would cost every heartbeat a heap operation.
        """
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> DueTimer[P] | None:
        """Remove and return the earliest timer due at ``now_ms``, or None."""
        while True:
            self._settle_top()
            if not self._heap or self._heap[0][0] > now_ms:
                return None
            deadline, _, key = heapq.heappop(self._heap)
            del self._anchor[key]
            _, _, payload = self._entries.pop(key)
            return DueTimer(key, deadline, payload)

    def _settle_top(self) -> None:
        """Drop stale or cancelled anchors at the top and re-push keys that moved later."""
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            if self._anchor.get(key) != (deadline, seq):
                heapq.heappop(heap)  # superseded by an earlier anchor
                continue
            entry = self._entries.get(key)
            if entry is None:
                heapq.heappop(heap)  # cancelled
                del self._anchor[key]
                continue
            if (entry[0], entry[1]) == (deadline, seq):
                return
            heapq.heappop(heap)  # moved later: re-anchor at its current deadline and scheduling order
            self._anchor[key] = (entry[0], entry[1])
            heapq.heappush(heap, (entry[0], entry[1], key))
