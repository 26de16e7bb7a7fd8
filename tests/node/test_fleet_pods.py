"""A fleet from deploy/examples/orders.yaml on real pods: scale-downs, scale-ups and restarts as the kubelet does them.

The pods run ``python -m berth.coordinator.client.example`` from the locally built ``berth:0.1.0``, against the
coordinator pod, through the coordinator's Service and the cluster DNS stand-in. What the kubelet does here is
real: the departed pods' containers get SIGTERM and their grace period, a deleted pod is recreated by the
StatefulSet controller, a killed container is restarted in place. The figures are printed (``-s``), and so is what
``kubectl describe cf`` shows of the restarts (status.restarts and the Restarted Events: issue 23).
"""

from __future__ import annotations

import json
import time

import pytest
from support.kube import wait_until
from support.node import Node
from support.node_stage import FleetStage

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]


def completed_after(events: list[dict], ts_ms: int) -> dict:
    return next(e for e in events if e["type"] == "rebalance_completed" and e["ts_ms"] >= ts_ms)


def test_five_to_three_is_one_batch_leave_once_the_pods_are_gone_and_three_to_five_one_rebalance(
    stage: FleetStage,
) -> None:
    stage.apply_example(5)
    stage.ready_and_stable(5)

    stage.mark("down")
    stage.kubectl("scale", f"cf/{stage.name}", "--replicas=3")
    departed = [f"{stage.name}-3", f"{stage.name}-4"]
    wait_until(lambda: stage.status().get("lastScaleDown"), "the batch leave", timeout_s=180)
    assert stage.leaves_since("down") == [departed]
    # The leave came after the departed pods had really ended (the kubelet confirmed them gone).
    assert set(departed) <= set(stage.watch.gone_at), stage.watch.gone_at
    last_gone = max(stage.watch.gone_at[pod] for pod in departed)
    events = stage.since("down")
    leave = next(e for e in events if e["type"] == "member_left" and e.get("via") == "admin")
    assert leave["ts_ms"] / 1000 >= last_gone - 1.0, (leave, last_gone)  # 1 s: the two clocks' reading moments
    stage.ready_and_stable(3)
    events = stage.since("down")
    assert [e["cause"] for e in events if e["type"] == "rebalance_started"] == ["member_left"]
    reassigned = completed_after(events, leave["ts_ms"])
    print(
        f"\n5 -> 3: last departed pod gone -> survivors' new assignment: {reassigned['ts_ms'] / 1000 - last_gone:.2f} s"
    )

    stage.mark("up")
    stage.kubectl("scale", f"cf/{stage.name}", "--replicas=5")
    stage.ready_and_stable(5)
    assert len(stage.rebalances_since("up")) == 1, stage.since("up")


def test_pod_deletion_rolling_restart_and_a_killed_container_cost_no_rebalance_and_the_fleet_says_so(
    stage: FleetStage, node: Node
) -> None:
    stage.apply_example(3)
    stage.ready_and_stable(3)

    stage.mark("delete")
    uid = stage.pod(1)["metadata"]["uid"]
    stage.kubectl("delete", "pod", f"{stage.name}-1")
    wait_until(lambda: (stage.pod(1) or {}).get("metadata", {}).get("uid") not in (None, uid), "a new pod")
    stage.ready_and_stable(3)
    assert stage.rebalances_since("delete") == []
    # The fleet says so, once the restart is over (a session timeout after it: its member is back or expired).
    restarted = "1 pod restarted statically, 0 rebalances"
    wait_until(lambda: restarted in stage.messages("Restarted"), "the restart's Event", timeout_s=240, every_s=1)

    stage.mark("rollout")
    before = {i: stage.pod(i)["metadata"]["uid"] for i in range(3)}
    started = time.monotonic()
    stage.kubectl("rollout", "restart", f"statefulset/{stage.name}")
    stage.kubectl("rollout", "status", f"statefulset/{stage.name}", "--timeout=600s")
    stage.ready_and_stable(3)
    assert all(stage.pod(i)["metadata"]["uid"] != before[i] for i in range(3))
    rebalances = stage.rebalances_since("rollout")
    print(f"\nrolling restart of 3 pods: {len(rebalances)} rebalances in {time.monotonic() - started:.1f} s")
    assert rebalances == []
    rolled = "3 pods restarted statically (rollout), 0 rebalances"
    wait_until(lambda: rolled in stage.messages("Restarted"), "the roll's Event", timeout_s=240, every_s=1)
    restarts = stage.status()["restarts"]
    assert (restarts["static"], restarts["rolls"], restarts["last"]["cause"]) == (4, 1, "rollout")
    described = stage.kubectl("describe", "cf", stage.name)
    print(described[described.index("  Restarts:") :])  # kubectl describe cf, as a person reads it
    assert rolled in described

    stage.mark("kill")
    pod = stage.pod(0)
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    node.kill_container(container_id)
    wait_until(
        lambda: (stage.pod(0)["status"]["containerStatuses"][0]["restartCount"] == 1) or None,
        "the container restarted in place",
        timeout_s=120,
    )
    assert stage.pod(0)["metadata"]["uid"] == pod["metadata"]["uid"]
    stage.ready_and_stable(3)
    joins = [e for e in stage.since("kill") if e["type"] in ("member_joined", "static_member_replaced")]
    assert joins and all(e["group_instance_id"] == f"{stage.name}-0" for e in joins), json.dumps(joins)
    assert stage.rebalances_since("kill") == []

    # Paused (berth.dev/paused), a scale-down is seen and not acted on; resumed, it is carried out with its leave.
    stage.kubectl("annotate", f"cf/{stage.name}", "berth.dev/paused=true")
    wait_until(lambda: stage.condition("Paused").get("status") == "True", "Paused=True", timeout_s=120)
    stage.kubectl("scale", f"cf/{stage.name}", "--replicas=2")
    generation = stage.kube.get("cf", stage.name, namespace=stage.namespace)["metadata"]["generation"]
    wait_until(lambda: stage.condition("Paused").get("observedGeneration") == generation, "seen", timeout_s=120)
    statefulset = stage.kube.get("statefulset", stage.name, namespace=stage.namespace)
    assert statefulset["spec"]["replicas"] == 3 and stage.pod(2) is not None
    stage.mark("resume")
    stage.kubectl("annotate", f"cf/{stage.name}", "berth.dev/paused-")
    wait_until(lambda: stage.leaves_since("resume") == [[f"{stage.name}-2"]], "the leave, resumed", timeout_s=180)
    stage.ready_and_stable(2)
