"""Deleting a fleet: the finalizer scales it to zero, leaves everyone, deletes the group, then releases the object.
This test also runs the operator cluster-wide (no --namespace: Kopf's resource scanning on)."""

from __future__ import annotations

import aiohttp
from kopf_apiserver import FLEETS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    OperatorFactory,
    condition,
    create_fleet,
    delete_fleet,
    fleet_body,
    join_static_members,
    journal,
    messages,
    statefulset,
    stored,
    until,
)
from support.api import Api
from support.coordinator import CoordinatorProcess


async def test_delete_scales_to_zero_leaves_everyone_deletes_the_group_then_releases(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url, namespaced=False)
    await create_fleet(apiserver, fleet_body("orders", 2))
    await until(lambda: len(controller.pods("orders")) == 2, "2 pods")
    await join_static_members(api, "orders", ["orders-0", "orders-1"])
    await until(lambda: (c := condition(apiserver, "orders", "Ready")) and c["status"] == "True", "Ready=True")
    assert (stored(apiserver, FLEETS, "orders") or {})["metadata"]["finalizers"] == ["berth.dev/finalizer"]

    await delete_fleet(apiserver, "orders")
    await until(lambda: stored(apiserver, FLEETS, "orders") is None, "the fleet released", timeout_s=60)

    # kmock has no garbage collector: the StatefulSet is still there, scaled to zero by the finalizer.
    assert (statefulset(apiserver, "orders") or {})["spec"]["replicas"] == 0
    assert controller.pods("orders") == {}
    events = await journal(session, coordinator.url, "orders")
    left = [e["group_instance_id"] for e in events if e["type"] == "member_left" and e.get("via") == "admin"]
    assert left == ["orders-0", "orders-1"]
    assert events[-1]["type"] == "group_deleted"
    described = await api.describe("orders")
    assert described["group_state"] == "Dead"

    await until(lambda: messages(apiserver, "orders", "Finalized"), "the Finalized Event")
    assert messages(apiserver, "orders", "LeftGroup") == ["left the group: orders-0, orders-1 (the group is now empty)"]
    assert messages(apiserver, "orders", "GroupDeleted") == ["deleted group orders"]
    assert messages(apiserver, "orders", "Scaled")[-1] == "scaled to 0 replicas"
