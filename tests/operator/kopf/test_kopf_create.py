"""Creating a ConsumerFleet: the operator creates its StatefulSet, headless Service and PodDisruptionBudget as
docs/architecture.md pins them, pre-registers the members, grows the StatefulSet, and mirrors the group into status."""

from __future__ import annotations

import aiohttp
from kopf_apiserver import DISRUPTION_BUDGETS, FLEETS, SERVICES, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    OperatorFactory,
    condition,
    create_fleet,
    fleet_body,
    fleet_status,
    join_static_members,
    messages,
    requests_to,
    statefulset,
    stored,
    until,
    until_async,
)
from support.api import Api
from support.coordinator import CoordinatorProcess


async def test_create_makes_the_statefulset_service_and_member_environment(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url)
    body = fleet_body("orders", 3)
    body["spec"]["coordinator"] = {"tokenSecretRef": {"name": "orders-token", "key": "token"}}
    created = await create_fleet(apiserver, body)
    uid = created["metadata"]["uid"]

    sts = await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 3 and s, "size 3")
    owner = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "name": "orders",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert sts["metadata"]["ownerReferences"] == [owner]
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["serviceName"] == "orders"
    labels = {
        "app.kubernetes.io/name": "berth-consumer",
        "app.kubernetes.io/instance": "orders",
        "berth.dev/fleet": "orders",
    }
    assert sts["spec"]["selector"] == {"matchLabels": labels}
    assert sts["spec"]["template"]["metadata"]["labels"] == {"team": "shop", **labels}
    env = {entry["name"]: entry for entry in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BERTH_GROUP_ID"]["value"] == "orders"
    assert env["BERTH_GROUP_INSTANCE_ID"]["valueFrom"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
    }
    assert env["BERTH_COORDINATOR_URL"]["value"] == coordinator.url
    session_ms = int(env["BERTH_SESSION_TIMEOUT_MS"]["value"])
    # Auto: (grace 10 s + no probe + scheduling 10 s) x 1.5 = 30 s.
    assert session_ms == 30_000
    assert env["BERTH_REBALANCE_TIMEOUT_MS"]["value"] == "300000"
    assert int(env["BERTH_HEARTBEAT_INTERVAL_MS"]["value"]) <= session_ms // 3
    assert env["BERTH_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "orders-token", "key": "token"}}
    assert env["LOG_LEVEL"]["value"] == "info"

    service = stored(apiserver, SERVICES, "orders")
    assert service is not None
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == labels
    assert service["metadata"]["ownerReferences"] == [owner]
    budget = stored(apiserver, DISRUPTION_BUDGETS, "orders")
    assert budget is not None and budget["metadata"]["ownerReferences"] == [owner]
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": labels},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    # A fleet without volume claim templates leaves the StatefulSet's own fields to Kubernetes' defaults.
    assert not {"volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy", "updateStrategy"} & sts["spec"].keys()

    # Pre-registered before the StatefulSet grew, then the pods (the test's controller) and their members.
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{coordinator.url}/v1/groups/orders/expected-members") as response,
    ):
        assert (await response.json())["group_instance_ids"] == ["orders-0", "orders-1", "orders-2"]
    await until(lambda: len(controller.pods("orders")) == 3, "3 pods")
    await join_static_members(api, "orders", ["orders-0", "orders-1", "orders-2"])
    ready = await until(
        lambda: (c := condition(apiserver, "orders", "Ready")) and c["status"] == "True" and c, "Ready=True"
    )
    assert ready["reason"] == "GroupStable"
    status = fleet_status(apiserver, "orders")
    assert status["group"]["state"] == "Stable"
    assert status["group"]["members"] == ["orders-0", "orders-1", "orders-2"]
    assert status["instanceIds"] == ["orders-0", "orders-1", "orders-2"]
    assert status["replicas"] == 3 and status["readyReplicas"] == 3
    assert (
        status["selector"]
        == "app.kubernetes.io/instance=orders,app.kubernetes.io/name=berth-consumer,berth.dev/fleet=orders"
    )
    assert status["sessionTimeoutMs"] == 30_000
    assert status["sessionTimeoutReason"].startswith("estimated restart 20.0 s")
    assert status["observedGeneration"] == 1
    assert status["departing"] == []
    assert condition(apiserver, "orders", "SpecValid")["status"] == "True"  # type: ignore[index]
    assert condition(apiserver, "orders", "CoordinatorReachable")["status"] == "True"  # type: ignore[index]

    assert messages(apiserver, "orders", "PreRegistered") == [
        "expected members of group orders: orders-0, orders-1, orders-2"
    ]
    assert messages(apiserver, "orders", "Scaled") == ["scaled to 3 replicas"]
    assert any("created StatefulSet orders" in m for m in messages(apiserver, "orders", "Created"))
    (created,) = messages(apiserver, "orders", "Created")  # one Event for the StatefulSet, Service and budget
    assert "created headless Service orders" in created
    assert "created PodDisruptionBudget orders (maxUnavailable 1; unhealthy pods always evictable)" in created
    assert "retainedClaims" not in status
    assert len(messages(apiserver, "orders", "SessionTimeout")) == 1
    await until_async(lambda: _described(api), "describe")


async def _described(api: Api) -> bool:
    return (await api.describe("orders"))["group_state"] == "Stable"


async def test_a_new_fleet_is_patched_once_its_finalizer_and_its_label_together(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    start_operator: OperatorFactory,
) -> None:
    """Kopf's finalizer and the fleet's own label go out in one patch of the fleet (issue 31: a new fleet's
    requests), and nothing else patches the fleet's metadata (no last-handled configuration is stored)."""
    await start_operator("--coordinator-url", coordinator.url)
    await create_fleet(apiserver, fleet_body("orders", 1))
    await until(lambda: fleet_status(apiserver, "orders").get("selector"), "status")
    await until(lambda: statefulset(apiserver, "orders")["spec"]["replicas"] == 1, "size 1")
    stored_fleet = stored(apiserver, FLEETS, "orders") or {}
    assert stored_fleet["metadata"]["finalizers"] == ["berth.dev/finalizer"]
    assert stored_fleet["metadata"]["labels"]["berth.dev/fleet"] == "orders"
    patches = requests_to(apiserver, "PATCH", "/consumerfleets/orders")
    assert len(patches) == 1, patches
    assert not any(key.startswith("berth.dev/") for key in stored_fleet["metadata"].get("annotations") or {})
