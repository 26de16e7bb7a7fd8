"""Scaling a fleet through the operator, with real static members in a real coordinator.

Scale-down: the departing ids are recorded, the StatefulSet shrinks, and only once those pods are gone does ONE
batch leave remove them. Scale-up: the expected members are widened before the StatefulSet grows. An operator
restarted between the shrink and the leave still leaves exactly once.
"""

from __future__ import annotations

import aiohttp
from kopf_apiserver import FLEETS, STATEFULSETS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    ORDERS,
    OperatorFactory,
    assert_left_once,
    group_members,
    messages,
    patch_fleet_spec,
    requests_to,
    running_fleet,
    shrink_and_hold,
    statefulset,
    until,
)
from support.api import Api
from support.coordinator import CoordinatorProcess

ALL = ORDERS


async def test_scale_down_leaves_once_after_the_pods_are_gone(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url)
    await running_fleet(apiserver, controller, api, 5)

    await shrink_and_hold(apiserver, controller, api)
    controller.release()
    await assert_left_once(apiserver, session, coordinator.url)
    assert await group_members(api) == {"orders-0", "orders-1", "orders-2"}
    # The expected members were narrowed before the shrink, so the rebalance waits for nobody who is leaving.
    async with session.get(f"{coordinator.url}/v1/groups/orders/expected-members") as response:
        assert (await response.json())["group_instance_ids"] == ALL[:3]
    assert controller.sizes_seen["orders"] == [0, 5, 3]


async def test_scale_up_widens_the_expected_members_before_the_statefulset_grows(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url)
    await running_fleet(apiserver, controller, api, 3)

    await patch_fleet_spec(apiserver, "orders", {"replicas": 5})
    await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 5, "the growth")
    async with session.get(f"{coordinator.url}/v1/groups/orders/expected-members") as response:
        assert (await response.json())["group_instance_ids"] == ALL
    # In the API server's request log: the status write recording all five expected members comes before the
    # StatefulSet's size is patched to 5 (and that record is only written once the coordinator accepted the list).
    widened = [
        at
        for at, body in requests_to(apiserver, "PATCH", "/consumerfleets/orders/status")
        if (body.get("status") or {}).get("expectedMembers") == ALL
    ]
    grown = [
        at
        for at, body in requests_to(apiserver, "PATCH", "/statefulsets/orders")
        if isinstance(body, dict) and body.get("spec", {}).get("replicas") == 5
    ]
    assert widened and grown and widened[0] < grown[0]
    assert messages(apiserver, "orders", "PreRegistered")[-1] == f"expected members of group orders: {', '.join(ALL)}"
    await until(lambda: len(controller.pods("orders")) == 5, "5 pods")
    assert controller.sizes_seen["orders"] == [0, 3, 5]


async def test_operator_restarted_between_shrink_and_leave_still_leaves_exactly_once(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    first = await start_operator("--coordinator-url", coordinator.url)
    await running_fleet(apiserver, controller, api, 5)
    await shrink_and_hold(apiserver, controller, api)
    await first.stop()

    # While no operator runs, the departing pods go away.
    controller.release()
    await until(lambda: sorted(controller.pods("orders")) == [0, 1, 2], "the departing pods gone")
    assert await group_members(api) == set(ALL)

    await start_operator("--coordinator-url", coordinator.url)
    await assert_left_once(apiserver, session, coordinator.url)
    assert apiserver.objects[FLEETS, "shop", "orders"]["status"]["departing"] == []
    assert apiserver.objects[STATEFULSETS, "shop", "orders"]["spec"]["replicas"] == 3
