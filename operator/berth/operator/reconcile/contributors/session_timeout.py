"""The session-timeout contributor: ``SessionTimeoutSufficient``, whether the coordinator's maximum let the session
timeout cover what the evidence asks for (decided by the sizing step, ``reconcile.sizing``; the timeout itself is in
status from then on, deferred with the pass's next write).
"""

from __future__ import annotations

from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    return Contribution(notes=seen.sized.notes)
