"""The workload contributor: the workload and the group as the pass saw them (``planners.fleet_status.view_patch``:
replicas, Ready and the pods not ready, the group, SpecValid=True and CoordinatorReachable=True), and what their
changes are worth saying once written: pods the token Secret keeps from starting, or that exit on their Kafka
credentials (``planners.pod_credentials``; a Warning Event when Ready's reason becomes either), a fleet accepted
after a refusal, a coordinator answering again.
"""

from __future__ import annotations

from berth.operator.planners import fleet_status, pod_credentials
from berth.operator.planners.announcements import Said
from berth.operator.planners.instances import instance_ids
from berth.operator.planners.status import COORDINATOR_REACHABLE, READY
from berth.operator.ports import WorkloadView
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import Contribution, Draft, Seen
from berth.operator.spec.fleet import Fleet


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    fleet, view, before = a.fleet, seen.view, draft.before
    not_ready = _not_ready(fleet, view)
    blocked = (
        fleet_status.token_secret_blocked(fleet, view.observation.config_errors.values())
        or pod_credentials.credentials_failing(fleet, view.observation.crashes)
        if not_ready
        else None
    )
    patch = fleet_status.view_patch(
        fleet_name=fleet.name,
        group_id=fleet.spec.group_id,
        desired_replicas=fleet.spec.replicas,
        status=before,
        selector=seen.sized.planned.selector,
        running=view.running,
        ready=view.observation.ready,
        description=seen.description,
        unreachable_reason="",
        now=draft.now,
        generation=draft.generation,
        not_ready=not_ready,
        blocked=blocked,
    )
    said: list[Said] = []
    ready_before = fleet_status.find_condition(before, READY) or {}
    if blocked is not None and ready_before.get("reason") != blocked.reason:
        said.append(("Warning", blocked.reason, blocked.message))
    if fleet_status.condition_status(before, fleet_status.SPEC_VALID) == "False":
        said.append(("Normal", "Accepted", "the spec is valid and the group is this fleet's: reconciling it"))
    if fleet_status.condition_status(before, COORDINATOR_REACHABLE) == "False":
        said.append(("Normal", "CoordinatorReachable", f"the coordinator at {a.group.where} answers again"))
    return Contribution(patch=patch, said=tuple(said))


def _not_ready(fleet: Fleet, view: WorkloadView) -> tuple[str, ...]:
    """The fleet's instance ids without a running, Ready pod (when the view names its unready pods)."""
    seen = view.observation
    ready = set(seen.existing) - set(seen.terminating) - seen.unready
    missing = tuple(name for name in instance_ids(fleet.name, fleet.spec.replicas) if name not in ready)
    # A local fleet does not name its unready members: name nothing rather than the wrong ones.
    return missing if len(missing) == max(0, fleet.spec.replicas - seen.ready) else ()
