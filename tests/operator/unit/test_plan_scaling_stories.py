"""The scaling planner, story by story (docs/architecture.md "Scaling": scale-down, scale-up, deletion), exactly.

Each story feeds the planner the observation an operator would make at that moment, applies the status patches
it asked for (as the driver would), and checks the next plan. Fleet ``orders``; ids are ``orders-<ordinal>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import pytest

from berth.operator.planners import scaling
from berth.operator.planners.scaling import (
    BatchLeave,
    ClearExpectedMembers,
    DeleteGroup,
    PatchStatus,
    PutExpectedMembers,
    ScaleWorkload,
    ScalingObservation,
    ScalingPlan,
    ScalingStatus,
    plan_scaling,
    record_scale_down,
)

T0 = "2026-03-01T12:00:00Z"


def ids(*ordinals: int) -> tuple[str, ...]:
    return tuple(f"orders-{ordinal}" for ordinal in ordinals)


def pods(*ordinals: int) -> frozenset[str]:
    return frozenset(ids(*ordinals))


def observe(
    desired: int, workload: int | None, existing: frozenset[str], status: dict[str, Any], **flags: Any
) -> ScalingObservation:
    return ScalingObservation(
        fleet_name="orders",
        desired_replicas=desired,
        workload_replicas=workload,
        existing_pods=existing,
        status=ScalingStatus.from_status(status),
        **flags,
    )


def patched(status: dict[str, Any], actions: Iterable[object]) -> dict[str, Any]:
    """The status after the driver wrote the plan's PatchStatus actions."""
    result = dict(status)
    for action in actions:
        if isinstance(action, PatchStatus):
            result.update(action.patch)
    return result


SETTLED_AT_5 = {"departing": [], "departingSince": None, "expectedMembers": list(ids(0, 1, 2, 3, 4))}


def test_scale_down_5_to_3_records_narrows_shrinks_waits_then_leaves_once(now: datetime) -> None:
    # 1. The departing ids are recorded first, then expected members narrowed, then the StatefulSet shrunk.
    plan = plan_scaling(observe(3, 5, pods(0, 1, 2, 3, 4), SETTLED_AT_5), now=now)
    assert plan == ScalingPlan(
        (
            PatchStatus({"departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": None}),
            PutExpectedMembers(ids(0, 1, 2)),
            PatchStatus({"expectedMembers": list(ids(0, 1, 2))}, durable=False),
            ScaleWorkload(3),
        ),
        waiting="waiting for the StatefulSet to reach 3 replicas before orders-3, orders-4 leave",
    )
    status = patched(SETTLED_AT_5, plan.actions)

    # 2. Shrunk, but orders-4 is still terminating (and then orders-3): nothing to do but wait.
    later = now + timedelta(seconds=20)
    deleted = {"terminating": {"orders-4": later}}
    assert plan_scaling(observe(3, 3, pods(0, 1, 2, 3, 4), status, **deleted), now=later) == ScalingPlan(
        (), waiting="waiting for pods orders-3, orders-4 to terminate before they leave the group"
    )
    deleted = {"terminating": {"orders-3": later}}
    assert plan_scaling(observe(3, 3, pods(0, 1, 2, 3), status, **deleted), now=later) == ScalingPlan(
        (), waiting="waiting for pod orders-3 to terminate before they leave the group"
    )

    # 3. Both gone: ONE leave naming both.
    gone_at = now + timedelta(seconds=41)
    plan = plan_scaling(observe(3, 3, pods(0, 1, 2), status), now=gone_at)
    leave = BatchLeave(ids(3, 4), departing_since=T0)
    assert plan == ScalingPlan((leave,))
    assert plan.done

    # 4. The driver records the answer; an id the coordinator no longer knew had already left: fine, it departs no
    # longer, but this leave did not remove it.
    record = record_scale_down(leave, {"orders-3": "NONE", "orders-4": "UNKNOWN_MEMBER_ID"}, now=gone_at)
    assert record == PatchStatus(
        {
            "departing": [],
            "departingSince": None,
            "lastScaleDown": {
                "removed": list(ids(3)),
                "results": {"orders-3": "NONE", "orders-4": "UNKNOWN_MEMBER_ID"},
                "expiring": None,
                "seconds": 41,
                "at": "2026-03-01T12:00:41Z",
                # Counted once the group settles (rebalances_since_leave), never asserted here.
                "fromGeneration": None,
                "rebalances": None,
            },
        }
    )
    assert plan_scaling(observe(3, 3, pods(0, 1, 2), patched(status, [record])), now=gone_at) == ScalingPlan(())


