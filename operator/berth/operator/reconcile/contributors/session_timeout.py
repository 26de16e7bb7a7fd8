"""The session-timeout contributor: what the sizing step (``reconcile.sizing``) noted: ``SessionTimeoutSufficient``,
whether the coordinator's maximum let the session timeout cover what the evidence asks for (the timeout itself is in
status from then on, deferred with the pass's next write), and ``TemplateApplied`` while a changed pod template waits
for its turn to roll (``reconcile.rolls``).
"""

from __future__ import annotations

from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    return Contribution(notes=seen.sized.notes)
