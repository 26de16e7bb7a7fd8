"""The ports carry every planner action: in-memory fakes implement them (``fake_ports``), and a minimal driver runs
plans on them. The driver here is the mapping documented in ``berth.operator.ports``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fake_ports import InMemoryCoordinator, NamesFleet

from berth.operator.planners.scaling import (
    BatchLeave,
    ClearExpectedMembers,
    DeleteGroup,
    PatchStatus,
    PutExpectedMembers,
    ReleaseGroup,
    ScaleWorkload,
    ScalingObservation,
    ScalingPlan,
    ScalingStatus,
    plan_scaling,
    record_scale_down,
)
from berth.operator.ports import (
    CoordinatorPort,
    WorkloadPort,
)


async def run_plan(
    plan: ScalingPlan,
    group: str,
    workload: WorkloadPort,
    coordinator: CoordinatorPort,
    status: dict[str, Any],
    now: datetime,
) -> None:
    for action in plan.actions:
        match action:
            case PatchStatus(patch):
                status.update(patch)
            case PutExpectedMembers(ids):
                await coordinator.put_expected_members(group, ids)
            case ClearExpectedMembers():
                await coordinator.delete_expected_members(group)
            case ScaleWorkload(replicas):
                await workload.scale(replicas)
            case BatchLeave():
                results = await coordinator.leave_instances(group, action.member_ids)
                status.update(record_scale_down(action, results, now=now).patch)
            case DeleteGroup():
                assert await coordinator.delete_group(group) in ("NONE", "GROUP_ID_NOT_FOUND")
            case ReleaseGroup():
                await coordinator.release_group(group, "uid")


async def reconcile(
    desired: int,
    workload: WorkloadPort,
    coordinator: CoordinatorPort,
    status: dict[str, Any],
    now: datetime,
    **flags: Any,
) -> ScalingPlan:
    seen = (await workload.observe()).observation
    observation = ScalingObservation(
        fleet_name="orders",
        desired_replicas=desired,
        workload_replicas=seen.replicas,
        existing_pods=seen.existing,
        workload_settled=seen.settled,
        status=ScalingStatus.from_status(status),
        group_members=(await coordinator.describe("orders")).static_instance_ids(),
        **flags,
    )
    plan = plan_scaling(observation, now=now)
    await run_plan(plan, "orders", workload, coordinator, status, now)
    return plan


async def test_a_local_fleet_scales_down_and_is_deleted_through_the_ports(now: datetime) -> None:
    fleet, coordinator = NamesFleet("orders"), InMemoryCoordinator()
    status: dict[str, Any] = {}
    await fleet.scale(0)

    await reconcile(5, fleet, coordinator, status, now)
    coordinator.members["orders"] = set(fleet.members)  # the five members join
    assert coordinator.expected["orders"] == tuple(f"orders-{o}" for o in range(5))

    first = await reconcile(3, fleet, coordinator, status, now)
    assert first.waiting is not None  # shrunk; the leave waits for the next look
    second = await reconcile(3, fleet, coordinator, status, now + timedelta(seconds=8))
    assert second.done
    assert coordinator.leaves == [("orders", ("orders-3", "orders-4"))]
    assert status["lastScaleDown"]["seconds"] == 8

    while not (await reconcile(3, fleet, coordinator, status, now, deleting=True)).done:
        pass
    assert coordinator.leaves[-1] == ("orders", ("orders-0", "orders-1", "orders-2"))
    assert "orders" not in coordinator.members
    assert "orders" not in coordinator.expected
