"""The ownership contributor: what status says of the group's ownership after the claim (``reconcile.ownership``):
the ``AdoptGroup`` note while the fleet may adopt a group in use, and the members in the group the fleet did not
create (``status.foreignMembers`` and one Warning Event when they change: they are never removed,
``planners.ownership.foreign_report``).
"""

from __future__ import annotations

from berth.operator.planners.ownership import FOREIGN_MEMBERS_EVENT, adopt_group_notes, foreign_report
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    foreign = foreign_report(a.fleet.spec.group_id, draft.status, seen.plan.foreign_members)
    said = () if foreign.event is None else (("Warning", FOREIGN_MEMBERS_EVENT, foreign.event),)
    return Contribution(patch=foreign.patch, notes=adopt_group_notes(a.fleet, draft.before), said=said)
