"""Pods on a node that stopped reporting: which, since when, and what the fleet's status and Events say of them.

Owns ``status.unreachableNodes`` and the ``NodeUnreachable``/``NodeReachable`` Events (docs/failure-modes.md,
"A lost node"). Pure: the facts come from the pods as the API server has them (``kube.observation``), the clock is a
parameter. Rules:

- A pod is *stranded* when its node no longer speaks for it, which Kubernetes shows on the pod itself (the operator
  needs no access to Node objects): its ``Ready`` condition was set False while ``ContainersReady`` stayed True
  (only the node lifecycle controller writes that pair, when the node's kubelet stops reporting; a kubelet that
  finds a container unready turns both), or it has been Terminating for :data:`CONFIRM_ALLOWANCE` past its grace
  period without its kubelet confirming it gone. *Since* is the earlier of the two moments.
- Berth does not act on a stranded pod: whether it still runs cannot be told from here (a node cut off from the API
  server may still run it, and its member may still heartbeat). Its member leaves the group when its session
  expires (the coordinator's doing, if the pod is really down); Berth deletes no pod and, on a scale-down, leaves no
  member whose pod may still run (``planners.scaling``). The status and the Warning say so, and how to recover once
  the node is known down: the ``node.kubernetes.io/out-of-service`` taint, or ``kubectl delete pod --force``.
- ``status.unreachableNodes`` lists each such node once, with its stranded pods in ordinal order and the earliest
  *since*, in node-name order; it is written only when it changes (empty: removed with a null). A node appears in a
  Warning when it first appears or its pods change, and the end of it all in one Normal Event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berth.operator.planners.conditions import format_time
from berth.operator.planners.instances import sorted_by_ordinal

#: How long past its grace period a Terminating pod may go unconfirmed before its node is taken as not reporting
#: (a kubelet confirms a pod within seconds of its containers ending).
CONFIRM_ALLOWANCE = timedelta(seconds=30)
UNREACHABLE_NODES = "unreachableNodes"
UNREACHABLE_EVENT = "NodeUnreachable"
REACHABLE_EVENT = "NodeReachable"
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
#: The DisruptionTarget reason of a pod evicted through the Eviction API (``kubectl drain``, the cluster autoscaler).
EVICTION_API = "EvictionByEvictionAPI"


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """What the API server says of one pod's node (``kube.observation``)."""

    node: str
    #: When the node lifecycle controller marked the pod not Ready with its containers still ready; None: it did not.
    silent_since: datetime | None = None
    #: When its grace period ends (deletionTimestamp); None: not Terminating.
    grace_ends: datetime | None = None
    #: Why Kubernetes is disrupting it (its DisruptionTarget condition's reason: EvictionByEvictionAPI for a drain's
    #: evictions, DeletionByTaintManager, DeletionByPodGC, ...); None: no such condition.
    disruption: str | None = None


@dataclass(frozen=True, slots=True)
class UnreachableNode:
    node: str
    pods: tuple[str, ...]
    since: datetime

    def as_status(self) -> dict[str, Any]:
        return {"node": self.node, "pods": list(self.pods), "since": format_time(self.since)}


def stranded_since(placement: PodPlacement, now: datetime) -> datetime | None:
    """When the pod's node stopped speaking for it (module rules); None while it does."""
    moments = []
    if placement.silent_since is not None:
        moments.append(placement.silent_since)
    if placement.grace_ends is not None and now > placement.grace_ends + CONFIRM_ALLOWANCE:
        moments.append(placement.grace_ends)
    return min(moments, default=None)


def unreachable_nodes(fleet_name: str, placements: Mapping[str, PodPlacement], now: datetime) -> list[UnreachableNode]:
    """The nodes that stopped reporting with the fleet's pods on them, in node-name order."""
    by_node: dict[str, list[tuple[str, datetime]]] = {}
    for pod, placement in placements.items():
        since = stranded_since(placement, now)
        if since is not None and placement.node:
            by_node.setdefault(placement.node, []).append((pod, since))
    return [
        UnreachableNode(node, tuple(sorted_by_ordinal(fleet_name, {pod for pod, _ in found})), min(s for _, s in found))
        for node, found in sorted(by_node.items())
    ]


def unreachable_patch(found: Sequence[UnreachableNode], status: Mapping[str, Any]) -> dict[str, Any]:
    """The status change (empty when status already says it)."""
    wanted = [node.as_status() for node in found] or None
    return {} if (status.get(UNREACHABLE_NODES) or None) == wanted else {UNREACHABLE_NODES: wanted}


def unreachable_message(node: UnreachableNode, session_timeout: str) -> str:
    pods = ", ".join(node.pods)
    one = len(node.pods) == 1
    return (
        f"node {node.node} stopped reporting at {format_time(node.since)}: pod{'' if one else 's'} {pods} on it"
        f" {'is' if one else 'are'} not known to run or to be gone. If {'it is' if one else 'they are'} down,"
        f" {'its member leaves' if one else 'their members leave'} the group when the session timeout"
        f" ({session_timeout}) expires; Berth deletes no pod and removes no member whose pod may still run. Once the"
        f" node is known to be down, tell Kubernetes: kubectl taint node {node.node} {OUT_OF_SERVICE_TAINT}"
        " (or kubectl delete pod --force --grace-period=0), and the StatefulSet starts the pods on another node"
        " (docs/failure-modes.md)"
    )


def events_for(
    found: Sequence[UnreachableNode], status: Mapping[str, Any], session_timeout: str
) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events this change calls for: a Warning per node that appears or whose pods
    change, one Normal when none is left."""
    before = {entry.get("node"): list(entry.get("pods") or []) for entry in status.get(UNREACHABLE_NODES) or []}
    events = [
        ("Warning", UNREACHABLE_EVENT, unreachable_message(node, session_timeout))
        for node in found
        if before.get(node.node) != list(node.pods)
    ]
    if before and not found:
        nodes = ", ".join(sorted(str(name) for name in before))
        events.append(("Normal", REACHABLE_EVENT, f"no pod of the fleet is stranded any longer (was on {nodes})"))
    return events
