"""Rolls admitted a few at a time: a fleet's changed pod template reaches its StatefulSet only while fewer than
``limit`` of the operator's fleets are rolling (``--max-concurrent-rolls``; docs/operator.md "Rolls admitted a few
at a time").

Why: a pod's restart gap in a roll is, by Little's law, the pods being replaced at once over the rate at which the
control plane replaces them. A change that rolls every fleet at once (a base image bumped everywhere, the
operator's own upgrade, a rotated CA) puts one pod of every fleet in flight, and on a control plane that replaces
seven pods a second, a thousand fleets rolling together gave each pod 70 s away from its group: past any session
timeout sized from one pod's restart, so every pod cost a rebalance. A few fleets at a time keeps each gap that of
one restart, and the whole roll takes about as long (the control plane's rate is the same).

Rules (pure: the adapters tell what they see, with the time):

- **A roll counts** while a StatefulSet's status shows one in progress (its controller has not yet observed its
  spec, or has not yet said the roll is done: every pod updated and Ready; the watch cache tells, ``observed``), and
  for a fleet just admitted until its StatefulSet shows the roll (a reservation, at most :data:`RESERVATION_S`), so
  passes that run side by side cannot all take the last turn. Every roll counts, ``kubectl rollout restart``
  included; only the operator's own template changes wait.
- **A roll that stops moving** (its StatefulSet's progress unchanged for ``stall_s``: a template whose pods never
  become Ready) **stops counting**, so a broken or hostile fleet cannot hold a turn forever.
- **Whose turn**: the waiting fleets in line, those of namespaces with fewer rolls counted first, then in the order
  they asked; and a namespace takes more than half the turns only while no other namespace waits, so one tenant's
  rolls never keep another's waiting for all of them.
- **Turns freed** (a roll ended, stalled or went, a fleet left the line) are offered to the first waiting fleets in
  line: ``on_offer`` is told them (the operator pokes them), and each one's pass asks again (``take``).
- ``limit`` 0: no limit (every roll admitted at once, as Kubernetes alone would).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass

#: How long a roll may go without progress before it stops counting (a new pod's image pull and start included).
STALL_S = 600.0
#: How long an admitted fleet's turn is kept for it before its StatefulSet shows the roll.
RESERVATION_S = 30.0

FleetKey = tuple[str, str]  # (namespace, fleet name)


@dataclass(frozen=True, slots=True)
class Turn:
    """The answer to a fleet that wants to roll."""

    admitted: bool
    rolling: int  # rolls counted now, this fleet's included once admitted
    limit: int
    place: int = 0  # its place in line (1: next) when not admitted
    #: When a counted roll stops counting unless it moves (seconds, the caller's clock): a waiting fleet's next look.
    recheck_at: float | None = None


@dataclass(slots=True)
class _Roll:
    progress: Hashable
    moved_at: float


class RollPacer:
    def __init__(
        self,
        limit: int,
        *,
        stall_s: float = STALL_S,
        reservation_s: float = RESERVATION_S,
        on_offer: Callable[[list[FleetKey]], None] | None = None,
        on_counts: Callable[[int, int], None] | None = None,
    ) -> None:
        if limit < 0:
            raise ValueError(f"limit {limit} is negative")
        self.limit = limit
        #: Told the waiting fleets a turn is free for (the operator pokes them).
        self.on_offer = on_offer
        #: Told (rolls counted, fleets waiting) whenever either may have moved (the operator's metrics).
        self.on_counts = on_counts
        self.stall_s = stall_s
        self.reservation_s = reservation_s
        self._rolls: dict[FleetKey, _Roll] = {}
        self._reserved: dict[FleetKey, float] = {}  # fleet -> when its turn was given
        self._waiting: dict[FleetKey, float] = {}  # fleet -> when it first asked (insertion order: arrival)

    # ------------------------------------------------------------------------------------------ the adapters

    def observed(self, key: FleetKey, rolling: bool, progress: Hashable, now: float) -> None:
        """The fleet's StatefulSet as the watch cache has it now (``rolling``: a roll in progress; ``progress``:
        whatever moves as the roll does)."""
        if not rolling and key not in self._rolls:
            return  # the usual case: a StatefulSet at rest stays at rest (no count taken)
        before = self._free(now)
        roll = self._rolls.get(key)
        if rolling:
            if roll is None or roll.progress != progress:
                self._rolls[key] = _Roll(progress, now)
            self._reserved.pop(key, None)  # the roll shows: it counts as itself
        else:
            self._rolls.pop(key, None)
        self._offer(before, now)

    def forget(self, key: FleetKey, now: float) -> None:
        """The fleet or its StatefulSet is gone."""
        before = self._free(now)
        self._rolls.pop(key, None)
        self._reserved.pop(key, None)
        self._waiting.pop(key, None)
        self._offer(before, now, left=True)

    # ------------------------------------------------------------------------------------------ the passes

    def take(self, key: FleetKey, now: float) -> Turn:
        """A pass would change the fleet's pod template: may it (a turn, kept for it) or does it wait?"""
        counted = self._counted(now)
        if self.limit == 0 or key in counted:
            self._waiting.pop(key, None)
            return Turn(True, len(counted), self.limit)
        self._waiting.setdefault(key, now)
        allowed, held = self._line(counted)
        if key in allowed[: max(self.limit - len(counted), 0)]:
            del self._waiting[key]
            self._reserved[key] = now
            self._tell(self.limit - len(counted) - 1)
            return Turn(True, len(counted) + 1, self.limit)
        self._tell(self.limit - len(counted))
        return Turn(False, len(counted), self.limit, [*allowed, *held].index(key) + 1, self._recheck_at(now))

    def withdraw(self, key: FleetKey, now: float) -> None:
        """The fleet no longer waits (its template needs no change now, or it is paused or refused)."""
        if self._waiting.pop(key, None) is not None:
            self._offer(self._free(now), now, left=True)

    def waiting(self) -> int:
        return len(self._waiting)

    # -------------------------------------------------------------------------------------------- counting

    def _counted(self, now: float) -> set[FleetKey]:
        counted = {key for key, roll in self._rolls.items() if now - roll.moved_at < self.stall_s}
        for key, since in list(self._reserved.items()):
            if now - since >= self.reservation_s:
                del self._reserved[key]
            else:
                counted.add(key)
        return counted

    def _free(self, now: float) -> int:
        return self.limit - len(self._counted(now))

    def _line(self, counted: set[FleetKey]) -> tuple[list[FleetKey], list[FleetKey]]:
        """The waiting fleets in turn order (the module docstring): those that may take a turn now, and those whose
        namespace holds its half while another namespace waits."""
        per_namespace: dict[str, int] = {}
        for namespace, _ in counted:
            per_namespace[namespace] = per_namespace.get(namespace, 0) + 1
        namespaces_waiting = {namespace for namespace, _ in self._waiting}
        half = math.ceil(self.limit / 2)

        def may(namespace: str) -> bool:
            return per_namespace.get(namespace, 0) < half or namespaces_waiting <= {namespace}

        order = sorted(self._waiting.items(), key=lambda item: (per_namespace.get(item[0][0], 0), item[1]))
        return [key for key, _ in order if may(key[0])], [key for key, _ in order if not may(key[0])]

    def _offer(self, before: int, now: float, *, left: bool = False) -> None:
        """Offer the turns free now to the first in line, when turns were freed (or a fleet left the line, which
        may have been offered one)."""
        free = self._free(now)
        self._tell(free)
        if self.limit == 0 or not self._waiting or free <= 0 or (free <= before and not left):
            return
        offered = self._line(self._counted(now))[0][:free]
        if offered and self.on_offer is not None:
            self.on_offer(offered)

    def _tell(self, free: int) -> None:
        if self.on_counts is not None:
            self.on_counts(self.limit - free, len(self._waiting))

    def _recheck_at(self, now: float) -> float | None:
        ends = [roll.moved_at + self.stall_s for roll in self._rolls.values() if now - roll.moved_at < self.stall_s]
        ends += [since + self.reservation_s for since in self._reserved.values()]
        return min(ends, default=None)
