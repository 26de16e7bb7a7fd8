"""What a status contributor is: one feature's piece of the status a pass writes at its end.

A contributor (:data:`Contributor`) is ``async (a, seen, draft) -> Contribution``: given the admitted fleet, what the
pass saw (:class:`Seen`) and the status as the contributors before it leave it (:class:`Draft`), it returns its
feature's merge patch, its conditions (``notes``), the Events it is worth once written (``said``) and what to do
once the status is written or could not be (``written``, ``unwritten``). The status step (``reconcile.status``)
folds the contributors in order into one write. Rules:

- A contributor reads the status from ``draft`` (``before``: as the status step found it; ``status``: with the
  pieces before it), never from the record, so the order of the fold is the only order there is.
- What is said in a contribution is posted only once the status saying it is written (a failed write says
  nothing, and the next pass says it then). What a contributor does (a leave, a label, a journal append) it does
  itself, and announces itself.
- A contributor remembers only in its own field of the fleet's memory (``reconcile.memory``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from berth.operator.planners.announcements import Said
from berth.operator.planners.conditions import Condition, merge_conditions
from berth.operator.planners.fleet_status import merge_patch
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.scaling import ScalingPlan
from berth.operator.ports import WorkloadView
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.sizing import Sized


@dataclass(frozen=True, slots=True)
class Seen:
    """What the pass saw once its actions were done: the workload, the group, the scaling plan, the sizing."""

    view: WorkloadView
    description: GroupDescription
    plan: ScalingPlan
    sized: Sized


@dataclass(frozen=True, slots=True)
class Contribution:
    patch: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[Condition, ...] = ()
    said: tuple[Said, ...] = ()
    written: Callable[[], None] | None = None
    unwritten: Callable[[], None] | None = None


NOTHING = Contribution()


class Draft:
    """The status being folded: ``before`` (as the status step found it), the pieces so far, and their notes
    applied to the conditions last (``merge_conditions``: in order, a note of a type already there replaces it)."""

    def __init__(self, before: Mapping[str, Any], *, now: datetime, generation: int | None) -> None:
        self.before = before
        self.now = now
        self.generation = generation
        self.pieces: list[Contribution] = []
        self._patch: dict[str, Any] = {}
        self._notes: list[Condition] = []

    def add(self, piece: Contribution) -> None:
        self.pieces.append(piece)
        self._patch = merge_patch(self._patch, piece.patch, keep_nulls=True)
        self._notes.extend(piece.notes)

    def patch(self) -> dict[str, Any]:
        """One merge patch of every piece, the notes in its conditions."""
        if not self._notes:
            return dict(self._patch)
        conditions = self._patch.get("conditions", self.before.get("conditions"))
        merged = merge_conditions(conditions, self._notes, now=self.now, observed_generation=self.generation)
        return {**self._patch, "conditions": merged}

    @property
    def status(self) -> dict[str, Any]:
        """The status as the pieces so far leave it."""
        return merge_patch(self.before, self.patch())


Contributor = Callable[[Admitted, Seen, Draft], Awaitable[Contribution]]
