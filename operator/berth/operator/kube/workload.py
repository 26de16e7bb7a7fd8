"""``StatefulSetWorkload``: the operator's :class:`~berth.operator.ports.WorkloadPort` on Kubernetes.

One fleet's StatefulSet and headless Service (both named like the fleet) and its pods. Rules:

- Create-or-patch. An object is created as planned; an existing one is patched only when the plan's hash differs
  from the ``berth.dev/applied-hash`` annotation it carries, so a reconcile that changes nothing writes nothing.
  The hash leaves ``spec.replicas`` out: the scaling planner owns the size and changes it with :meth:`scale`.
- The pod template is replaced whole (a JSON patch ``replace`` of ``/spec/template``), so an entry removed from
  the fleet's template disappears from the pods too (a merge patch would keep it). Immutable StatefulSet fields
  (selector, serviceName, podManagementPolicy) are set at creation only.
- An object with the fleet's name that the fleet does not control is never touched: :class:`NotOurs`.
- Observation reads the StatefulSet and lists the fleet's pods (terminating ones count as existing until they are
  gone); pods are also filtered here by the fleet's labels and instance-id names, not only by the API's selector.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import kubernetes

from berth.operator.kube.calls import (
    JSON_PATCH,
    MERGE_PATCH,
    ApiException,
    api_error_text,
    call_json,
    is_conflict,
    is_not_found,
)
from berth.operator.names import APPLIED_HASH_ANNOTATION
from berth.operator.planners.conditions import parse_time
from berth.operator.planners.instances import ordinal_of
from berth.operator.planners.statefulset import PlannedWorkload
from berth.operator.ports import Applied, ApplyResult, NotOurs, WorkloadObservation, WorkloadRejected, WorkloadView


def planned_hash(manifest: Mapping[str, Any]) -> str:
    """A short hash of a planned object, ``spec.replicas`` left out."""
    spec = {key: value for key, value in (manifest.get("spec") or {}).items() if key != "replicas"}
    canonical = json.dumps({**manifest, "spec": spec}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class StatefulSetWorkload:
    def __init__(
        self, api_client: kubernetes.client.ApiClient, *, namespace: str, name: str, fleet_uid: str | None
    ) -> None:
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.fleet_uid = fleet_uid

    # ------------------------------------------------------------------------------------------ WorkloadPort

    async def apply(self, planned: PlannedWorkload) -> ApplyResult:
        """Create or update both objects as planned; says what it did to each."""
        try:
            statefulset = await self._ensure_statefulset(planned.statefulset)
            service = await self._ensure_service(planned.service)
        except ApiException as error:
            if error.status not in (400, 422):
                raise
            raise WorkloadRejected(
                f"the API server refused the fleet's StatefulSet or Service: {api_error_text(error)}"
            ) from error
        return ApplyResult(statefulset, service)

    async def scale(self, replicas: int) -> None:
        await call_json(
            self.apps.patch_namespaced_stateful_set,
            self.name,
            self.namespace,
            {"spec": {"replicas": replicas}},
            _content_type=MERGE_PATCH,
        )

    async def observe(self) -> WorkloadView:
        statefulset = await self._read_statefulset()
        selector, labels = "", {}
        if statefulset is not None:
            labels = dict(statefulset.get("spec", {}).get("selector", {}).get("matchLabels") or {})
            selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
        pods = await self._fleet_pods(selector, labels) if statefulset is not None else []
        existing = frozenset(pod["metadata"]["name"] for pod in pods)
        running = [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]
        ready = sum(1 for pod in running if _is_ready(pod))
        terminating = {
            pod["metadata"]["name"]: deadline
            for pod in pods
            if (deadline := parse_time(pod["metadata"].get("deletionTimestamp"))) is not None
        }
        if statefulset is None:
            return WorkloadView(WorkloadObservation(None, True, existing, ready, terminating), None, len(running))
        metadata = statefulset.get("metadata", {})
        observed = (statefulset.get("status") or {}).get("observedGeneration")
        generation = metadata.get("generation")
        # The controller has acted on the current spec once it reports having observed its generation.
        settled = generation is None or (observed is not None and observed >= generation)
        return WorkloadView(
            WorkloadObservation(int(statefulset["spec"].get("replicas") or 0), settled, existing, ready, terminating),
            (metadata.get("annotations") or {}).get(APPLIED_HASH_ANNOTATION),
            len(running),
        )

    # ----------------------------------------------------------------------------------------------- steps

    async def _read_statefulset(self) -> dict[str, Any] | None:
        try:
            return await call_json(self.apps.read_namespaced_stateful_set, self.name, self.namespace)
        except Exception as error:
            if is_not_found(error):
                return None
            raise

    async def _read_service(self) -> dict[str, Any] | None:
        try:
            return await call_json(self.core.read_namespaced_service, self.name, self.namespace)
        except Exception as error:
            if is_not_found(error):
                return None
            raise

    async def _ensure_statefulset(self, planned: Mapping[str, Any]) -> Applied:
        wanted = planned_hash(planned)
        live = await self._read_statefulset()
        if live is None:
            try:
                await call_json(self.apps.create_namespaced_stateful_set, self.namespace, _stamped(planned, wanted))
                return Applied.CREATED
            except Exception as error:
                if not is_conflict(error):  # 409: created meanwhile (an earlier attempt that timed out)
                    raise
            live = await self._read_statefulset()
            if live is None:
                raise RuntimeError(f"StatefulSet {self.name} exists and does not: the API server disagrees")
        self._check_ours("StatefulSet", live)
        if _applied_hash(live) == wanted:
            return Applied.UNCHANGED
        patch = [
            *_metadata_ops(live, planned, wanted),
            {"op": "replace", "path": "/spec/template", "value": planned["spec"]["template"]},
        ]
        await call_json(
            self.apps.patch_namespaced_stateful_set, self.name, self.namespace, patch, _content_type=JSON_PATCH
        )
        return Applied.UPDATED

    async def _ensure_service(self, planned: Mapping[str, Any]) -> Applied:
        wanted = planned_hash(planned)
        live = await self._read_service()
        if live is None:
            try:
                await call_json(self.core.create_namespaced_service, self.namespace, _stamped(planned, wanted))
                return Applied.CREATED
            except Exception as error:
                if not is_conflict(error):
                    raise
            live = await self._read_service()
            if live is None:
                raise RuntimeError(f"Service {self.name} exists and does not: the API server disagrees")
        self._check_ours("Service", live)
        if _applied_hash(live) == wanted:
            return Applied.UNCHANGED
        spec = planned["spec"]
        # clusterIP is immutable; the selector and publishNotReadyAddresses are what the plan can change.
        patch = [
            *_metadata_ops(live, planned, wanted),
            {"op": "add", "path": "/spec/selector", "value": spec["selector"]},
            {"op": "add", "path": "/spec/publishNotReadyAddresses", "value": spec["publishNotReadyAddresses"]},
        ]
        await call_json(self.core.patch_namespaced_service, self.name, self.namespace, patch, _content_type=JSON_PATCH)
        return Applied.UPDATED

    async def _fleet_pods(self, selector: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        listing = await call_json(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
        pods = []
        for pod in listing.get("items") or []:
            metadata = pod.get("metadata") or {}
            pod_labels = metadata.get("labels") or {}
            if all(pod_labels.get(key) == value for key, value in labels.items()) and (
                ordinal_of(self.name, str(metadata.get("name", ""))) is not None
            ):
                pods.append(pod)
        return pods

    def _check_ours(self, kind: str, live: Mapping[str, Any]) -> None:
        owners = (live.get("metadata") or {}).get("ownerReferences") or []
        if not any(owner.get("controller") and owner.get("uid") == self.fleet_uid for owner in owners):
            raise NotOurs(
                f"{kind} {self.namespace}/{self.name} already exists and is not controlled by this fleet:"
                " rename the fleet or remove that object"
            )


def _stamped(planned: Mapping[str, Any], applied_hash: str) -> dict[str, Any]:
    metadata = dict(planned["metadata"])
    metadata["annotations"] = {**(metadata.get("annotations") or {}), APPLIED_HASH_ANNOTATION: applied_hash}
    return {**planned, "metadata": metadata}


def _applied_hash(live: Mapping[str, Any]) -> str | None:
    value = ((live.get("metadata") or {}).get("annotations") or {}).get(APPLIED_HASH_ANNOTATION)
    return value if isinstance(value, str) else None


def _metadata_ops(live: Mapping[str, Any], planned: Mapping[str, Any], applied_hash: str) -> list[dict[str, Any]]:
    """Our labels and the hash annotation added to whatever others put there ("add" replaces an existing map)."""
    metadata = live.get("metadata") or {}
    return [
        {
            "op": "add",
            "path": "/metadata/labels",
            "value": {**(metadata.get("labels") or {}), **planned["metadata"]["labels"]},
        },
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {**(metadata.get("annotations") or {}), APPLIED_HASH_ANNOTATION: applied_hash},
        },
    ]


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
