"""Which changes of a fleet ask for a pass: what a pass reads of the fleet, as controller-runtime's predicates
filter watch events (``GenerationChangedPredicate``, and the pause annotation).

A pass reads the fleet's spec (its ``metadata.generation`` moves with it), the pause annotation and its own status.
Its own status is the operator's to write, so a change of the status alone (each status write is a watch event) asks
for no pass; neither does a change of the metadata no pass reads (Kopf's finalizer, the fleet's label). Rules:

- a fleet this operator has not passed yet asks for a pass (created, or found when the operator started);
- a generation other than the one its last pass started from asks for one (its spec changed);
- the pause annotation and the ``Paused`` condition disagreeing asks for one (``planners.pause.pause_unseen``);
- nothing else does: the passes that status or time call for come from the work queue's own timing.

Pure: the generation a pass started from is the caller's to remember.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth.operator.planners.pause import pause_unseen


def wants_pass(body: Mapping[str, Any], passed_generation: int | None) -> bool:
    """Whether this version of the fleet asks for a pass (``passed_generation``: the generation its last pass by
    this operator started from; None: none yet)."""
    generation = (body.get("metadata") or {}).get("generation")
    return passed_generation is None or generation != passed_generation or pause_unseen(body)
