"""The pause contributor, and a paused fleet's own ending (``planners.pause``).

A fleet paused by its ``berth.dev/paused`` annotation gets only its Paused condition (and Ready Unknown) written,
nothing else done (:func:`paused`, the pass's first step); once resumed, its next pass says so (``Paused=False``, a
``Resumed`` Event once written).
"""

from __future__ import annotations

from berth.operator.planners.pause import (
    NOT_PAUSED,
    PAUSED_EVENT,
    PAUSED_MESSAGE,
    RESUMED_EVENT,
    RESUMED_MESSAGE,
    paused_patch,
    was_paused,
)
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.context import PassResult
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen
from berth.operator.reconcile.endings import count_state
from berth.operator.reconcile.scope import Scope


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    if not was_paused(draft.before):
        return NOTHING
    return Contribution(notes=(NOT_PAUSED,), said=(("Normal", RESUMED_EVENT, RESUMED_MESSAGE),))


async def paused(scope: Scope) -> PassResult:
    """A paused fleet: only its Paused condition (and Ready Unknown) written, nothing else done."""
    record = scope.record
    if not was_paused(record.status):
        record.events.info(PAUSED_EVENT, PAUSED_MESSAGE)
    await record.write_changes(paused_patch(record.status, now=scope.now(), generation=record.generation))
    count_state(scope, refused=False)
    return PassResult()
