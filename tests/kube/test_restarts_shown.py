"""The benefit of static membership, shown where people look, on the real operator and control plane: a
``kubectl rollout restart`` of a fleet's StatefulSet (the documented way to roll a fleet) restarts every pod, costs
no rebalance, and the fleet says so — ``status.restarts``, ONE Event for the whole roll, ``kubectl describe cf`` and
the operator's metrics; a deleted pod is one static restart, not a rollout."""

from __future__ import annotations

import pytest
from support.fleet_stage import Stage, fleet_body, rebalances
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]

#: Long enough that no restart here outlasts it (the fake kubelet's take 2-5 s from the last heartbeat on a quiet
#: machine, and past 10 s on a busy one: a member expired and the roll cost a rebalance); a burst is announced a
#: session timeout after its last restart, so not longer.
SESSION = {"sessionTimeout": {"policy": "Fixed", "fixedMs": 30_000}}


@pytest.mark.soak  # make soak: tests/node/test_fleet_pods.py shows the same on real pods in make test
def test_a_rollout_restart_is_counted_as_static_restarts_in_status_one_event_describe_and_metrics(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 3, stage.group, **SESSION))
    stage.ready_and_stable(3)
    wait_until(lambda: stage.status().get("restarts", {}).get("revision"), "the quiet revision recorded")
    journal_before = len(stage.journal())
    generation = stage.get("statefulset", "orders")["metadata"]["generation"]

    stage.kubectl("rollout", "restart", "statefulset/orders")

    event = wait_until(lambda: stage.events("Restarted"), "the roll's Event", timeout_s=120)
    assert [e["message"] for e in event] == ["3 pods restarted statically (rollout), 0 rebalances"]
    assert event[0]["type"] == "Normal"
    restarts = stage.status()["restarts"]
    assert (restarts["static"], restarts["rebalancing"], restarts["expired"], restarts["rolls"]) == (3, 0, 0, 1)
    assert {k: restarts["last"][k] for k in ("restarts", "static", "rebalances", "cause")} == {
        "restarts": 3,
        "static": 3,
        "rebalances": 0,
        "cause": "rollout",
    }
    assert "ongoing" not in restarts
    # Every pod restarted once, as itself, and the group never rebalanced.
    since = stage.journal()[journal_before:]
    assert sorted(e["group_instance_id"] for e in since if e["type"] == "static_member_replaced") == [
        "orders-0",
        "orders-1",
        "orders-2",
    ]
    assert rebalances(since) == []

    described = stage.kubectl("describe", "cf", "orders")
    print(described)  # what a person sees (kept in the test's output)
    assert "3 pods restarted statically (rollout), 0 rebalances" in described
    lines = [line.split() for line in described.splitlines()]
    assert ["Static:", "3"] in lines and ["Rolls:", "1"] in lines
    assert stage.metric("berth_operator_static_restarts_total") == 3
    assert stage.metric("berth_operator_rolls_total") == 1

    # The operator neither undid the roll nor rolled again: kubectl's change is the only one to the StatefulSet.
    statefulset = stage.get("statefulset", "orders")
    assert statefulset["metadata"]["generation"] == generation + 1
    assert "kubectl.kubernetes.io/restartedAt" in statefulset["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.soak  # make soak: tests/node/test_fleet_pods.py shows the same on real pods in make test
def test_a_deleted_pod_is_one_static_restart_and_not_a_rollout(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 2, stage.group, **SESSION))
    stage.ready_and_stable(2)
    wait_until(lambda: stage.status().get("restarts", {}).get("revision"), "the quiet revision recorded")

    stage.kubectl("delete", "pod", "orders-1", "--wait=false")

    event = wait_until(lambda: stage.events("Restarted"), "the restart's Event", timeout_s=90)
    assert [e["message"] for e in event] == ["1 pod restarted statically, 0 rebalances"]
    restarts = stage.status()["restarts"]
    assert (restarts["static"], restarts["rolls"], restarts["last"]["cause"]) == (1, 0, "restart")
    assert stage.metric("berth_operator_static_restarts_total") == 1
    assert stage.metric("berth_operator_rolls_total") == 0


def test_ready_counts_the_pods_that_exist_and_are_ready_while_one_is_gone(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 2, stage.group, **SESSION))
    stage.ready_and_stable(2)
    stage.kubelet.hold("orders-1")  # its node is slow to confirm: Terminating, then gone, then back
    stage.kubectl("delete", "pod", "orders-1", "--wait=false")

    wait_until(lambda: stage.status().get("ready") == "1/2", "READY 1/2")
    ready = stage.condition("Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "PodsNotReady",
        "1 of 2 pods are ready (not ready: orders-1)",
    )
    assert stage.status()["readyReplicas"] == 1

    stage.kubelet.release()
    wait_until(lambda: stage.status().get("ready") == "2/2", "READY 2/2 once the pod is back")
