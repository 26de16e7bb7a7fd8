"""Session-timeout sizing through the operator: a confident journal advice from the analytics ConfigMap replaces
the estimate, reaches the pods' environment, status and an Event, and a meaningful change rolls the template."""

from __future__ import annotations

import json
from typing import Any

from kopf_apiserver import CONFIGMAPS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import OperatorFactory, create_fleet, fleet_body, fleet_status, messages, statefulset, until
from support.coordinator import CoordinatorProcess


def _advice(advised_ms: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "berth-advice", "namespace": "berth"},
        "data": {
            "advice.json": json.dumps(
                {
                    "version": 1,
                    "generated_at_ms": 1_795_000_000_000 + advised_ms,
                    "groups": {
                        "orders": {
                            "advised_session_timeout_ms": advised_ms,
                            "samples": 240,
                            "confident": True,
                            "reason": f"p99 of 240 restart gaps; x1.5 + 3.0 s heartbeat = {advised_ms / 1000:.1f} s",
                        }
                    },
                }
            )
        },
    }


def _session_timeout_env(apiserver: ApiServer) -> str | None:
    sts = statefulset(apiserver, "orders")
    if sts is None:
        return None
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    return env.get("BERTH_SESSION_TIMEOUT_MS")


async def test_confident_advice_replaces_the_estimate_and_a_meaningful_change_reaches_the_pods(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    start_operator: OperatorFactory,
) -> None:
    apiserver.objects[CONFIGMAPS, "berth", "berth-advice"] = _advice(45_000)
    await start_operator(
        "--coordinator-url", coordinator.url, "--advice-configmap", "berth-advice", environ={"POD_NAMESPACE": "berth"}
    )
    await create_fleet(apiserver, fleet_body("orders", 1))
    await until(lambda: _session_timeout_env(apiserver) == "45000", "the advised timeout in the pod template")
    status = await until(lambda: (s := fleet_status(apiserver, "orders")).get("sessionTimeoutMs") and s, "status")
    assert status["sessionTimeoutMs"] == 45_000
    assert status["sessionTimeoutReason"].startswith("journal advice: p99 of 240 restart gaps")
    await until(lambda: messages(apiserver, "orders", "SessionTimeout"), "the SessionTimeout Event")

    # 45 s -> 90 s is a meaningful change: applied, and the pods roll (without a rebalance, as Events say).
    apiserver.objects[CONFIGMAPS, "berth", "berth-advice"] = _advice(90_000)
    await until(lambda: _session_timeout_env(apiserver) == "90000", "the new advice in the pod template")
    await until(lambda: fleet_status(apiserver, "orders").get("sessionTimeoutMs") == 90_000, "status")
    await until(lambda: len(messages(apiserver, "orders", "SessionTimeout")) == 2, "the second SessionTimeout Event")
    assert messages(apiserver, "orders", "SessionTimeout")[1].startswith("session timeout 90000 ms: journal advice")
    updated = await until(lambda: messages(apiserver, "orders", "Updated"), "the Updated Event")
    assert "rejoin as themselves, without a rebalance" in updated[0]
    sts = statefulset(apiserver, "orders") or {}
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BERTH_HEARTBEAT_INTERVAL_MS"] == "3000"
