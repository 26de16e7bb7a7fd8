"""The status step: what a pass saw, mirrored into the fleet's status as a fold over the status contributors.

Each feature contributes its own piece (``reconcile.contributors``: a merge patch, conditions, the Events it is
worth, what to do once written); the fold runs them in :data:`CONTRIBUTORS`' order, each seeing the status as the
ones before it leave it, and writes what they say in ONE status write, trimmed to what changes
(``fleet_status.only_changes``: an idle fleet's pass writes nothing), with whatever the pass deferred before it
(``FleetRecord.defer``). What the contributors said is posted, and what they count is counted, only once that write
is done; when it fails, each contributor gets back what it took (``Contribution.unwritten``) and the pass fails.
The workload and the group are looked at again first when the scaling plan acted (a watching observer keeps what
the operator wrote). A new feature is a contributor module and one line here.
"""

from __future__ import annotations

from dataclasses import replace

from berth.operator.planners.pokes import watches_progress
from berth.operator.ports import ApiCallFailed
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.context import PassResult
from berth.operator.reconcile.contributors import (
    evidence,
    kind,
    lag,
    members,
    node_loss,
    ownership,
    pause,
    rebalances,
    restarts,
    session_timeout,
    stuck,
    volume_claims,
    workload,
)
from berth.operator.reconcile.contributors.base import Contributor, Draft, Seen
from berth.operator.reconcile.endings import count_state

#: The contributors, in the order they are folded (a later one sees what the earlier ones contributed).
CONTRIBUTORS: tuple[Contributor, ...] = (
    evidence.contribute,  # first: the restarts a describe shows wait for ``restarts``
    kind.contribute,
    session_timeout.contribute,
    members.contribute,
    ownership.contribute,
    pause.contribute,
    lag.contribute,
    workload.contribute,
    rebalances.contribute,
    restarts.contribute,  # after ``workload``: a burst ends once the fleet is Ready and settled
    node_loss.contribute,  # after ``restarts``: it only brings the next due time forward
    volume_claims.contribute,  # after ``workload``: told once nothing departs
    stuck.contribute,  # last: its next look is the earliest of its own and the others' (``again_at``)
)


async def mirror(a: Admitted, seen: Seen) -> PassResult:
    """Status after the pass: the workload and the group as planned from, or looked at again when the plan acted."""
    if seen.plan.actions:
        seen = replace(seen, view=await a.workload.observe(), description=await a.group.describe())
    draft = Draft(a.record.status, now=a.now(), generation=a.record.generation)
    for contribute in CONTRIBUTORS:
        draft.add(await contribute(a, seen, draft))
    await write(a, draft)
    count_state(a, refused=False)
    follows = (a.group.coordinator.endpoint, a.fleet.spec.group_id) if a.group.kind.keeps_journal else None
    progress = watches_progress(draft.status, seen.plan.waiting)
    return PassResult(waiting=seen.plan.waiting, follows=follows, watches_progress=progress)


async def write(a: Admitted, draft: Draft) -> None:
    """The draft written in one status write; then what its pieces said posted and their ``written`` run."""
    record = a.record
    record.defer_changes(draft.patch())
    try:
        await record.flush()
    except ApiCallFailed:
        for piece in draft.pieces:
            if piece.unwritten is not None:
                piece.unwritten()
        raise
    for piece in draft.pieces:
        for event_type, reason, message in piece.said:
            (record.events.info if event_type == "Normal" else record.events.warning)(reason, message)
        if piece.written is not None:
            piece.written()
