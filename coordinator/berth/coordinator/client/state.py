"""What a member exposes about itself: immutable snapshots, assignment changes, and a way to await them.

Owns ``MemberState`` (one consistent snapshot), ``Phase``, ``AssignmentChange`` (what a sync changed, with the
diff) and ``Watched`` (a value tasks can await a condition on). Rules:

- Snapshots are replaced, never mutated, so a reader always sees one consistent state.
- ``Watched.wait_for`` never misses an update: it re-checks its predicate after every change, and asyncio runs
  one task at a time, so nothing can change between the check and the wait.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from berth.coordinator.client.encoding import Assignment
from berth.coordinator.protocol import TopicPartition

T = TypeVar("T")

EMPTY_ASSIGNMENT = Assignment(partitions={})


class Phase(enum.Enum):
    """Where the member is in the group protocol."""

    #: Built but not started, or between a revocation and its join.
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    #: Synced: holds ``assignment`` for ``generation_id`` and heartbeats.
    STABLE = "stable"
    CLOSED = "closed"
    #: Stopped by a fatal error (fenced, misconfigured): ``MemberState.error`` says why.
    FAILED = "failed"


def partitions_of(assignment: Assignment) -> frozenset[TopicPartition]:
    return frozenset((topic, number) for topic, numbers in assignment.partitions.items() for number in numbers)


@dataclass(frozen=True)
class AssignmentChange:
    """One completed rebalance as this member saw it: what it holds now, and how that differs from before."""

    generation_id: int
    assignment: Assignment
    #: What the member held in the generation before (already revoked, eager protocol).
    previous: Assignment
    is_leader: bool

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return partitions_of(self.assignment)

    @property
    def added(self) -> frozenset[TopicPartition]:
        """Partitions this member did not hold before."""
        return partitions_of(self.assignment) - partitions_of(self.previous)

    @property
    def removed(self) -> frozenset[TopicPartition]:
        """Partitions this member held before and no longer does."""
        return partitions_of(self.previous) - partitions_of(self.assignment)


@dataclass(frozen=True)
class MemberState:
    """One snapshot of a member."""

    phase: Phase = Phase.UNJOINED
    #: ``""`` until the coordinator hands one out; a static member gets a new one on every start.
    member_id: str = ""
    #: -1 until the first join completes.
    generation_id: int = -1
    is_leader: bool = False
    protocol_name: str | None = None
    assignment: Assignment = EMPTY_ASSIGNMENT
    #: Completed syncs since start (each is one ``AssignmentChange``).
    rebalances: int = 0
    heartbeats_ok: int = 0
    #: Consecutive failed attempts to reach the coordinator (any call); 0 after a success.
    unavailable_streak: int = 0
    last_error: str | None = None
    error: BaseException | None = None

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return partitions_of(self.assignment)


class Watched(Generic[T]):
    """A value that changes over time; ``wait_for`` returns once a predicate holds for it."""

    def __init__(self, value: T, *, on_change: Callable[[T], None] | None = None) -> None:
        self._value = value
        self._changed = asyncio.Event()
        self._on_change = on_change

    @property
    def value(self) -> T:
        return self._value

    def set(self, value: T) -> None:
        self._value = value
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        if self._on_change is not None:
            self._on_change(value)

    async def wait_for(self, predicate: Callable[[T], bool]) -> T:
        while True:
            changed = self._changed
            if predicate(self._value):
                return self._value
            await changed.wait()
