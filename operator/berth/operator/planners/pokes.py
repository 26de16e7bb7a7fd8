"""Which changes of a fleet ask for a pass: what a pass reads of the fleet, as controller-runtime's predicates
filter watch events (``GenerationChangedPredicate``, and the pause annotation).

A pass reads the fleet's spec (its ``metadata.generation`` moves with it), the pause annotation and its own status.
Its own status is the operator's to write, so a change of the status alone (each status write is a watch event) asks
for no pass; neither does a change of the metadata no pass reads (Kopf's finalizer, the fleet's label). Rules:

- a fleet this operator has not passed yet asks for a pass (created, or found when the operator started);
- a generation other than the one its last pass started from asks for one (its spec changed);
- the pause annotation and the ``Paused`` condition disagreeing asks for one (``planners.pause.pause_unseen``);
- nothing else does: the passes that status or time call for come from the work queue's own timing.

An owned object's change asks for a pass when it moves the fleet's workload view (the watch cache tells which of its
fields moved: ``adapters.kube.observation.view_changes``), except the fields only the StatefulSet's controller
moves as it catches up with a spec it was given (:data:`PROGRESS`: ``settled``, its observedGeneration reaching the
generation; ``revision``, its update revision). A pass uses them only

- while it waits (a scale-down waits for the StatefulSet to reach its size before the batch leave; a deletion for
  it to reach 0),
- while the fleet is Ready (a restart burst ends, and the quiet revision is recorded, once the fleet is Ready and
  settled: ``planners.restarts``), or a restart burst is open (a new revision makes it a rollout);

so outside those (:func:`watches_progress`, decided from how the fleet's last pass ended) their change pokes
nobody: the thousand StatefulSets of a burst of new fleets, which their controller reports on one by one at its own
pace, ask for no second pass each. A rollout starting (``rolling``), pods appearing, going or turning Ready, the
StatefulSet as applied and anything else a pass reads still poke every time; so does everything of a fleet not
passed yet, or whose last pass failed.

Pure: the generation a pass started from, and whether the fleet watches progress, are the caller's to remember.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from berth.operator.planners.fleet_status import condition_status
from berth.operator.planners.pause import pause_unseen
from berth.operator.planners.restarts import RESTARTS
from berth.operator.planners.status import READY

#: The workload view's fields only the StatefulSet's controller moves, catching up with its spec.
PROGRESS = frozenset({"settled", "revision"})


def wants_pass(body: Mapping[str, Any], passed_generation: int | None) -> bool:
    """Whether this version of the fleet asks for a pass (``passed_generation``: the generation its last pass by
    this operator started from; None: none yet)."""
    generation = (body.get("metadata") or {}).get("generation")
    return passed_generation is None or generation != passed_generation or pause_unseen(body)


def watches_progress(status: Mapping[str, Any], waiting: str | None) -> bool:
    """Whether the StatefulSet controller's progress alone (:data:`PROGRESS`) can change what the fleet's next pass
    decides, after a pass that left ``status`` and waits for ``waiting`` (None: converged)."""
    restarts = status.get(RESTARTS)
    ongoing = restarts.get("ongoing") if isinstance(restarts, Mapping) else None
    return waiting is not None or condition_status(status, READY) == "True" or ongoing is not None


def owned_change_wants_pass(moved: Collection[str], progress_watched: bool) -> bool:
    """Whether an owned object's change that moved ``moved`` (fields of the workload view, or what else the watch
    cache names) asks for a pass of a fleet that watches progress or not (``progress_watched``)."""
    return bool(moved) and (progress_watched or not set(moved) <= PROGRESS)
