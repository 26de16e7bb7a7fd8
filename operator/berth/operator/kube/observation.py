"""What a fleet's workload looks like on Kubernetes: its StatefulSet, its pods and its per-pod volume claims, read
together and turned into the port's :class:`~berth.operator.ports.WorkloadView`.

Two halves, so that a cache of watched objects can replace the reads without touching the meaning:

- :func:`workload_view` interprets the objects (pure): pods are filtered by the fleet's labels and instance-id names,
  not only by the API's selector; terminating pods count as existing until they are gone (with when their grace
  period ends); the StatefulSet is settled once its controller reports having observed its generation; claims
  that stay are those neither being deleted nor owned by a pod (``whenScaled: Delete`` makes a departing pod
  their owner), listed only when the StatefulSet has claim templates.
- :class:`ApiWorkloadObserver` reads them through the API (the StatefulSet by name, pods and claims by the
  StatefulSet's selector, which its controller copies onto both): a
  :class:`~berth.operator.ports.WorkloadObserver`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes

from berth.operator.kube.calls import call_json, read_or_none
from berth.operator.names import APPLIED_HASH_ANNOTATION
from berth.operator.planners.conditions import parse_time
from berth.operator.planners.instances import ordinal_of
from berth.operator.ports import WorkloadObservation, WorkloadView


def selector_of(statefulset: Mapping[str, Any] | None) -> tuple[str, dict[str, str]]:
    """The StatefulSet's selector as a label-selector string and as labels ("", {} when there is none)."""
    if statefulset is None:
        return "", {}
    labels = dict(statefulset.get("spec", {}).get("selector", {}).get("matchLabels") or {})
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items())), labels


def has_claim_templates(statefulset: Mapping[str, Any]) -> bool:
    return bool(statefulset["spec"].get("volumeClaimTemplates"))


def workload_view(
    name: str,
    statefulset: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
) -> WorkloadView:
    """The fleet ``name``'s view of these objects (``pods`` and ``claims``: as listed by its selector)."""
    _, labels = selector_of(statefulset)
    ours = [pod for pod in pods if statefulset is not None and _is_fleet_pod(name, labels, pod)]
    existing = frozenset(pod["metadata"]["name"] for pod in ours)
    running = [pod for pod in ours if not pod["metadata"].get("deletionTimestamp")]
    ready = sum(1 for pod in running if _is_ready(pod))
    terminating = {
        pod["metadata"]["name"]: deadline
        for pod in ours
        if (deadline := parse_time(pod["metadata"].get("deletionTimestamp"))) is not None
    }
    if statefulset is None:
        return WorkloadView(WorkloadObservation(None, True, existing, ready, terminating), None, len(running))
    staying = _staying(claims) if has_claim_templates(statefulset) else frozenset()
    metadata = statefulset.get("metadata", {})
    observed = (statefulset.get("status") or {}).get("observedGeneration")
    generation = metadata.get("generation")
    # The controller has acted on the current spec once it reports having observed its generation.
    settled = generation is None or (observed is not None and observed >= generation)
    return WorkloadView(
        WorkloadObservation(int(statefulset["spec"].get("replicas") or 0), settled, existing, ready, terminating),
        (metadata.get("annotations") or {}).get(APPLIED_HASH_ANNOTATION),
        len(running),
        staying,
    )


class ApiWorkloadObserver:
    """Reads one fleet's objects through the API server, each pass (what a watch cache would serve instead)."""

    def __init__(self, api_client: kubernetes.client.ApiClient, *, namespace: str, name: str) -> None:
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name

    async def observe(self) -> WorkloadView:
        statefulset = await read_or_none(self.apps.read_namespaced_stateful_set, self.name, self.namespace)
        if statefulset is None:
            return workload_view(self.name, None, [], [])
        selector, _ = selector_of(statefulset)
        pods = await self._list(self.core.list_namespaced_pod, selector)
        claims = (
            await self._list(self.core.list_namespaced_persistent_volume_claim, selector)
            if has_claim_templates(statefulset)
            else []
        )
        return workload_view(self.name, statefulset, pods, claims)

    async def _list(self, method: Any, selector: str) -> list[dict[str, Any]]:
        listing = await call_json(method, self.namespace, label_selector=selector)
        return list(listing.get("items") or [])


def _is_fleet_pod(name: str, labels: Mapping[str, str], pod: Mapping[str, Any]) -> bool:
    metadata = pod.get("metadata") or {}
    pod_labels = metadata.get("labels") or {}
    return all(pod_labels.get(key) == value for key, value in labels.items()) and (
        ordinal_of(name, str(metadata.get("name", ""))) is not None
    )


def _staying(claims: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The fleet's claims that stay: not being deleted, and not owned by a pod (which they would go with)."""
    staying = set()
    for claim in claims:
        metadata = claim.get("metadata") or {}
        owned_by_pod = any(owner.get("kind") == "Pod" for owner in metadata.get("ownerReferences") or [])
        if not metadata.get("deletionTimestamp") and not owned_by_pod:
            staying.add(str(metadata.get("name", "")))
    return frozenset(staying)


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
