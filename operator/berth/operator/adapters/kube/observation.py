"""What a fleet's workload looks like on Kubernetes: its StatefulSet, its pods and its per-pod volume claims, read
together and turned into the port's :class:`~berth.operator.ports.WorkloadView`.

Two halves, so that a cache of watched objects can replace the reads without touching the meaning:

- :func:`workload_view` interprets the objects (pure): pods are filtered by the fleet's labels and instance-id names,
  not only by the API's selector; terminating pods count as existing until they are gone (with when their grace
  period ends), and running pods not Ready are named; the StatefulSet is settled once its controller reports
  having observed its generation, and rolling while it still has pods to move to its update revision
  (:func:`rolling_out`); a container that last ended in failure, with the kubelet's termination message; claims
  that stay are those neither being deleted nor owned by a pod (``whenScaled:
  Delete`` makes a departing pod their owner), listed only when the StatefulSet has claim templates; each running
  pod's times (its containers' latest ``startedAt``, else its ``startTime``, else its creation; a restarted
  container's ``finishedAt``); each scheduled pod's node and what shows its node stopped reporting for it
  (:func:`placement`, read by ``planners.node_loss``).
- :class:`ApiWorkloadObserver` reads them through the API (the StatefulSet by name, pods and claims by the
  StatefulSet's selector, which its controller copies onto both): a
  :class:`~berth.operator.ports.WorkloadObserver`, always fresh. ``kube.watch_cache.CachedWorkloadObserver``
  serves the same view from watched objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes

from berth.operator.adapters.kube.calls import call_json, read_or_none
from berth.operator.planners.conditions import parse_time
from berth.operator.planners.instances import ordinal_of
from berth.operator.planners.node_loss import PodPlacement
from berth.operator.planners.observations import PodTimes
from berth.operator.ports import WorkloadObservation, WorkloadView
from berth.operator.spec.names import APPLIED_HASH_ANNOTATION, TEMPLATE_HASH_ANNOTATION


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
    unready = frozenset(pod["metadata"]["name"] for pod in running if not _is_ready(pod))
    terminating = {
        pod["metadata"]["name"]: deadline
        for pod in ours
        if (deadline := parse_time(pod["metadata"].get("deletionTimestamp"))) is not None
    }
    times = {pod["metadata"]["name"]: found for pod in running if (found := pod_times(pod)) is not None}
    config_errors = {pod["metadata"]["name"]: error for pod in running if (error := _config_error(pod)) is not None}
    crashes = {pod["metadata"]["name"]: said for pod in running if (said := _crash_message(pod))}
    placements = {pod["metadata"]["name"]: where for pod in ours if (where := placement(pod)) is not None}
    replicas: int | None = None
    settled = True
    if statefulset is not None:
        settled = observed_spec(statefulset)
        replicas = int(statefulset["spec"].get("replicas") or 0)
    observation = WorkloadObservation(
        replicas,
        settled,
        existing,
        ready,
        terminating,
        unready=unready,
        times=times,
        config_errors=config_errors,
        crashes=crashes,
        placements=placements,
    )
    if statefulset is None:
        return WorkloadView(observation, None, len(running))
    staying = _staying(claims) if has_claim_templates(statefulset) else frozenset()
    return WorkloadView(
        observation,
        (statefulset.get("metadata", {}).get("annotations") or {}).get(APPLIED_HASH_ANNOTATION),
        len(running),
        staying,
        revision=(statefulset.get("status") or {}).get("updateRevision"),
        rolling=rolling_out(statefulset),
        template_hash=(statefulset.get("metadata", {}).get("annotations") or {}).get(TEMPLATE_HASH_ANNOTATION),
        last_started=max((found.started for found in times.values()), default=None),
    )


def view_changes(before: WorkloadView, after: WorkloadView) -> tuple[str, ...]:
    """The fields of the view that differ between ``before`` and ``after`` (its observation's by their own names)."""
    moved = [
        f.name
        for f in dataclasses.fields(WorkloadObservation)
        if getattr(before.observation, f.name) != getattr(after.observation, f.name)
    ]
    moved += [
        f.name
        for f in dataclasses.fields(WorkloadView)
        if f.name != "observation" and getattr(before, f.name) != getattr(after, f.name)
    ]
    return tuple(moved)


def observed_spec(statefulset: Mapping[str, Any]) -> bool:
    """Whether the StatefulSet's controller has acted on its current spec: it reports having observed its
    generation."""
    observed = (statefulset.get("status") or {}).get("observedGeneration")
    generation = (statefulset.get("metadata") or {}).get("generation")
    return generation is None or (observed is not None and observed >= generation)


def rolling_out(statefulset: Mapping[str, Any]) -> bool:
    """A RollingUpdate in progress: pods not yet on the update revision that the controller will replace (those
    below ``partition`` stay as they are). OnDelete replaces a pod only when someone deletes it: never rolling."""
    spec, status = statefulset.get("spec") or {}, statefulset.get("status") or {}
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return False
    if status.get("updateRevision") in (None, status.get("currentRevision")):
        return False
    partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
    replicas = int(spec.get("replicas") or 0)
    return int(status.get("updatedReplicas") or 0) < replicas - partition


def roll_in_progress(statefulset: Mapping[str, Any]) -> bool:
    """Whether the StatefulSet's roll counts for the roll pacer (``planners.roll_pacing``): a spec its controller
    has not observed yet (a template just changed shows no new revision until then), or a RollingUpdate not done.

    Done is what the controller itself says: with no partition, the current revision becomes the update revision
    only once every pod is updated *and* Ready, so the last pod's restart still counts while its member is away
    (``rolling_out``, which the restarts read, ends when the last pod is replaced). With a partition (a canary the
    fleet's author holds) the current revision never moves, so the roll counts until the pods above it are
    replaced."""
    if not observed_spec(statefulset):
        return True
    spec, status = statefulset.get("spec") or {}, statefulset.get("status") or {}
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return False
    if int((strategy.get("rollingUpdate") or {}).get("partition") or 0):
        return rolling_out(statefulset)
    return status.get("updateRevision") not in (None, status.get("currentRevision"))


def roll_progress(statefulset: Mapping[str, Any]) -> tuple[object, ...]:
    """What moves as a roll does: the spec observed, the revisions, the pods updated."""
    status = statefulset.get("status") or {}
    return (
        (statefulset.get("metadata") or {}).get("generation"),
        *(status.get(key) for key in ("observedGeneration", "updateRevision", "currentRevision", "updatedReplicas")),
    )


class ApiWorkloadObserver:
    """Reads one fleet's objects through the API server, each time it is asked (every view is fresh)."""

    def __init__(self, api_client: kubernetes.client.ApiClient, *, namespace: str, name: str) -> None:
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name

    async def observe(self, *, fresh: bool = True) -> WorkloadView:
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


def _config_error(pod: Mapping[str, Any]) -> str | None:
    """The kubelet's message for a container it cannot configure (waiting, CreateContainerConfigError), if any."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == "CreateContainerConfigError":
            return str(waiting.get("message") or "")
    return None


def _crash_message(pod: Mapping[str, Any]) -> str:
    """The termination message of the pod's container that last ended in failure (a non-zero exit code), now or
    before its restart; '' when none did or the kubelet kept no message."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        for state in (container.get("state"), container.get("lastState")):
            terminated = (state or {}).get("terminated") or {}
            if terminated.get("exitCode") not in (None, 0) and terminated.get("message"):
                return str(terminated["message"])
    return ""


def pod_times(pod: Mapping[str, Any]) -> PodTimes | None:
    """When the pod's current process started and the previous one (in this pod) ended; None without a creation
    time (not a pod the API server stored)."""
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return None
    status = pod.get("status") or {}
    starts, ends = [], []
    for container in status.get("containerStatuses") or []:
        starts.append(parse_time(((container.get("state") or {}).get("running") or {}).get("startedAt")))
        ends.append(parse_time(((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")))
    started = max((t for t in starts if t is not None), default=None) or parse_time(status.get("startTime"))
    ended = max((t for t in ends if t is not None), default=None)
    return PodTimes(created, started or created, ended if ended is not None and ended >= created else None)


def placement(pod: Mapping[str, Any]) -> PodPlacement | None:
    """The pod's node and the signs that the node stopped reporting for it; None for a pod not scheduled yet.

    ``Ready`` False with ``ContainersReady`` True is written by the node lifecycle controller alone (when the node's
    kubelet goes silent); a kubelet that finds a container unready turns both."""
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    if not node:
        return None
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    ready, containers = conditions.get("Ready") or {}, conditions.get("ContainersReady") or {}
    # (Readiness gates also keep Ready False with the containers ready: a pod that has them is not read this way.)
    gated = bool((pod.get("spec") or {}).get("readinessGates"))
    silent = not gated and ready.get("status") == "False" and containers.get("status") == "True"
    disruption = conditions.get("DisruptionTarget") or {}
    return PodPlacement(
        node,
        silent_since=parse_time(ready.get("lastTransitionTime")) if silent else None,
        grace_ends=parse_time((pod.get("metadata") or {}).get("deletionTimestamp")),
        disruption=str(disruption.get("reason") or "") or None if disruption.get("status") == "True" else None,
    )


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
