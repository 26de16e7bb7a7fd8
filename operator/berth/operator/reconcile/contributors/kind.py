"""The kind contributor: the conditions the coordinator's kind adds (``PreRegistration`` where it pre-registers
nobody: ``planners.coordinator_kind.kind_conditions``) and those the group's protocol adds
(``protocol_conditions``: a group converting between protocols, a fleet declaring another protocol than its group's).
"""

from __future__ import annotations

from berth.operator.planners.coordinator_kind import kind_conditions, protocol_conditions
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    fleet, kind = a.fleet, a.group.kind
    return Contribution(notes=(*kind_conditions(fleet, kind), *protocol_conditions(fleet, seen.description, kind)))
