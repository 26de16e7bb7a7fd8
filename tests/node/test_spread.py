"""Spread over three nodes, seen to happen: a fleet's pods (the operator's default topology spread constraints),
and the chart's operator replicas (its preferred anti-affinity, and a required one given as ``operator.affinity``).
The coordinator replicas and etcd members are checked after the move to coordinator.ha (test_ha_node_loss).

The cluster has one node per zone (``zone-a``..``zone-c``), so spread by node is spread by zone here."""

from __future__ import annotations

import json

import pytest
from support.kube import wait_until
from support.node import ZONE_LABEL, Cluster
from support.node_stage import CHART, FleetStage, Release

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

OPERATOR = "app.kubernetes.io/instance=berth,app.kubernetes.io/component=operator"
REQUIRED_APART = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "operator"}},
            }
        ]
    }
}


def nodes_of(release: Release, selector: str, namespace: str = "berth") -> list[str]:
    pods = release.kube.get("pods", namespace=namespace, selector=selector)["items"]
    return [p["spec"].get("nodeName") for p in pods if not p["metadata"].get("deletionTimestamp")]


def zones(cluster: Cluster, nodes: list[str]) -> list[str]:
    return [cluster.node(name).zone for name in nodes]


def test_a_fleets_pods_spread_over_nodes_and_zones_by_default(stage: FleetStage, three_nodes: Cluster) -> None:
    stage.apply_example(3)
    stage.ready_and_stable(3)
    statefulset = stage.kube.get("statefulset", stage.name, namespace=stage.namespace)
    keys = [c["topologyKey"] for c in statefulset["spec"]["template"]["spec"]["topologySpreadConstraints"]]
    assert keys == ["kubernetes.io/hostname", ZONE_LABEL]
    placed = nodes_of(stage.release, f"berth.dev/fleet={stage.name}", stage.namespace)
    print(f"\nfleet of 3 on three nodes: {sorted(placed)}")
    assert len(set(placed)) == 3, placed
    assert len(set(zones(three_nodes, placed))) == 3


def test_the_operator_replicas_land_on_different_nodes_preferred_and_required(
    berth_release: Release, three_nodes: Cluster
) -> None:
    kube = berth_release.kube

    def spread_after_rollout() -> list[str]:
        kube.kubectl("-n", "berth", "rollout", "status", "deployment/berth-operator", "--timeout=300s")
        return wait_until(
            lambda: (found := nodes_of(berth_release, OPERATOR)) and len(found) == 2 and found,
            "two operator replicas",
            timeout_s=120,
        )

    # Installed while the cluster had one node: both replicas there. A restart on three nodes spreads them.
    kube.kubectl("-n", "berth", "rollout", "restart", "deployment/berth-operator")
    preferred = spread_after_rollout()
    print(f"\noperator replicas, the chart's preferred anti-affinity: {preferred}")
    assert len(set(preferred)) == 2, preferred

    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
              "--set-json", f"operator.affinity={json.dumps(REQUIRED_APART)}")  # fmt: skip
    required = spread_after_rollout()
    deployment = kube.get("deployment", "berth-operator", namespace="berth")
    assert deployment["spec"]["template"]["spec"]["affinity"] == REQUIRED_APART
    print(f"operator replicas, a required anti-affinity (operator.affinity): {required}")
    assert len(set(required)) == 2, required
    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values", "--set-json", "operator.affinity={}")
    berth_release.rollout()