def test_scale_up_3_to_5_widens_expected_members_before_growing(now: datetime) -> None:
    status = {"departing": [], "expectedMembers": list(ids(0, 1, 2))}

    plan = plan_scaling(observe(5, 3, pods(0, 1, 2), status), now=now)

    assert plan == ScalingPlan(
        (
            PatchStatus({"expectedMembers": None}),
            PutExpectedMembers(ids(0, 1, 2, 3, 4)),
            PatchStatus({"expectedMembers": list(ids(0, 1, 2, 3, 4))}, durable=False),
            ScaleWorkload(5),
        )
    )
    assert plan_scaling(observe(5, 5, pods(0, 1, 2), patched(status, plan.actions)), now=now) == ScalingPlan(())


def test_scaling_back_up_before_the_pods_are_gone_cancels_the_departures(now: datetime) -> None:
    status = patched(SETTLED_AT_5, plan_scaling(observe(3, 5, pods(0, 1, 2, 3, 4), SETTLED_AT_5), now=now).actions)
    assert status["departing"] == list(ids(3, 4))

    # Back to 5 while orders-3 and orders-4 are still terminating.
    plan = plan_scaling(observe(5, 3, pods(0, 1, 2, 3, 4), status), now=now)

    # They are not left, and stay recorded until the StatefulSet covers them again: an operator stopped before
    # ScaleWorkload(5) while the fleet went back to 3 would otherwise have no record that they were its own.
    assert plan == ScalingPlan(
        (
            PatchStatus({"departing": list(ids(3, 4)), "departingSince": None, "expectedMembers": None}),
            PutExpectedMembers(ids(0, 1, 2, 3, 4)),
            PatchStatus({"expectedMembers": list(ids(0, 1, 2, 3, 4))}, durable=False),
            ScaleWorkload(5),
        )
    )
    # Once the StatefulSet is back at 5, they are off the list, and nothing is left to leave.
    after = plan_scaling(observe(5, 5, pods(0, 1, 2), patched(status, plan.actions)), now=now)
    assert after == ScalingPlan((PatchStatus({"departing": [], "departingSince": None}),))
    assert plan_scaling(observe(5, 5, pods(0, 1, 2), patched(status, plan.actions + after.actions)), now=now) == (
        ScalingPlan(())
    )


def test_a_cancelled_departure_is_not_forgotten_when_the_fleet_shrinks_again_before_it_grew(now: datetime) -> None:
    """Found by the scaling properties (Hypothesis): 1 -> 0 (orders-0 departing), back to 1 (the operator records
    the cancellation, then stops before the StatefulSet grows), then 0 again: orders-0 must still depart and leave,
    not be left to its session timeout as a member nobody recorded."""
    at_1 = {"departing": [], "departingSince": None}
    status = patched(at_1, plan_scaling(observe(0, 1, pods(0), at_1), now=now).actions)
    assert status["departing"] == list(ids(0))
    cancelled = plan_scaling(observe(1, 0, pods(0), status), now=now).actions
    status = patched(status, cancelled[:1])  # the operator stops after its first action
    assert status["departing"] == list(ids(0))  # still recorded: the StatefulSet is at 0
    plan = plan_scaling(observe(0, 0, pods(), status), now=now)
    assert any(isinstance(a, BatchLeave) and a.instance_ids == ids(0) for a in plan.actions)


def test_a_partial_scale_back_keeps_the_remaining_departures_and_when_they_began(now: datetime) -> None:
    status = {"departing": list(ids(2, 3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1))}

    plan = plan_scaling(observe(3, 2, pods(0, 1, 2, 3), status), now=now + timedelta(seconds=5))

    assert plan == ScalingPlan(
        (
            # orders-2 is no longer departing (it is not left), but stays recorded until the StatefulSet covers it:
            # the record is as it was.
            PatchStatus({"expectedMembers": None}),
            PutExpectedMembers(ids(0, 1, 2)),
            PatchStatus({"expectedMembers": list(ids(0, 1, 2))}, durable=False),
            ScaleWorkload(3),
        ),
        waiting="waiting for the StatefulSet to reach 3 replicas before orders-3, orders-4 leave",
    )


