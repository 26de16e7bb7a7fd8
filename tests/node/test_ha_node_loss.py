"""coordinator.ha on three nodes: its replicas and etcd members spread by the chart's anti-affinity, then the node
of the active replica lost at once (``Node.lose``: network, kubelet, containerd and containers cut together) while
the fleet of example consumers commits every half second and a scale-down of it is in progress.

Measured and asserted (docs/failure-modes.md, "The coordinator's node lost", has the figures printed with ``-s``):

- the first join answered through the coordinator's Service (``support.node_probe``, from another node), N s after
  the loss: the lease (5 s) plus the takeover, although the lost replica stays in the Service's endpoints until its
  node is declared lost;
- no acknowledged commit lost (the members whose logs can still be read: the lost node's pods' logs went with it);
- no rebalance of the static group from the failover: only the scale-down's, and those its members on the lost
  node cause (their sessions expire; they join again from another node after the recovery);
- the scale-down in progress completes with one batch leave (or none, if the departing member was on the lost node
  and expired first: Berth never removes a member whose pod may run);
- what else the node held (an etcd member, the operator's leader) is said; the recovery (the out-of-service taint)
  brings every pod back on the other nodes, and a fresh node replaces the lost one.

Runs last of the session (it needs ``ha_stage``, and the cluster's three nodes)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from support.kube import wait_until
from support.node import OUT_OF_SERVICE, Cluster
from support.node_ha import COORDINATOR, ETCD, FLEET_REPLICAS, FirstJoin, HaStage
from support.node_members import acknowledged_before, commits, lost, read_logs

pytestmark = [pytest.mark.node, pytest.mark.timeout(1200)]
PROBE_GROUP = "orders-probe-node-loss"


def placed(stage: HaStage, selector: str) -> dict[str, str]:
    pods = stage.release.kube.get("pods", namespace="berth", selector=selector)["items"]
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods if not p["metadata"].get("deletionTimestamp")
    }


def test_coordinator_replicas_and_etcd_members_land_on_different_nodes(ha_stage: HaStage, three_nodes: Cluster) -> None:
    """Made by the move to coordinator.ha, after the three-node tests: the cluster had three nodes by then."""
    coordinators, members = placed(ha_stage, COORDINATOR), placed(ha_stage, ETCD)
    print(f"\ncoordinator replicas: {coordinators}; etcd members: {members}")
    assert len(coordinators) == 2 and len(set(coordinators.values())) == 2, coordinators
    assert len(members) == 3 and len(set(members.values())) == 3, members
    assert max(Counter([*coordinators.values(), *members.values()]).values()) <= 2


@pytest.mark.soak
def test_the_active_replicas_node_lost_during_a_scale_down(ha_stage: HaStage, three_nodes: Cluster) -> None:
    replicas, fleet, kube = ha_stage.replicas, ha_stage.fleet, ha_stage.release.kube
    fleet.ready_and_stable(FLEET_REPLICAS)
    victim = replicas.active()
    lost_node = three_nodes.node_of(victim)
    survivor = next(n for n in three_nodes.live_nodes() if n is not lost_node)
    leader = (kube.get("lease", "berth-operator", namespace="berth")["spec"].get("holderIdentity") or "").split("_")[0]
    operators = placed(ha_stage, "app.kubernetes.io/instance=berth,app.kubernetes.io/component=operator")
    held = {
        "etcd members": sorted(n for n, on in placed(ha_stage, ETCD).items() if on == lost_node.name),
        "operator leader": [leader] if operators.get(leader) == lost_node.name else [],
        "fleet pods": sorted(
            f"{fleet.name}-{i}" for i in range(FLEET_REPLICAS) if fleet.pod(i)["spec"]["nodeName"] == lost_node.name
        ),
    }
    on_lost = frozenset(held["fleet pods"])
    probe = FirstJoin(survivor, ha_stage.release, PROBE_GROUP)
    try:
        fleet.mark("loss")
        fleet.kubectl("scale", f"cf/{fleet.name}", f"--replicas={FLEET_REPLICAS - 1}")
        departing = f"{fleet.name}-{FLEET_REPLICAS - 1}"
        wall, started = time.time(), time.monotonic()
        lost_node.lose()
        took = probe.measure(started, timeout_s=180)
        session_timeout_ms = int(fleet.status()["sessionTimeoutMs"])
        print(
            f"\n{lost_node.name} lost with the active replica {victim['metadata']['name']} and {held}: first join"
            f" answered through the Service {took:.2f} s after (session timeout {session_timeout_ms / 1000:g} s)"
        )
        replicas.active(other_than=victim["metadata"]["uid"], timeout_s=180)

        # The members elsewhere carry on: each commits again on the new active replica; nothing acknowledged lost.
        staying = {f"{fleet.name}-{i}" for i in range(FLEET_REPLICAS - 1)} - on_lost

        def committed_again() -> bool:
            found = commits(read_logs(fleet, FLEET_REPLICAS - 1, skip=on_lost))
            return staying <= {c.pod for c in found if c.at > wall + took}

        wait_until(committed_again, "the members elsewhere committing again", timeout_s=180, every_s=1)
        found = commits(read_logs(fleet, FLEET_REPLICAS - 1, skip=on_lost))
        missing = lost(acknowledged_before(found, wall), fleet.offsets())
        assert missing == {}, missing

        # The recovery: the node is known down.
        recovered_at = time.monotonic()
        wait_until(
            lambda: (
                any(
                    c["type"] == "Ready" and c["status"] != "True"
                    for c in kube.get("node", lost_node.name)["status"]["conditions"]
                )
                or None
            ),
            "the node declared lost",
            timeout_s=180,
            every_s=1,
        )
        kube.kubectl("taint", "node", lost_node.name, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
        last = wait_until(lambda: fleet.status().get("lastScaleDown"), "the scale-down's leave", timeout_s=300)
        assert last["removed"] == [departing], last
        assert len(fleet.leaves_since("loss")) <= 1, fleet.leaves_since("loss")
        fleet.ready_and_stable(FLEET_REPLICAS - 1, timeout_s=300)
        wait_until(lambda: len(placed(ha_stage, ETCD)) == 3 and len(replicas.standbys()) == 1, "every pod back",
                   timeout_s=300, every_s=1)  # fmt: skip
        back_s = time.monotonic() - recovered_at
        # Rebalances: none but those the lost node's members caused by expiring.
        expired = {e["group_instance_id"] for e in fleet.since("loss") if e["type"] == "member_expired"}
        causes = fleet.rebalances_since("loss")
        print(
            f"rebalances since the loss: {causes} (expired: {sorted(expired)}; scale-down leave:"
            f" {fleet.leaves_since('loss')}); out-of-service taint -> every pod back in {back_s:.1f} s"
        )
        # None from the failover: the scale-down's leave (member_left), and for the lost node's members their
        # expiry and their return on another node (member_expired, new_member) where they were there.
        assert expired <= on_lost
        if on_lost:
            assert set(causes) <= {"member_left", "member_expired", "new_member"}, causes
        else:
            assert causes in ([], ["member_left"]), causes
    finally:
        probe.close()
        three_nodes.replace(lost_node)
