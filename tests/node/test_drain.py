"""``kubectl drain`` of a node holding a fleet's pods, on three nodes: the evictions honour the fleet's
PodDisruptionBudget, each pod comes back on another node with a new IP and the same name (its
``group.instance.id``), and no rebalance happens, since each is back within its session timeout.

The fleet (deploy/examples/orders.yaml, on the release's coordinator) has six pods, spread two per node by the
operator's default topology spread constraints; the node drained is the one of those holding two of them and not
the coordinator's (the release was installed on the first node). Its budget (``maxUnavailable: 1``) lets the
second eviction through only once the first pod is back and Ready: ``kubectl drain`` says so as it retries.
Figures printed (``-s``): the drain's duration, each pod's time away, the rebalances."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
import yaml
from support.kube import wait_until
from support.node import Cluster
from support.node_stage import EXAMPLES, FleetStage

#: Rounds of the scenario, each on a fleet of its own (1 in make test; make soak runs more).
ROUNDS = int(os.environ.get("BERTH_NODE_SCENARIO_ROUNDS", "1"))
pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

REPLICAS = 6


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_drained_nodes_pods_come_back_elsewhere_as_themselves_without_a_rebalance(
    stage: FleetStage, three_nodes: Cluster, round_: int
) -> None:
    template = yaml.safe_load((EXAMPLES / "orders.yaml").read_text())["spec"]["template"]
    # A consumer that takes a moment to shut down (most do: a last commit, a leave), so that the operator sees the
    # evicted pod while it terminates, and can tell an eviction from a crash.
    (container,) = template["spec"]["containers"]
    container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", "3"]}}}
    stage.apply_example(REPLICAS, template=template)
    stage.ready_and_stable(REPLICAS)
    pods = {i: stage.pod(i) for i in range(REPLICAS)}
    placed = Counter(pod["spec"]["nodeName"] for pod in pods.values())
    coordinator_node = stage.release.coordinator_pod()["spec"]["nodeName"]
    print(f"\nfleet of {REPLICAS} on three nodes: {dict(placed)}; the coordinator on {coordinator_node}")
    candidates = [name for name, count in placed.most_common() if name != coordinator_node]
    drained = candidates[0]
    on_it = sorted(i for i, pod in pods.items() if pod["spec"]["nodeName"] == drained)
    session_timeout = stage.status()["sessionTimeout"]

    stage.mark("drain")
    started = time.monotonic()
    result = stage.kube.kubectl(
        "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=600s", check=False
    )
    drain_s = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    try:
        print(f"$ kubectl drain {drained}  ({drain_s:.1f} s)\n{result.stdout}{result.stderr}")
        for i in on_it:
            assert f"pod/{stage.name}-{i} evicted" in result.stdout
        if len(on_it) > 1:  # the budget let one eviction through at a time
            assert "violate the pod's disruption budget" in result.stderr
        stage.ready_and_stable(REPLICAS)
        for i in on_it:
            back = stage.pod(i)
            assert back["metadata"]["uid"] != pods[i]["metadata"]["uid"]
            assert back["spec"]["nodeName"] != drained
            assert back["status"]["podIP"] != pods[i]["status"]["podIP"]
        assert stage.members() == {f"{stage.name}-{i}" for i in range(REPLICAS)}
        rebalances = stage.rebalances_since("drain")
        # Each pod's time away: from its eviction (the old pod seen deleting) to its successor seen Ready.
        watch = stage.watch
        away = {
            f"{stage.name}-{i}": round(
                watch.uid_ready_at[stage.pod(i)["metadata"]["uid"]] - watch.uid_deleting_at[pods[i]["metadata"]["uid"]],
                1,
            )
            for i in on_it
        }
        print(
            f"drain of {len(on_it)} fleet pods: {drain_s:.1f} s, {len(rebalances)} rebalances"
            f" (session timeout {session_timeout}); pod gone -> Ready again elsewhere: {away}"
        )
        assert rebalances == [], stage.since("drain")
        # The fleet says so once the burst is over (a session timeout after it).
        wanted = f"{len(on_it)} pod{'s' if len(on_it) > 1 else ''} restarted statically"
        wait_until(lambda: any(wanted in m for m in stage.messages("Restarted")), "the Restarted Event", timeout_s=240)
        restarts = stage.status()["restarts"]
        print(f"status.restarts: {restarts}")
        assert restarts["static"] >= len(on_it) and restarts.get("rebalancing", 0) == 0
        # The cause, as far as it can be told: a pass saw a pod evicted through the Eviction API.
        assert restarts["last"]["cause"] == "eviction", restarts
        assert any(f"{wanted} (eviction), 0 rebalances" in m for m in stage.messages("Restarted"))
    finally:
        stage.kube.kubectl("uncordon", drained)
