"""The ports carry every planner action: in-memory fakes implement them, and a minimal driver runs plans on them.

The fakes are typed against the Protocols (mypy checks them structurally), so a port change that would break the
adapters breaks this file first. The driver here is the mapping documented in ``berth.operator.ports``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from berth.operator.planners.observations import CoordinatorBounds, GroupDescription, GroupMember, GroupOwnerRef
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
from berth.operator.planners.statefulset import PlannedWorkload
from berth.operator.ports import (
    Applied,
    ApplyResult,
    CoordinatorPort,
    WorkloadObservation,
    WorkloadPort,
    WorkloadView,
)


class LocalFleet:
    """A WorkloadPort whose members are names in a set (the local-process fleet, minus the processes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.replicas: int | None = None
        self.members: set[str] = set()
        self.environment: dict[str, dict[str, str]] = {}
        self.planned: PlannedWorkload | None = None

    async def apply(self, planned: PlannedWorkload) -> ApplyResult:
        first = self.planned is None
        self.planned = planned
        await self.scale(planned.replicas)
        return ApplyResult(Applied.CREATED if first else Applied.UNCHANGED)

    async def scale(self, replicas: int) -> None:
        self.replicas = replicas
        self.members = {f"{self.name}-{o}" for o in range(replicas)}

    async def observe(self) -> WorkloadView:
        seen = WorkloadObservation(
            replicas=self.replicas, settled=True, existing=frozenset(self.members), ready=len(self.members)
        )
        return WorkloadView(seen, None, len(self.members))


class InMemoryCoordinator:
    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}
        self.expected: dict[str, tuple[str, ...]] = {}
        self.leaves: list[tuple[str, tuple[str, ...]]] = []
        self.owners: dict[str, GroupOwnerRef] = {}

    @property
    def pre_registers(self) -> bool:
        return True

    @property
    def endpoint(self) -> str:
        return "memory://"

    async def get_config(self) -> CoordinatorBounds:
        return CoordinatorBounds(6_000, 1_800_000)

    @property
    def records_owners(self) -> bool:
        return True

    async def claim_group(self, group_id: str, owner: GroupOwnerRef, *, adopt: bool) -> None:
        self.owners[group_id] = owner

    async def release_group(self, group_id: str, owner_uid: str) -> None:
        self.owners.pop(group_id, None)

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> None:
        self.expected[group_id] = tuple(instance_ids)

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        self.expected.pop(group_id, None)

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        self.leaves.append((group_id, tuple(instance_ids)))
        group = self.members.setdefault(group_id, set())
        results = {i: "NONE" if i in group else "UNKNOWN_MEMBER_ID" for i in instance_ids}
        group.difference_update(instance_ids)
        return results

    async def describe(self, group_id: str) -> GroupDescription:
        members = tuple(GroupMember(f"{i}-id", i) for i in sorted(self.members.get(group_id, ())))
        return GroupDescription(group_id, "Stable" if members else "Empty", 1, None, members)

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        if self.members.get(group_id):
            return "NON_EMPTY_GROUP"
        return "NONE" if self.members.pop(group_id, None) is not None else "GROUP_ID_NOT_FOUND"


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
    fleet, coordinator = LocalFleet("orders"), InMemoryCoordinator()
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
