"""The Kafka evidence contributor: where the group's coordinator keeps no journal, this pass's describe compared
with the last (``reconcile.evidence_journal``) is the evidence, appended to the operator's evidence journal; the
restarts it shows wait in the fleet's memory for ``contributors.restarts``, as the journal's would. Nothing for
status itself.
"""

from __future__ import annotations

from berth.operator.planners.restarts import NOTHING as NO_ACTIVITY
from berth.operator.planners.restarts import activity_by_group
from berth.operator.reconcile import evidence_journal
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    if a.group.kind.keeps_journal:
        return NOTHING
    timeout_ms = draft.status.get("sessionTimeoutMs")
    observed = await evidence_journal.observed(
        a, seen.description, seen.view.observation.times, timeout_ms if isinstance(timeout_ms, int) else None
    )
    a.memory.activity = a.memory.activity + sum(activity_by_group(observed).values(), NO_ACTIVITY)
    return NOTHING
