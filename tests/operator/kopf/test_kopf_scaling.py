"""Scaling a fleet through the operator, with real static members in a real coordinator.

Scale-down: the departing ids are recorded, the StatefulSet shrinks, and only once those pods are gone does ONE
batch leave remove them. Scale-up: the expected members are widened before the StatefulSet grows. An operator
restarted between the shrink and the leave still leaves exactly once.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from kopf_apiserver import FLEETS, STATEFULSETS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    OperatorFactory,
    condition,
    create_fleet,
    fleet_body,
    fleet_status,
    join_static_members,
    journal,
    messages,
    passes_after,
    patch_fleet_spec,
    requests_to,
    statefulset,
    until,
)
from support.api import Api
from support.coordinator import CoordinatorProcess

ALL = [f"orders-{ordinal}" for ordinal in range(5)]


async def _running_fleet(
    apiserver: ApiServer, controller: StatefulSetController, api: Api, replicas: int
) -> dict[str, str]:
    """Fleet ``orders`` at ``replicas`` pods, each with a real static member in the Stable group."""
    await create_fleet(apiserver, fleet_body("orders", replicas))
    await until(lambda: len(controller.pods("orders")) == replicas, f"{replicas} pods")
    members = await join_static_members(api, "orders", ALL[:replicas])
    await until(lambda: (c := condition(apiserver, "orders", "Ready")) and c["status"] == "True", "Ready=True")
    return members


async def _group_members(api: Api) -> set[str]:
    described = await api.describe("orders")
    return {member["group_instance_id"] for member in described["members"]}


def _left_by_admin(events: list[dict[str, Any]]) -> list[str]:
    return [e["group_instance_id"] for e in events if e["type"] == "member_left" and e.get("via") == "admin"]


async def _shrink_and_hold(apiserver: ApiServer, controller: StatefulSetController, api: Api) -> None:
    """5 -> 3 with the departing pods held in Terminating: recorded, shrunk, and nobody has left yet."""
    controller.hold = True
    await patch_fleet_spec(apiserver, "orders", {"replicas": 3})
    await until(lambda: fleet_status(apiserver, "orders").get("departing") == ["orders-3", "orders-4"], "departing")
    await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 3, "the shrink")
    await until(lambda: "deletionTimestamp" in controller.pods("orders")[4]["metadata"], "orders-4 terminating")
    await until(
        lambda: (c := condition(apiserver, "orders", "ScaleDownPending")) and c["status"] == "True", "ScaleDownPending"
    )
    # The pods still exist, so their members are still in the group: no leave yet.
    assert await _group_members(api) == set(ALL)
    await until(lambda: any("to terminate" in m for m in messages(apiserver, "orders", "Waiting")), "the waiting Event")
    assert await _group_members(api) == set(ALL)


def _scale_down_records(apiserver: ApiServer) -> list[int]:
    """Positions in the request log of the status writes recording a batch leave."""
    writes = requests_to(apiserver, "PATCH", "/consumerfleets/orders/status")
    return [at for at, body in writes if "lastScaleDown" in body["status"]]


async def _assert_left_once(
    apiserver: ApiServer, session: aiohttp.ClientSession, coordinator: CoordinatorProcess
) -> None:
    last = await until(lambda: fleet_status(apiserver, "orders").get("lastScaleDown"), "lastScaleDown")
    recorded = [
        at for at, body in requests_to(apiserver, "PATCH", "/orders/status") if "lastScaleDown" in body["status"]
    ]
    # A second leave, if any, would come from a later pass: let a few run before counting.
    await passes_after(apiserver, "orders", recorded[0])
    assert last["removed"] == ["orders-3", "orders-4"]
    assert last["results"] == {"orders-3": "NONE", "orders-4": "NONE"}
    assert fleet_status(apiserver, "orders")["departing"] == []
    # Events are posted in the background: wait for the first, then check it is the only one.
    await until(lambda: messages(apiserver, "orders", "LeftGroup"), "the LeftGroup Event")
    assert (
        len([at for at, body in requests_to(apiserver, "PATCH", "/orders/status") if "lastScaleDown" in body["status"]])
        == 1
    )
    assert messages(apiserver, "orders", "LeftGroup") == ["left the group: orders-3, orders-4 (1 rebalance)"]
    events = await journal(session, coordinator.url, "orders")
    assert _left_by_admin(events) == ["orders-3", "orders-4"]
    left_at = max(i for i, e in enumerate(events) if e["type"] == "member_left")
    rebalances = [e for e in events[left_at:] if e["type"] == "rebalance_started"]
    assert [e["cause"] for e in rebalances] == ["member_left"]


async def test_scale_down_leaves_once_after_the_pods_are_gone(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url)
    await _running_fleet(apiserver, controller, api, 5)

    await _shrink_and_hold(apiserver, controller, api)
    controller.release()
    await _assert_left_once(apiserver, session, coordinator)
    assert await _group_members(api) == {"orders-0", "orders-1", "orders-2"}
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
    await _running_fleet(apiserver, controller, api, 3)

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
    await _running_fleet(apiserver, controller, api, 5)
    await _shrink_and_hold(apiserver, controller, api)
    await first.stop()

    # While no operator runs, the departing pods go away.
    controller.release()
    await until(lambda: sorted(controller.pods("orders")) == [0, 1, 2], "the departing pods gone")
    assert await _group_members(api) == set(ALL)

    await start_operator("--coordinator-url", coordinator.url)
    await _assert_left_once(apiserver, session, coordinator)
    assert apiserver.objects[FLEETS, "shop", "orders"]["status"]["departing"] == []
    assert apiserver.objects[STATEFULSETS, "shop", "orders"]["spec"]["replicas"] == 3
