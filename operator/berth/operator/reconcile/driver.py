"""Carry out a scaling plan (``planners.scaling``) against the ports, in order, stopping at the first failure.

Owns nothing but the mapping from actions to port calls (``ports`` documents it) and the Event each action is
worth. Called by the scaling step (``reconcile.scaling``) only, so the operator, ``berth-demo`` and Kafka fleets
scale exactly the same way. Rules:

- Actions run in the plan's order; a durable status patch is written before the next action starts (it may be what
  a restarted operator resumes from); a record of what was done that nothing after depends on
  (``PatchStatus.durable`` False) is sent with the pass's next status write (``FleetRecord.defer``).
- A failed action stops the plan: nothing after it runs; the next reconcile plans again from observations.
- Every coordinator write carries ``owner_uid`` (the fleet's uid where the coordinator's kind records owners, so a
  group that is another fleet's refuses it: ``ports.GroupOwned``); ``ReleaseGroup`` lets go of the fleet's claim
  (the planner plans it only there, and it needs the uid).
- The batch leave's per-id results are written back at once with ``record_scale_down`` (lastScaleDown); it names
  ``BatchLeave.member_ids`` (the departing pods' ids and their thread-suffixed members), never an empty list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from berth.operator.planners.scaling import (
    BatchLeave,
    ClearExpectedMembers,
    DeleteGroup,
    PatchStatus,
    PutExpectedMembers,
    ReleaseGroup,
    ScaleWorkload,
    ScalingPlan,
    record_scale_down,
)
from berth.operator.reconcile.admission import Admitted

#: Told of every batch leave and its per-id results (the Kafka evidence journal records them).
LeaveListener = Callable[[BatchLeave, Mapping[str, str]], Awaitable[None]]


class GroupStillHasMembers(RuntimeError):
    """DeleteGroups answered NON_EMPTY_GROUP: someone is still in the group; retried on the next reconcile."""


async def execute_plan(plan: ScalingPlan, a: Admitted, on_leave: LeaveListener | None = None) -> None:
    """``plan``'s actions on ``a``'s ports, in order; ``on_leave`` told of every batch leave and its answers."""
    group_id, workload, coordinator, events = a.fleet.spec.group_id, a.workload, a.group.coordinator, a.record.events
    patch_status, owner_uid = a.record.write_changes, a.group.kind.owner_uid(a.record.uid)
    for action in plan.actions:
        if isinstance(action, PatchStatus):
            if action.durable:
                await patch_status(action.patch)
            else:
                a.record.defer_changes(action.patch)
        elif isinstance(action, PutExpectedMembers):
            await coordinator.put_expected_members(group_id, action.instance_ids, owner_uid=owner_uid)
            events.info("PreRegistered", f"expected members of group {group_id}: {_ids(action.instance_ids)}")
        elif isinstance(action, ClearExpectedMembers):
            await coordinator.delete_expected_members(group_id, owner_uid=owner_uid)
            events.info("PreRegistrationCleared", f"group {group_id} no longer waits for expected members")
        elif isinstance(action, ScaleWorkload):
            await workload.scale(action.replicas)
            events.info("Scaled", f"scaled to {_count(action.replicas, 'replica')}")
        elif isinstance(action, BatchLeave):
            if not action.member_ids:  # KIP-571: an empty list would remove every member
                raise ValueError("a batch leave must name at least one instance id")
            results = dict(await coordinator.leave_instances(group_id, action.member_ids, owner_uid=owner_uid))
            record = record_scale_down(action, results, now=a.now())
            await patch_status(record.patch)
            if on_leave is not None:
                await on_leave(action, results)
            left_any = any(results.get(name) == "NONE" for name in action.member_ids)
            events.info("LeftGroup" if left_any else "NotInGroup", describe_leave(action, results))
            if action.stuck:
                events.warning(
                    "PodStuckTerminating",
                    f"{_ids(list(action.stuck))} still Terminating past {'its' if len(action.stuck) == 1 else 'their'}"
                    " grace period and the allowance (a node gone?): left the group without waiting any longer",
                )
        elif isinstance(action, DeleteGroup):
            outcome = await coordinator.delete_group(group_id, owner_uid=owner_uid)
            if outcome == "NON_EMPTY_GROUP":
                raise GroupStillHasMembers(f"group {group_id} still has members; it will be deleted once empty")
            events.info("GroupDeleted", f"deleted group {group_id}")
        elif isinstance(action, ReleaseGroup) and owner_uid:
            await coordinator.release_group(group_id, owner_uid)
            events.info("GroupReleased", f"released group {group_id}: it is kept, owned by no fleet")


def describe_leave(leave: BatchLeave, results: Mapping[str, str]) -> str:
    """``left the group: orders-3, orders-4``, with the ids that were not members set apart. The rebalances it
    costs are counted once the group settles (``lastScaleDown.rebalances`` and a ``Rebalanced`` Event), not
    asserted here."""
    ids = leave.member_ids
    left = [i for i in ids if results.get(i) == "NONE"]
    gone = [i for i in ids if results.get(i) == "UNKNOWN_MEMBER_ID"]
    failed = [f"{i} ({results.get(i, 'no answer')})" for i in ids if i not in left and i not in gone]
    parts = []
    if left:
        # Removing every member empties the group: nobody is left to rebalance.
        parts.append(f"left the group: {_ids(left)}" + (" (the group is now empty)" if leave.everyone else ""))
    if gone:
        parts.append(f"not in the group (never joined or already gone): {_ids(gone)}")
    if failed:
        parts.append(f"could not leave: {', '.join(failed)}")
    return "; ".join(parts) or "nobody to leave"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _ids(ids: tuple[str, ...] | list[str]) -> str:
    return ", ".join(ids) if ids else "(none)"
