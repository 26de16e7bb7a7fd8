"""Pods on a node that stopped reporting (planners.node_loss), as the pod objects show it (kube.observation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from berth.operator.adapters.kube.observation import placement, workload_view
from berth.operator.adapters.kube.watch_cache import project_pod
from berth.operator.planners.node_loss import (
    CONFIRM_ALLOWANCE,
    REACHABLE_EVENT,
    UNREACHABLE_EVENT,
    PodPlacement,
    events_for,
    unreachable_nodes,
    unreachable_patch,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LABELS = {"berth.dev/fleet": "orders"}


def pod(name: str, node: str | None, *, ready: str = "True", containers: str = "True", **extra: Any) -> dict[str, Any]:
    conditions = [
        {"type": "Ready", "status": ready, "lastTransitionTime": "2026-03-01T11:59:00Z"},
        {"type": "ContainersReady", "status": containers, "lastTransitionTime": "2026-03-01T11:50:00Z"},
    ]
    spec: dict[str, Any] = {"nodeName": node} if node else {}
    metadata: dict[str, Any] = {"name": name, "labels": LABELS, "creationTimestamp": "2026-03-01T11:00:00Z"}
    metadata |= extra.pop("metadata", {})
    return {"metadata": metadata, "spec": spec | extra.pop("spec", {}), "status": {"conditions": conditions}}


def test_ready_false_with_containers_ready_is_the_node_controllers_mark_and_nothing_else_is() -> None:
    silent = placement(pod("orders-1", "node-b", ready="False"))
    assert silent == PodPlacement("node-b", silent_since=datetime(2026, 3, 1, 11, 59, tzinfo=UTC))
    # A kubelet that finds a container unready turns both: not a silent node.
    assert placement(pod("orders-1", "node-b", ready="False", containers="False")) == PodPlacement("node-b")
    # Readiness gates keep Ready False with the containers ready: not read as a silent node.
    gated = pod("orders-1", "node-b", ready="False", spec={"readinessGates": [{"conditionType": "x"}]})
    assert placement(gated) == PodPlacement("node-b")
    assert placement(pod("orders-1", None)) is None  # not scheduled yet


def test_the_watch_caches_projection_of_a_pod_keeps_what_its_placement_reads() -> None:
    """The operator reads pods from a cache of projected objects: the node, the conditions, the readiness gates."""
    evicted = pod("orders-1", "node-b", ready="False", metadata={"deletionTimestamp": "2026-03-01T12:00:30Z"})
    evicted["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "lastTransitionTime": "x"}
    )
    gated = pod("orders-2", "node-c", ready="False", spec={"readinessGates": [{"conditionType": "x"}]})
    for full in (evicted, gated, pod("orders-0", "node-a")):
        assert placement(project_pod(full)) == placement(full)
    assert placement(project_pod(evicted)) == PodPlacement(
        "node-b",
        silent_since=datetime(2026, 3, 1, 11, 59, tzinfo=UTC),
        grace_ends=datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC),
        disruption="EvictionByEvictionAPI",
    )


def test_the_view_carries_each_scheduled_pods_placement() -> None:
    statefulset = {"metadata": {"name": "orders"}, "spec": {"replicas": 2, "selector": {"matchLabels": LABELS}}}
    view = workload_view("orders", statefulset, [pod("orders-0", "node-a"), pod("orders-1", None)], [])
    assert dict(view.observation.placements) == {"orders-0": PodPlacement("node-a")}


def test_a_node_is_unreachable_for_its_silent_pods_and_its_unconfirmed_terminating_ones() -> None:
    grace_ends = NOW - CONFIRM_ALLOWANCE - timedelta(seconds=1)
    placements = {
        "orders-0": PodPlacement("node-a"),
        "orders-2": PodPlacement("node-c", silent_since=NOW - timedelta(seconds=20)),
        "orders-1": PodPlacement("node-c", grace_ends=grace_ends),
        # Terminating, within the allowance: its kubelet may still confirm it.
        "orders-3": PodPlacement("node-b", grace_ends=NOW - timedelta(seconds=5)),
    }
    (found,) = unreachable_nodes("orders", placements, NOW)
    assert (found.node, found.pods, found.since) == ("node-c", ("orders-1", "orders-2"), grace_ends)
    assert found.as_status()["pods"] == ["orders-1", "orders-2"]


def test_status_and_events_say_it_once_and_say_when_it_is_over() -> None:
    found = unreachable_nodes("orders", {"orders-1": PodPlacement("node-c", silent_since=NOW)}, NOW)
    patch = unreachable_patch(found, {})
    assert patch == {"unreachableNodes": [{"node": "node-c", "pods": ["orders-1"], "since": "2026-03-01T12:00:00Z"}]}
    ((kind, reason, message),) = events_for(found, {}, "45s")
    assert (kind, reason) == ("Warning", UNREACHABLE_EVENT)
    assert "node node-c stopped reporting" in message and "pod orders-1" in message
    assert "kubectl taint node node-c node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in message
    assert "session timeout (45s)" in message
    # Said: nothing again.
    assert unreachable_patch(found, patch) == {} and events_for(found, patch, "45s") == []
    # Over: status cleared, one Normal Event.
    assert unreachable_patch([], patch) == {"unreachableNodes": None}
    ((kind, reason, _),) = events_for([], patch, "45s")
    assert (kind, reason) == ("Normal", REACHABLE_EVENT)
    assert unreachable_patch([], {}) == {} and events_for([], {}, "45s") == []
