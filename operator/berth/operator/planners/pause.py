"""Pausing a fleet: ``berth.dev/paused: "true"`` on the ConsumerFleet (the anchors: Strimzi's
``strimzi.io/pause-reconciliation``, KEDA's ``autoscaling.keda.sh/paused``).

Owns the condition ``Paused`` and what a paused pass writes. Rules:

- Paused (the annotation's value is ``true``, in any case): a pass changes nothing anywhere — no apply, no scaling,
  no pre-registration, no leave, no claim, no call to the coordinator — and writes only ``Paused=True`` and
  ``Ready=Unknown`` (reason ``Paused``: the operator no longer looks), with ``observedGeneration``, so a spec
  edited meanwhile shows it was seen and not acted on. Any other value, or none, is not paused.
- The fleet's deletion is not paused: the finalizer still scales to zero and leaves (a paused fleet can be
  deleted as any other).
- Resuming is removing the annotation (or setting it to anything else): the next pass reconciles as usual and
  ``Paused`` turns False.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berth.operator.planners.conditions import Condition, merge_conditions
from berth.operator.planners.status import READY
from berth.operator.spec.names import PAUSED_ANNOTATION

PAUSED = "Paused"
#: The Events on the transitions.
PAUSED_EVENT = "Paused"
RESUMED_EVENT = "Resumed"
PAUSED_MESSAGE = (
    f'{PAUSED_ANNOTATION} is "true": the operator changes nothing for this fleet (no apply, no scaling, no leave)'
    " and no longer follows its group, until the annotation is removed"
)
RESUMED_MESSAGE = f'{PAUSED_ANNOTATION} is no longer "true": reconciling the fleet again'
NOT_PAUSED = Condition(PAUSED, "False", "Reconciling", f"reconciled as usual ({PAUSED_ANNOTATION} is not set)")


def pause_unseen(body: Mapping[str, Any], **_: Any) -> bool:
    """The fleet's annotation says one thing and its ``Paused`` condition another: a pass has yet to see it."""
    status = body.get("status") or {}
    shown = any(c.get("type") == PAUSED and c.get("status") == "True" for c in status.get("conditions") or [])
    return is_paused(body) != shown


def is_paused(body: Mapping[str, Any]) -> bool:
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(PAUSED_ANNOTATION, "")).strip().lower() == "true"


def paused_patch(status: Mapping[str, Any], *, now: datetime, generation: int | None) -> dict[str, Any]:
    """What a paused pass writes: Paused=True, Ready=Unknown (reason Paused), the generation it saw."""
    conditions = merge_conditions(
        status.get("conditions"),
        [
            Condition(READY, "Unknown", PAUSED, PAUSED_MESSAGE),
            Condition(PAUSED, "True", "Annotation", PAUSED_MESSAGE),
        ],
        now=now,
        observed_generation=generation,
    )
    return {"conditions": conditions, "observedGeneration": generation}


def was_paused(status: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == PAUSED and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
