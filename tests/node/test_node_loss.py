"""A node lost at once (its network cut, its kubelet, containerd and containers killed: ``Node.lose``), holding a
fleet's pods, on three nodes; then a scale-down whose departing pod is on it; then the documented recovery.

What is asserted, in order (docs/failure-modes.md, "A lost node", gives the figures printed with ``-s``):

1. The members on the lost node stop heartbeating and expire after the session timeout; the group is Stable again
   with the others (the time to Stable *without* recovery: no pod comes back by itself, since Kubernetes never
   deletes a StatefulSet pod it cannot confirm gone).
2. Once Kubernetes calls the node lost (its lifecycle controller, after ``--node-monitor-grace-period``), the fleet's
   ``status.unreachableNodes`` names the node and its pods, with a ``NodeUnreachable`` Warning.
3. A scale-down 3 -> 2 whose departing pod is on the lost node: under OrderedReady (the example's) the StatefulSet
   deletes no pod while a pod of it is not Ready, and a pod on a lost node never is again, so the shrink waits for
   the recovery; Berth does not wait silently (the ``Waiting`` Event names the pod and its node) and leaves no
   member whose pod may run.
4. The recovery as documented: ``kubectl taint node N node.kubernetes.io/out-of-service=nodeshutdown:NoExecute``.
   Kubernetes then deletes the pods on it; the departing one's batch leave follows, the others start on another
   node, and the group is Stable with every id of the new size (time to Stable *with* recovery, end to end).

The fleet is placed while the coordinator's node is cordoned, so that the node lost holds fleet pods and not the
coordinator (its loss is coordinator.ha's story: test_ha_failover). The lost node is replaced afterwards."""

from __future__ import annotations

import os
import time

import pytest
from support.kube import wait_until
from support.node import OUT_OF_SERVICE, Cluster
from support.node_stage import FleetStage

#: Rounds of the scenario, each on a fleet of its own (1 in make test; make soak runs more).
ROUNDS = int(os.environ.get("BERTH_NODE_SCENARIO_ROUNDS", "1"))
REBALANCE_TIMEOUT_MS = 30_000
pytestmark = [pytest.mark.soak, pytest.mark.node, pytest.mark.timeout(1200)]  # 3 min: make soak (drain is make test's)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_lost_node_its_pods_named_its_departing_pod_not_left_until_the_recovery(
    stage: FleetStage, three_nodes: Cluster, round_: int
) -> None:
    coordinator_node = stage.release.coordinator_pod()["spec"]["nodeName"]
    stage.kube.kubectl("cordon", coordinator_node)
    try:
        # The example's rebalance timeout (2 min) is how long the group waits for its pre-registered members when
        # some expire (docs/failure-modes.md): 30 s here, to keep the test short.
        stage.apply_example(3, rebalanceTimeoutMs=REBALANCE_TIMEOUT_MS)
        stage.ready_and_stable(3)
    finally:
        stage.kube.kubectl("uncordon", coordinator_node)
    pods = {i: stage.pod(i) for i in range(3)}
    lost = three_nodes.node(pods[2]["spec"]["nodeName"])
    on_lost = sorted(i for i, pod in pods.items() if pod["spec"]["nodeName"] == lost.name)
    ids_on_lost = {f"{stage.name}-{i}" for i in on_lost}
    session_timeout = stage.status()["sessionTimeout"]
    print(f"\nfleet of 3: {[p['spec']['nodeName'] for p in pods.values()]}; losing {lost.name} (pods {on_lost})")

    stage.mark("loss")
    t0 = time.monotonic()
    lost.lose()
    try:
        # 1-2. Each moment seen as it comes (one loop, so that none waits on another): the members expired, the
        # group Stable again without them (no pod comes back by itself), the status naming the node and its pods.
        seen: dict[str, float] = {}
        entry: dict[str, object] = {}

        def moments() -> bool:
            described = stage.describe()
            members = {m["group_instance_id"] for m in described["members"]}
            if "expired" not in seen and not members & ids_on_lost:
                seen["expired"] = time.monotonic() - t0
            if "expired" in seen and "stable" not in seen and described["group_state"] == "Stable":
                seen["stable"] = time.monotonic() - t0
            if "named" not in seen and (found := stage.status().get("unreachableNodes")):
                seen["named"] = time.monotonic() - t0
                entry.update(found[0])
            return len(seen) == 3

        wait_until(moments, "the members expired, the group Stable, the node named", timeout_s=400, every_s=0.5)
        expired_s, stable_without_s, named_s = seen["expired"], seen["stable"], seen["named"]
        expiries = [e for e in stage.since("loss") if e["type"] == "member_expired"]
        assert {e["group_instance_id"] for e in expiries} == ids_on_lost
        assert entry["node"] == lost.name and entry["pods"] == sorted(ids_on_lost), entry
        warnings = stage.messages("NodeUnreachable")
        assert any(f"node {lost.name} stopped reporting" in w and OUT_OF_SERVICE in w for w in warnings), warnings
        described = stage.kubectl("describe", "cf", stage.name)
        print(described[described.index("Unreachable Nodes:") :][:400] if "Unreachable Nodes:" in described else "")

        # 3. Scale-down with the departing pod on the lost node. Under OrderedReady (the example's) the StatefulSet
        # deletes no pod while one of its pods is not Ready, and a pod on a lost node never is again: the shrink
        # itself waits. Berth says so, naming the pod and its node, and leaves nobody.
        stage.mark("down")
        stage.kubectl("scale", f"cf/{stage.name}", "--replicas=2")
        departing = f"{stage.name}-2"
        waiting = wait_until(
            lambda: next((m for m in stage.messages("Waiting") if departing in m and lost.name in m), None),
            "the Waiting Event naming the pod and its node",
            timeout_s=180,
            every_s=1,
        )
        print(f"Waiting: {waiting}")
        assert stage.pod(2) is not None
        assert stage.leaves_since("down") == [] and not stage.status().get("lastScaleDown")

        # 4. The recovery: the out-of-service taint.
        recovered_at = time.monotonic()
        stage.kube.kubectl("taint", "node", lost.name, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
        last = wait_until(lambda: stage.status().get("lastScaleDown"), "the batch leave", timeout_s=300, every_s=1)
        # One batch leave naming the departing id; its member expired on the lost node long before (the session
        # timeout), so the leave finds it gone: removed lists only what the leave itself removed.
        assert list(last["results"]) == [departing], last
        assert last["removed"] == [i for i, answer in last["results"].items() if answer == "NONE"], last
        stage.ready_and_stable(2, timeout_s=300)
        back_s = time.monotonic() - recovered_at
        for i in on_lost:
            if i < 2:
                assert stage.pod(i)["spec"]["nodeName"] != lost.name
        wait_until(lambda: not stage.status().get("unreachableNodes"), "unreachableNodes cleared", timeout_s=120)
        rebalances = stage.rebalances_since("loss")
        print(
            f"node lost with {len(on_lost)} fleet pod(s), session timeout {session_timeout}, rebalance timeout"
            f" {REBALANCE_TIMEOUT_MS / 1000:g} s:"
            f" members expired after {expired_s:.1f} s, group Stable without recovery after {stable_without_s:.1f} s;"
            f" status named the node after {named_s:.1f} s; out-of-service taint -> 2 pods Ready in the Stable"
            f" group after {back_s:.1f} s ({time.monotonic() - t0:.1f} s from the loss); rebalances: {rebalances}"
        )
    finally:
        three_nodes.replace(lost)
