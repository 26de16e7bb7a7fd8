"""Plan the PodDisruptionBudget a ConsumerFleet owns (``spec.podDisruptionBudget``, on by default).

Rules:

- Named like the fleet, in its namespace, with the fleet's controller ownerReference (the garbage collector removes
  it with the fleet) and the fleet's pod selector, so it guards exactly the StatefulSet's pods.
- ``maxUnavailable`` rather than ``minAvailable``: it follows the fleet's size, so scaling never makes the budget
  impossible to meet, and a fleet scaled to zero is not blocked by it.
- ``unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not Ready serves nobody, so evicting it disrupts
  nothing; with Kubernetes' default (IfHealthyBudget) two broken pods would exhaust a budget of one and block a
  node drain until someone repaired them by hand.
- A disabled budget plans nothing (``None``): the adapter then deletes the fleet's own budget, if it has one.
- The budget gates voluntary evictions only (drains, the cluster autoscaler): the operator's scale-downs and the
  StatefulSet's rolling updates delete pods directly and are not slowed by it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from berth.operator.spec.fleet import Fleet
from berth.operator.spec.stateful import DisruptionBudget

#: Evicting a pod that is not Ready takes nothing away from the fleet, whatever the budget says.
UNHEALTHY_POD_EVICTION_POLICY = "AlwaysAllow"


def plan_disruption_budget(
    fleet: Fleet, *, metadata: Mapping[str, Any], pod_labels: Mapping[str, str]
) -> dict[str, Any] | None:
    """The fleet's PodDisruptionBudget (policy/v1), or None when ``spec.podDisruptionBudget.enabled`` is false.

    ``metadata`` is what every object the fleet owns carries (``plan_statefulset`` makes it); ``pod_labels`` the
    fleet's pod selector.
    """
    budget = fleet.spec.stateful.disruption_budget
    if not budget.enabled:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": copy.deepcopy(dict(metadata)),
        "spec": {
            "maxUnavailable": budget.max_unavailable,
            "selector": {"matchLabels": dict(pod_labels)},
            "unhealthyPodEvictionPolicy": UNHEALTHY_POD_EVICTION_POLICY,
        },
    }


def describe_budget(applied: str, fleet_name: str, budget: DisruptionBudget) -> tuple[str, str] | None:
    """The Event (reason, message) for what was done to the fleet's budget (``ports.Applied``'s value), if anything."""
    what = f"PodDisruptionBudget {fleet_name}"
    if applied == "created":
        return "Created", f"created {what} (maxUnavailable {budget.max_unavailable}; unhealthy pods always evictable)"
    if applied == "updated":
        return "Updated", f"updated {what} (maxUnavailable {budget.max_unavailable})"
    if applied == "deleted":
        return "Deleted", f"deleted {what}: spec.podDisruptionBudget.enabled is false"
    return None
