"""The rebalances contributor: the rebalances the last scale-down cost, counted once the group settles
(``lastScaleDown.rebalances`` and a ``Rebalanced`` Event; ``planners.scaling.rebalances_since_leave``), where the
coordinator reports generations.
"""

from __future__ import annotations

from berth.operator.planners.scaling import LAST_SCALE_DOWN, rebalances_since_leave
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    description, status = seen.description, draft.status
    rebalances = rebalances_since_leave(status, state=description.state, generation=description.generation)
    if rebalances is None:
        return NOTHING
    removed = ", ".join(status[LAST_SCALE_DOWN].get("removed") or ()) or "the departed members"
    message = (
        f"group {a.fleet.spec.group_id} is Stable at generation {description.generation}:"
        f" {rebalances} rebalance{'' if rebalances == 1 else 's'} since {removed} left"
    )
    # A merge patch: the record's other keys stay.
    return Contribution(patch={LAST_SCALE_DOWN: {"rebalances": rebalances}}, said=(("Normal", "Rebalanced", message),))
