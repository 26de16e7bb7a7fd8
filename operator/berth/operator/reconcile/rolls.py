"""The roll step of sizing: a changed pod template that would roll the fleet's pods takes a turn first
(``planners.roll_pacing``: at most ``--max-concurrent-rolls`` fleets roll at once), and status says when it waits.

Rules:
- A change rolls the pods when the StatefulSet exists, its applied plan differs from the new one and its pod
  template does too (``berth.dev/template-hash``; a StatefulSet applied before that annotation existed counts as a
  change), under the RollingUpdate strategy (``OnDelete`` replaces a pod only when someone deletes it). A new
  fleet's StatefulSet, a resize and a change outside the template take no turn.
- No turn: the StatefulSet is left as it is (``WorkloadPort.apply(hold=True)``); ``TemplateApplied=False``
  (``RollQueued``, with the fleet's place in line) and one ``RollQueued`` Event when it starts waiting. The fleet is
  poked when a turn is offered to it (the pacer's ``on_offer``); the pass looks again by itself when a counted roll
  would stop counting (``Turn.recheck_at``).
- Once applied, ``TemplateApplied`` turns True (only on a fleet that had waited: a fleet that never waited carries
  no such condition).
- A pass that does not leave the fleet waiting (it needed no turn, or it ended before the roll step: paused,
  refused, a coordinator or an API call failing) takes it out of the line when it ends (``pass_ended``), so a turn
  offered to it goes on to the next in line; it asks again, at the back, when it next would roll.
"""

from __future__ import annotations

from datetime import UTC, datetime

from berth.operator.planners.conditions import Condition
from berth.operator.planners.manifest_hash import planned_hash, template_hash
from berth.operator.planners.roll_pacing import Turn
from berth.operator.planners.statefulset import PlannedWorkload
from berth.operator.ports import Applied, WorkloadView
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.scope import Scope

TEMPLATE_APPLIED = "TemplateApplied"
ROLL_QUEUED = "RollQueued"


def rolls_pods(view: WorkloadView, planned: PlannedWorkload) -> bool:
    """Whether applying ``planned`` would roll the pods of the fleet's existing StatefulSet (the module docstring)."""
    statefulset = planned.statefulset
    strategy = (statefulset.get("spec") or {}).get("updateStrategy") or {}
    if view.applied_hash is None or strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return False
    if view.template_hash is None:  # applied before the annotation existed: any change of the plan counts
        return view.applied_hash != planned_hash(statefulset)
    return view.template_hash != template_hash(statefulset)


def turn(a: Admitted, view: WorkloadView, planned: PlannedWorkload) -> Turn | None:
    """The fleet's turn to roll, when the plan would roll its pods and rolls are paced; None: it needs none."""
    pacer = a.ports.rolls
    if pacer is None or not rolls_pods(view, planned):
        return None
    got = pacer.take((a.fleet.namespace, a.fleet.name), a.ports.now().timestamp())
    a.record.in_line = not got.admitted
    if not got.admitted and got.recheck_at is not None:
        at = datetime.fromtimestamp(got.recheck_at, UTC)
        a.record.again_at = at if a.record.again_at is None else min(a.record.again_at, at)
    return got


def pass_ended(scope: Scope) -> None:
    """However the pass ended: a fleet it did not leave waiting is out of the line (paused, refused, its coordinator
    or the API failing before the roll step, its change reverted or applied), so a turn offered to it goes on to the
    next in line at once instead of waiting for a pass that may not come."""
    pacer = scope.ports.rolls
    if pacer is not None and not scope.record.in_line:
        pacer.withdraw((scope.record.namespace, scope.record.name), scope.now().timestamp())


def noted(a: Admitted, got: Turn | None, applied: Applied) -> tuple[Condition, ...]:
    """The ``TemplateApplied`` condition (and the Event of a fleet that starts waiting)."""
    before = a.record.condition(TEMPLATE_APPLIED)
    if applied is Applied.HELD and got is not None:
        if before != "False":
            a.record.events.info(ROLL_QUEUED, f"the changed pod template waits for its turn to roll: {_line(got)}")
        return (Condition(TEMPLATE_APPLIED, "False", ROLL_QUEUED, f"waits for its turn to roll: {_line(got)}"),)
    if before is None:
        return ()
    return (Condition(TEMPLATE_APPLIED, "True", "Applied", "the fleet's pod template is applied"),)


def _line(got: Turn) -> str:
    return (
        f"{got.rolling} of at most {got.limit} fleets are rolling (--max-concurrent-rolls), this fleet is number"
        f" {got.place} in line"
    )