def test_a_second_scale_down_before_the_leave_joins_the_same_single_leave(now: datetime) -> None:
    status = {"departing": list(ids(4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2, 3))}

    plan = plan_scaling(observe(3, 4, pods(0, 1, 2, 3, 4), status), now=now + timedelta(seconds=3))
    status = patched(status, plan.actions)

    assert status["departing"] == list(ids(3, 4))
    assert status["departingSince"] == T0
    assert plan_scaling(observe(3, 3, pods(0, 1, 2), status), now=now).actions == (BatchLeave(ids(3, 4), T0),)


def test_no_leave_until_the_statefulset_controller_acts_on_the_new_size(now: datetime) -> None:
    # The spec says 3, but the controller has not seen it yet and could still create orders-3 or orders-4.
    status = {"departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2))}

    plan = plan_scaling(observe(3, 3, pods(0, 1, 2), status, workload_settled=False), now=now)

    assert plan == ScalingPlan(
        (), waiting="waiting for the StatefulSet to reach 3 replicas before orders-3, orders-4 leave"
    )


def test_pods_of_a_statefulset_shrunk_behind_the_operators_back_depart_too(now: datetime) -> None:
    # kubectl scale statefulset orders --replicas=3: orders-3 is terminating and was never recorded as departing.
    status = {"expectedMembers": list(ids(0, 1, 2))}

    plan = plan_scaling(observe(3, 3, pods(0, 1, 2, 3), status, terminating={"orders-3": now}), now=now)

    assert plan == ScalingPlan(
        (PatchStatus({"departing": list(ids(3)), "departingSince": T0}),),
        waiting="waiting for pod orders-3 to terminate before they leave the group",
    )


def test_an_operator_restarted_between_shrink_and_leave_leaves_exactly_once(now: datetime) -> None:
    # All the new operator has is the status the old one wrote, and what it observes.
    recovered = {"departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2))}

    first = plan_scaling(observe(3, 3, pods(0, 1, 2), recovered), now=now)
    assert first.actions == (BatchLeave(ids(3, 4), T0),)

    leave = first.actions[0]
    assert isinstance(leave, BatchLeave)
    record = record_scale_down(leave, {"orders-3": "NONE", "orders-4": "NONE"}, now=now)
    assert plan_scaling(observe(3, 3, pods(0, 1, 2), patched(recovered, [record])), now=now).actions == ()


def test_an_operator_restarted_after_recording_but_before_shrinking_resumes_the_shrink(now: datetime) -> None:
    recovered = {"departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2, 3, 4))}

    plan = plan_scaling(observe(3, 5, pods(0, 1, 2, 3, 4), recovered), now=now + timedelta(minutes=1))

    assert plan.actions == (
        PatchStatus({"expectedMembers": None}),
        PutExpectedMembers(ids(0, 1, 2)),
        PatchStatus({"expectedMembers": list(ids(0, 1, 2))}, durable=False),
        ScaleWorkload(3),
    )


def test_a_crash_between_changing_expected_members_and_recording_them_puts_them_again(now: datetime) -> None:
    settled = {"departing": [], "expectedMembers": list(ids(0, 1, 2))}
    plan = plan_scaling(observe(5, 3, pods(0, 1, 2), settled), now=now)
    # The operator widened the list at the coordinator, then crashed before recording it or growing the fleet.
    crashed = patched(settled, plan.actions[:2])
    assert crashed["expectedMembers"] is None

    # Back to 3 before it restarts: the coordinator still expects orders-3 and orders-4, so narrow it again.
    assert plan_scaling(observe(3, 3, pods(0, 1, 2), crashed), now=now).actions == (
        PatchStatus({"expectedMembers": None}),
        PutExpectedMembers(ids(0, 1, 2)),
        PatchStatus({"expectedMembers": list(ids(0, 1, 2))}, durable=False),
    )


def test_an_id_whose_leave_failed_stays_departing_and_is_left_again(now: datetime) -> None:
    leave = BatchLeave(ids(3, 4), T0)
    record = record_scale_down(leave, {"orders-3": "NONE", "orders-4": "COORDINATOR_NOT_AVAILABLE"}, now=now)

    assert record.patch["departing"] == list(ids(4))
    assert record.patch["departingSince"] == T0
    assert record.patch["lastScaleDown"]["removed"] == list(ids(3))
    status = patched({"expectedMembers": list(ids(0, 1, 2))}, [record])
    assert plan_scaling(observe(3, 3, pods(0, 1, 2), status), now=now).actions == (BatchLeave(ids(4), T0),)


def test_without_leave_on_scale_down_the_departure_is_recorded_but_nobody_is_told_or_said_removed(
    now: datetime,
) -> None:
    """Issue 30: ``lastScaleDown.removed`` listed the departed ids though nothing was removed, and once they were no
    longer departing, the group's members that were the fleet's own departed pods passed for foreign ones."""
    status = {"departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2))}
    group = frozenset(ids(0, 1, 2, 3))  # orders-4's session already expired; orders-3's has not

    plan = plan_scaling(
        observe(3, 3, pods(0, 1, 2), status, leave_on_scale_down=False, group_members=group),
        now=now + timedelta(seconds=30),
    )

    assert plan == ScalingPlan(
        (
            PatchStatus(
                {
                    "departing": [],
                    "departingSince": None,
                    "lastScaleDown": {
                        "removed": [],
                        "results": {},
                        "seconds": 30,
                        "at": "2026-03-01T12:00:30Z",
                        "fromGeneration": None,
                        "rebalances": None,
                        "expiring": list(ids(3)),
                    },
                }
            ),
        )
    )
    # orders-3 stays the fleet's own while the group keeps it: not foreign, and not departing (or left) again.
    status = patched(status, plan.actions)
    later = plan_scaling(observe(3, 3, pods(0, 1, 2), status, leave_on_scale_down=False, group_members=group), now=now)
    assert later == ScalingPlan(())
    # Once its session expired the group lets it go, and so does lastScaleDown.expiring.
    gone = observe(3, 3, pods(0, 1, 2), status, leave_on_scale_down=False, group_members=frozenset(ids(0, 1, 2)))
    assert plan_scaling(gone, now=now).actions == (PatchStatus({"lastScaleDown": {"expiring": None}}),)


def test_a_fleet_scaled_back_over_what_it_left_to_expire_takes_it_back(now: datetime) -> None:
    status = {
        "departing": [],
        "expectedMembers": list(ids(0, 1, 2)),
        "lastScaleDown": {"removed": [], "expiring": list(ids(3, 4))},
    }
    group = frozenset(ids(0, 1, 2, 3, 4))
    plan = plan_scaling(
        observe(4, 4, pods(0, 1, 2, 3), status, leave_on_scale_down=False, group_members=group), now=now
    )
    last = plan.actions[-1]
    assert isinstance(last, PatchStatus) and last.patch["lastScaleDown"] == {"expiring": list(ids(4))}
    assert plan.foreign_members == ()
    # A second scale-down without a leave keeps what the first left to expire, while the group lists it.
    status = {"departing": list(ids(2)), "departingSince": T0, **{k: v for k, v in status.items() if k != "departing"}}
    plan = plan_scaling(observe(2, 2, pods(0, 1), status, leave_on_scale_down=False, group_members=group), now=now)
    record = next(a for a in plan.actions if isinstance(a, PatchStatus) and "lastScaleDown" in a.patch)
    assert record.patch["lastScaleDown"]["expiring"] == list(ids(3, 4, 2))
    assert record.patch["lastScaleDown"]["removed"] == []
    assert plan.foreign_members == ()


def test_without_pre_registration_a_leftover_list_is_cleared_once_and_never_put(now: datetime) -> None:
    plan = plan_scaling(observe(5, 3, pods(0, 1, 2), {}, pre_register=False), now=now)

    assert plan.actions == (
        PatchStatus({"expectedMembers": None}),
        ClearExpectedMembers(),
        PatchStatus({"expectedMembers": []}, durable=False),
        ScaleWorkload(5),
    )
    status = patched({}, plan.actions)
    assert plan_scaling(observe(5, 5, pods(0, 1, 2), status, pre_register=False), now=now).actions == ()


def test_a_member_named_like_the_fleet_that_it_has_no_record_of_is_never_left(now: datetime) -> None:
    # orders-3 is in the group, but no pod, StatefulSet ordinal or status of this fleet ever had it: another
    # team's consumer that took the name (or a member of this fleet whose record was lost, which expires alone).
    status = {"expectedMembers": list(ids(0, 1, 2))}

    plan = plan_scaling(observe(3, 3, pods(0, 1, 2), status, group_members=pods(0, 1, 2, 3)), now=now)

    assert plan == ScalingPlan((), foreign_members=("orders-3",))


def test_members_of_other_fleets_in_the_same_group_are_not_ours_to_leave(now: datetime) -> None:
    status = {"expectedMembers": list(ids(0, 1, 2))}
    others = frozenset({"orders-eu-7", "orders-07", "billing-3"})

    plan = plan_scaling(observe(3, 3, pods(0, 1, 2), status, group_members=pods(0, 1, 2) | others), now=now)

    assert plan == ScalingPlan((), foreign_members=("billing-3", "orders-07", "orders-eu-7"))


def test_an_older_status_without_departing_since_gets_one(now: datetime) -> None:
    status = {"departing": list(ids(3)), "expectedMembers": list(ids(0, 1, 2))}

    plan = plan_scaling(observe(3, 3, pods(0, 1, 2, 3), status), now=now)

    assert plan.actions == (PatchStatus({"departing": list(ids(3)), "departingSince": T0}),)


def test_nothing_happens_before_the_statefulset_exists(now: datetime) -> None:
    assert plan_scaling(observe(3, None, frozenset(), {}), now=now) == ScalingPlan(
        (), waiting="the StatefulSet does not exist yet: apply it (at 0 replicas) first"
    )


def test_a_new_fleet_pre_registers_all_members_before_its_first_pod(now: datetime) -> None:
    assert plan_scaling(observe(3, 0, frozenset(), {}), now=now).actions == (
        PatchStatus({"expectedMembers": None}),
        PutExpectedMembers(ids(0, 1, 2)),
        PatchStatus({"expectedMembers": list(ids(0, 1, 2))}, durable=False),
        ScaleWorkload(3),
    )


@pytest.mark.parametrize("leave_on_scale_down", [True, False])
def test_deletion_scales_to_zero_then_leaves_everyone_then_deletes_the_group(
    now: datetime, leave_on_scale_down: bool
) -> None:
    flags = {"deleting": True, "leave_on_scale_down": leave_on_scale_down}
    everyone = ids(0, 1, 2, 3, 4)

    plan = plan_scaling(observe(5, 5, pods(0, 1, 2, 3, 4), SETTLED_AT_5, **flags), now=now)
    assert plan == ScalingPlan(
        (
            PatchStatus({"departing": list(everyone), "departingSince": T0, "expectedMembers": None}),
            ClearExpectedMembers(),
            PatchStatus({"expectedMembers": []}, durable=False),
            ScaleWorkload(0),
        ),
        waiting=f"waiting for the StatefulSet to reach 0 replicas before {', '.join(everyone)} leave",
    )
    status = patched(SETTLED_AT_5, plan.actions)

    deleted = {"terminating": {"orders-1": now}}
    assert plan_scaling(observe(5, 0, pods(0, 1), status, **flags, **deleted), now=now).waiting == (
        "waiting for pods orders-0, orders-1 to terminate before they leave the group"
    )

    # A group with members cannot be deleted, so everyone leaves even when leaveOnScaleDown is false.
    plan = plan_scaling(observe(5, 0, frozenset(), status, **flags), now=now)
    assert plan == ScalingPlan((BatchLeave(everyone, T0, everyone=True), DeleteGroup()))

    # Replayed after the finalizer's work but before it was removed: only the (idempotent) delete again.
    record = record_scale_down(BatchLeave(everyone, T0, everyone=True), dict.fromkeys(everyone, "NONE"), now=now)
    assert plan_scaling(observe(5, 0, frozenset(), patched(status, [record]), **flags), now=now) == ScalingPlan(
        (DeleteGroup(),)
    )


def test_the_group_is_deleted_only_once_the_statefulset_controller_has_scaled_to_zero(now: datetime) -> None:
    status: dict[str, Any] = {"expectedMembers": []}

    plan = plan_scaling(observe(3, 0, frozenset(), status, deleting=True, workload_settled=False), now=now)

    assert plan == ScalingPlan(
        (), waiting="waiting for the StatefulSet to reach 0 replicas before the group is deleted"
    )


def test_deleting_a_fleet_whose_statefulset_is_already_gone(now: datetime) -> None:
    status: dict[str, Any] = {"expectedMembers": []}

    assert plan_scaling(observe(3, None, frozenset(), status, deleting=True), now=now) == ScalingPlan((DeleteGroup(),))


@pytest.mark.parametrize(
    "others",
    [{"group_members": frozenset({"orders-9"})}, {"dynamic_members": ("consumer-1-4a1f",)}],
    ids=["named-like-the-fleet", "dynamic"],
)
def test_a_deletion_keeps_a_group_with_members_it_did_not_create_and_only_releases_its_claim(
    now: datetime, others: dict[str, Any]
) -> None:
    """Deleting the group would delete the others' committed offsets (and the coordinator refuses a group with
    members): with a member the fleet has no record of in it, the deletion releases the claim and keeps the group."""
    plan = plan_scaling(observe(3, None, frozenset(), {"expectedMembers": []}, deleting=True, **others), now=now)

    foreign = ("orders-9",) if "group_members" in others else ("consumer-1-4a1f",)
    assert plan == ScalingPlan((scaling.ReleaseGroup(),), foreign_members=foreign)


def test_a_pod_stuck_terminating_holds_the_leave_only_for_its_allowance(now: datetime) -> None:
    """5 -> 3, OrderedReady: orders-4 sticks in Terminating (its node is gone), so the StatefulSet never deletes
    orders-3. Within the allowance the operator waits; past it, orders-4 leaves alone, with a Warning, and orders-3
    leaves in a second batch once it is gone too. orders-4 does not leave again while it is still Terminating."""
    grace_ends = now + timedelta(seconds=30)
    allowance = timedelta(minutes=2)
    status = {**SETTLED_AT_5, "departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2))}
    stuck = {"terminating": {"orders-4": grace_ends}, "stuck_allowance": allowance}

    within = plan_scaling(observe(3, 3, pods(0, 1, 2, 3, 4), status, **stuck), now=grace_ends + allowance)
    assert within == ScalingPlan((), "waiting for pods orders-3, orders-4 to terminate before they leave the group")

    past = grace_ends + allowance + timedelta(seconds=1)
    plan = plan_scaling(observe(3, 3, pods(0, 1, 2, 3, 4), status, **stuck), now=past)
    leave = BatchLeave(ids(4), T0, stuck=ids(4), later=ids(3))
    assert plan == ScalingPlan((leave,), "waiting for orders-3 to terminate before they leave the group too")
    status = patched(status, [record_scale_down(leave, {"orders-4": "NONE"}, now=past)])
    assert status["departing"] == ["orders-3"]

    # orders-4 is still there, Terminating: it is not departing again, and only orders-3 is waited for.
    again = plan_scaling(observe(3, 3, pods(0, 1, 2, 3, 4), status, **stuck), now=past + timedelta(seconds=5))
    assert again == ScalingPlan(
        (),
        "waiting for the StatefulSet to delete pod orders-3, which it does once orders-4 is gone"
        " (podManagementPolicy OrderedReady)",
    )
    gone = plan_scaling(observe(3, 3, pods(0, 1, 2, 4), status, **stuck), now=past + timedelta(seconds=9))
    assert gone.actions == (BatchLeave(ids(3), T0),)


def test_a_stuck_pod_whose_member_is_still_in_the_group_is_not_left_and_the_wait_names_its_node(
    now: datetime,
) -> None:
    """5 -> 4: orders-4 sticks in Terminating past its allowance, but the group still lists its member (its node is
    cut off from the API server, not from the coordinator: the pod may still run). It is not left; the wait names
    its node. Once its session expires (the group no longer lists it), it leaves (a no-op at the coordinator)."""
    grace_ends = now + timedelta(seconds=30)
    allowance = timedelta(minutes=2)
    status = {**SETTLED_AT_5, "departing": list(ids(4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2, 3))}
    stuck = {
        "terminating": {"orders-4": grace_ends},
        "stuck_allowance": allowance,
        "nodes": {"orders-4": "node-c"},
    }
    past = grace_ends + allowance + timedelta(seconds=1)
    listed = plan_scaling(
        observe(4, 4, pods(0, 1, 2, 3, 4), status, group_members=frozenset(ids(0, 1, 2, 3, 4)), **stuck), now=past
    )
    assert listed.actions == ()
    assert listed.waiting is not None
    assert listed.waiting.startswith("orders-4 on node node-c: Terminating past its grace period")
    assert "its member is still in the group, so the pod may still run" in listed.waiting
    # A thread-suffixed member of the pod counts as its member too.
    threads = plan_scaling(
        observe(4, 4, pods(0, 1, 2, 3, 4), status, group_members=frozenset({*ids(0, 1, 2, 3), "orders-4-1"}), **stuck),
        now=past,
    )
    assert threads.actions == ()
    expired = plan_scaling(
        observe(4, 4, pods(0, 1, 2, 3, 4), status, group_members=frozenset(ids(0, 1, 2, 3)), **stuck), now=past
    )
    assert expired.actions == (BatchLeave(ids(4), T0, stuck=ids(4)),)


def test_a_shrink_an_unready_pod_holds_up_names_that_pod_and_its_node(now: datetime) -> None:
    """3 -> 2 under OrderedReady while orders-0 is on a node that stopped reporting (never Ready again until the node
    is dealt with): the StatefulSet deletes nothing, and the wait says so, naming the pod and its node."""
    status = {**SETTLED_AT_5, "departing": list(ids(2)), "departingSince": T0, "expectedMembers": list(ids(0, 1))}
    plan = plan_scaling(
        observe(2, 2, pods(0, 1, 2), status, workload_settled=False, unready=frozenset(ids(0)),
                nodes={"orders-0": "node-c"}),
        now=now,
    )  # fmt: skip
    assert plan.waiting == (
        "waiting for the StatefulSet to reach 2 replicas before orders-2 leave: it deletes no pod while orders-0 on"
        " node node-c is not Ready (podManagementPolicy OrderedReady)"
    )
    parallel = observe(
        2, 2, pods(0, 1, 2), status, workload_settled=False, unready=frozenset(ids(0)), ordered_ready=False
    )
    assert (
        plan_scaling(parallel, now=now).waiting
        == "waiting for the StatefulSet to reach 2 replicas before orders-2 leave"
    )


def test_what_a_scale_down_waits_for_is_said_as_it_is(now: datetime) -> None:
    """Departing pods that still exist and are not Terminating have not been deleted yet: the wait says why, not
    "to terminate" (a StatefulSet under OrderedReady deletes no pod while another is not Ready)."""
    status = {**SETTLED_AT_5, "departing": list(ids(3, 4)), "departingSince": T0, "expectedMembers": list(ids(0, 1, 2))}

    unhealthy = observe(3, 3, pods(0, 1, 2, 3, 4), status, unready=pods(0))
    assert plan_scaling(unhealthy, now=now).waiting == (
        "the StatefulSet deletes no pod while orders-0 is not Ready (podManagementPolicy OrderedReady):"
        " orders-3, orders-4 leave the group once deleted"
    )
    # The departing pod unready itself does not block its own deletion; Parallel deletes whatever is unready.
    for quiet in (
        observe(3, 3, pods(0, 1, 2, 3, 4), status, unready=pods(4)),
        observe(3, 3, pods(0, 1, 2, 3, 4), status, unready=pods(0), ordered_ready=False),
    ):
        assert plan_scaling(quiet, now=now).waiting == (
            "waiting for the StatefulSet to delete pods orders-3, orders-4 before they leave the group"
        )
    deleting = observe(3, 3, pods(0, 1, 2, 3, 4), status, unready=pods(0), terminating={"orders-4": now})
    assert plan_scaling(deleting, now=now).waiting == (
        "waiting for pods orders-3, orders-4 to terminate before they leave the group"
    )
