"""The label contributor: the fleet carries the label its objects carry, so ``kubectl get cf,sts,pods,pvc -l
berth.dev/fleet=NAME`` lists it with them (set once: every pass reads the fleet as stored). Metadata, not status:
written at once, nothing for the status write.
"""

from __future__ import annotations

from berth.operator.planners.statefulset import FLEET_LABEL
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    labels = (a.record.body.get("metadata") or {}).get("labels") or {}
    if labels.get(FLEET_LABEL) != a.fleet.name:
        await a.record.status_port.label({FLEET_LABEL: a.fleet.name})
    return NOTHING
