"""The volume-claims contributor: the claims of pods gone that the fleet keeps (``status.retainedClaims``, and one
``ClaimsRetained`` Event; ``planners.volume_claims.report_retained_claims``), told once a scale-down is over (not
while members depart).
"""

from __future__ import annotations

from berth.operator.planners.volume_claims import CLAIMS_RETAINED_EVENT, report_retained_claims
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    status, view = draft.status, seen.view
    if status.get("departing"):
        return NOTHING
    claims = report_retained_claims(a.fleet, status, claims=view.claims, existing_pods=view.observation.existing)
    said = () if claims.event is None else (("Normal", CLAIMS_RETAINED_EVENT, claims.event),)
    return Contribution(patch=claims.patch, said=said)
