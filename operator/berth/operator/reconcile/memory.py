"""What the operator remembers of one fleet between its passes: :class:`FleetMemory`, one per fleet.

Everything a pass may remember is a field here, named for the feature that keeps it, so a step reaches the memory
of its own feature through the pass's :class:`~berth.operator.reconcile.scope.Scope` and no other feature's dict.
Rules: one memory per fleet (per uid: a fleet deleted and created again under its name starts afresh), kept by
whoever runs the passes (the reconciler, berth-demo's loop, a unit test) and forgotten with the fleet; memory is
what makes a pass say a thing once, never what decides an irreversible step (those plan from status, which a
restarted operator reads again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.operator.planners.evidence import EvidenceState
from berth.operator.planners.instance_conflicts import ConflictState
from berth.operator.planners.restarts import NOTHING, GroupActivity


@dataclass
class FleetMemory:
    uid: str = ""
    #: ``reconcile.scaling``: the last wait announced (a ``Waiting`` Event once per wait, not once per pass).
    waiting: str | None = None
    #: ``contributors.members`` (Kafka): who held each instance id since when, and the conflicts already announced
    #: as (reason, instance id, member id).
    conflicts: ConflictState = field(default_factory=ConflictState)
    announced: set[tuple[str, str, str]] = field(default_factory=set)
    #: ``contributors.evidence`` (coordinators without a journal): the group as last observed.
    evidence: EvidenceState = field(default_factory=EvidenceState)
    #: ``contributors.lag``: why the lag could not be read, as last logged (once, not once per pass).
    lag_problem: str | None = None
    #: ``contributors.lag`` writes, ``contributors.stuck`` reads: the partitions known to exist, as ``topic:N``: those
    #: the last lag read measured (Kafka), or the group's committed partitions (Berth's coordinator, no partition log).
    known_partitions: frozenset[str] = frozenset()
    #: ``contributors.lag`` (Berth's coordinator): the group as it was when its committed partitions were read
    #: (``stuck_group.membership``: generation, state, members); read again only when that changes.
    known_at: object = None
    #: ``contributors.restarts``: what the journal (or the evidence) said of the group since the last pass that
    #: counted it (the reconciler adds the journal follower's pages for the group the fleet follows).
    activity: GroupActivity = NOTHING
    #: The reconciler: the (coordinator URL, group id) whose journal status follows, and the advice key that sizes
    #: the fleet, as its last pass said; its failures in a row and since when it waits (monotonic seconds); the
    #: generation its last pass started from (``planners.pokes``: a change of anything else asks for no pass).
    follows: tuple[str, str] | None = None
    advised_by: str | None = None
    failures: int = 0
    waiting_since: float | None = None
    generation: int | None = None
    #: Whether the StatefulSet controller's progress alone pokes the fleet (``planners.pokes``), as its last pass
    #: said; True for a fleet not passed yet and after a failed pass.
    watches_progress: bool = True
