"""Scaling a fleet through the operator, with real static members in a real coordinator.

Scale-down: the departing ids are recorded, the StatefulSet shrinks, and only once those pods are gone does ONE
batch leave remove them. Scale-up: the expected members are widened before the StatefulSet grows. An operator
restarted between the shrink and the leave still leaves exactly once.
"""

from __future__ import annotations

import json
import urllib.request

import aiohttp
import kmock
from kopf_apiserver import FLEETS, STATEFULSETS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    ORDERS,
    OperatorFactory,
    assert_left_once,
    fleet_status,
    group_members,
    messages,
    patch_fleet_spec,
    running_fleet,
    shrink_and_hold,
    sizes_after_creation,
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
    assert sizes_after_creation(controller, "orders") == [5, 3]


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

    # The coordinator's expected members as the StatefulSet's growth to 5 arrives at the API server (the operator
    # waits for its answer: whatever it sent the coordinator before it is done).
    expected_at_growth: list[list[str]] = []

    def growth(request: kmock.Request) -> bool:
        data = request.data
        return (
            request.method.value.upper() == "PATCH"
            and request.url.path.endswith("/statefulsets/orders")
            and isinstance(data, dict)
            and (data.get("spec") or {}).get("replicas") == 5
        )

    def look(request: kmock.Request) -> None:
        url = f"{coordinator.url}/v1/groups/orders/expected-members"
        with urllib.request.urlopen(url, timeout=10) as answer:
            expected_at_growth.append(json.loads(answer.read())["group_instance_ids"])

    apiserver.on_request(growth, look)
    await patch_fleet_spec(apiserver, "orders", {"replicas": 5})
    await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 5, "the growth")
    assert expected_at_growth == [ALL]
    # Recorded in status too, with the pass's status write (nothing after the widening depends on that record).
    await until(lambda: fleet_status(apiserver, "orders").get("expectedMembers") == ALL, "the record")
    # Events are posted in the background, after the pass's status write: wait for this one.
    said = f"expected members of group orders: {', '.join(ALL)}"
    await until(lambda: messages(apiserver, "orders", "PreRegistered")[-1:] == [said], "the PreRegistered Event")
    await until(lambda: len(controller.pods("orders")) == 5, "5 pods")
    assert sizes_after_creation(controller, "orders") == [3, 5]


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
