"""``StatefulSetWorkload``: the operator's :class:`~berth.operator.ports.WorkloadPort` on Kubernetes.

One fleet's StatefulSet, headless Service and PodDisruptionBudget (all named like the fleet), its pods and its
per-pod volume claims. Rules:

- Create-or-patch (``owned_objects``): an object is created as planned; an existing one is patched only when the
  plan's hash differs from the ``berth.dev/applied-hash`` annotation it carries, so a reconcile that changes
  nothing writes nothing. The hash leaves ``spec.replicas`` out: the scaling planner changes it with :meth:`scale`.
- A StatefulSet update sets what Kubernetes lets change (``planners.statefulset.updatable_spec``): the pod
  template, replaced whole (a JSON patch, so an entry removed from the fleet's template disappears from the pods
  too; a merge patch would keep it), the update strategy and the claim retention policy. The selector,
  serviceName and podManagementPolicy are set at creation only.
- Before the StatefulSet is created, the API server checks one claim of each claim template (a dry-run create),
  because Kubernetes itself checks them only when the StatefulSet controller makes the claims: a template it
  refuses is the fleet's :class:`WorkloadRejected`, not a pod that never appears.
- The claim templates are fixed at creation too: the StatefulSet carries a hash of those it was created with
  (``berth.dev/claim-templates-hash``; none recorded means none), and a plan with other templates is refused
  (:class:`WorkloadRejected`) before anything is written, instead of an update the API server would refuse.
- The PodDisruptionBudget is ``kube.disruption_budget``'s (deleted when the fleet turns it off).
- Nothing else is written into the fleet's namespace: the coordinator's CA travels in the pod template
  (``planners.statefulset``), so the operator has no access to ConfigMaps there.
- An object with the fleet's name that the fleet does not control is never touched: :class:`NotOurs`.
- Observation is the ``observer``'s (``kube.observation``: through the API by default; ``kube.watch_cache``'s
  watched objects instead). With a ``cache``, the objects applied are read from it too (once it is synced), and
  through the API only after a 409 on create; without one, every read goes to the API.
- No ``ApiException`` leaves a port method: it becomes :class:`~berth.operator.ports.ApiCallFailed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes

from berth.operator.adapters.kube.calls import (
    JSON_PATCH,
    MERGE_PATCH,
    ApiException,
    api_error_text,
    call_json,
    is_conflict,
    port_errors,
    read_or_none,
)
from berth.operator.adapters.kube.disruption_budget import FleetDisruptionBudget
from berth.operator.adapters.kube.observation import ApiWorkloadObserver
from berth.operator.adapters.kube.owned_objects import (
    annotation,
    applied_hash,
    check_ours,
    ensure_owned,
    metadata_ops,
    stamped,
)
from berth.operator.adapters.kube.watch_cache import (
    SERVICES,
    STATEFULSETS,
    WatchCache,
    read_cached,
    written,
)
from berth.operator.planners.manifest_hash import canonical_hash, planned_hash, template_hash
from berth.operator.planners.statefulset import PlannedWorkload, updatable_spec
from berth.operator.planners.volume_claims import claim_name
from berth.operator.ports import Applied, ApplyResult, WorkloadObserver, WorkloadRejected, WorkloadView
from berth.operator.spec.names import (
    APPLIED_HASH_ANNOTATION,
    CLAIM_TEMPLATES_HASH_ANNOTATION,
    TEMPLATE_HASH_ANNOTATION,
)


def claim_templates_hash(statefulset: Mapping[str, Any]) -> str:
    """A short hash of a StatefulSet manifest's claim templates (none is a list of none)."""
    return canonical_hash((statefulset.get("spec") or {}).get("volumeClaimTemplates") or [])


class StatefulSetWorkload:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        namespace: str,
        name: str,
        fleet_uid: str | None,
        observer: WorkloadObserver | None = None,
        cache: WatchCache | None = None,
    ) -> None:
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.fleet_uid = fleet_uid
        self.cache = cache
        self.disruption_budget = FleetDisruptionBudget(
            api_client, namespace=namespace, name=name, fleet_uid=fleet_uid, cache=cache
        )
        #: How the workload is read: through the API by default (``kube.observation``), or from a cache.
        self.observer: WorkloadObserver = observer or ApiWorkloadObserver(api_client, namespace=namespace, name=name)

    # ------------------------------------------------------------------------------------------ WorkloadPort

    async def apply(self, planned: PlannedWorkload, *, hold: bool = False) -> ApplyResult:
        """Create or update the objects as planned (an existing StatefulSet left as it is with ``hold``); says what
        it did to each."""
        with port_errors():
            return await self._apply(planned, hold)

    async def scale(self, replicas: int) -> None:
        with port_errors():
            await written(
                self.cache,
                STATEFULSETS,
                call_json(
                    self.apps.patch_namespaced_stateful_set,
                    self.name,
                    self.namespace,
                    {"spec": {"replicas": replicas}},
                    _content_type=MERGE_PATCH,
                ),
                key=(self.namespace, self.name),
            )

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        with port_errors():
            return await self.observer.observe(fresh=fresh)

    # ----------------------------------------------------------------------------------------------- steps

    async def _apply(self, planned: PlannedWorkload, hold: bool) -> ApplyResult:
        try:
            statefulset = await self._ensure_statefulset(planned.statefulset, hold)
            service = await self._ensure_service(planned.service)
            budget = await self.disruption_budget.ensure(planned.disruption_budget)
        except ApiException as error:
            if error.status not in (400, 422):
                raise
            raise WorkloadRejected(
                "the API server refused the fleet's StatefulSet, Service or PodDisruptionBudget:"
                f" {api_error_text(error)}"
            ) from error
        return ApplyResult(statefulset, service, budget)

    async def _read_statefulset(self) -> dict[str, Any] | None:
        return await read_cached(self.cache, STATEFULSETS, self.namespace, self.name, self._fetch_statefulset)

    async def _fetch_statefulset(self) -> dict[str, Any] | None:
        return await read_or_none(self.apps.read_namespaced_stateful_set, self.name, self.namespace)

    async def _read_service(self) -> dict[str, Any] | None:
        return await read_cached(self.cache, SERVICES, self.namespace, self.name, self._fetch_service)

    async def _fetch_service(self) -> dict[str, Any] | None:
        return await read_or_none(self.core.read_namespaced_service, self.name, self.namespace)

    async def _ensure_statefulset(self, planned: Mapping[str, Any], hold: bool) -> Applied:
        wanted = planned_hash(planned)
        claims = claim_templates_hash(planned)
        live = await self._read_statefulset()
        if live is None:
            await self._try_claims(planned)
            try:
                body = stamped(
                    planned,
                    {
                        APPLIED_HASH_ANNOTATION: wanted,
                        CLAIM_TEMPLATES_HASH_ANNOTATION: claims,
                        TEMPLATE_HASH_ANNOTATION: template_hash(planned),
                    },
                )
                await written(
                    self.cache,
                    STATEFULSETS,
                    call_json(self.apps.create_namespaced_stateful_set, self.namespace, body),
                    key=(self.namespace, self.name),
                )
                return Applied.CREATED
            except Exception as error:
                if not is_conflict(error):  # 409: created meanwhile (an earlier attempt that timed out)
                    raise
            live = await self._fetch_statefulset()
            if live is None:
                raise RuntimeError(f"StatefulSet {self.name} exists and does not: the API server disagrees")
        check_ours("StatefulSet", live, self.fleet_uid)
        created_with = annotation(live, CLAIM_TEMPLATES_HASH_ANNOTATION) or claim_templates_hash({})
        if created_with != claims:
            raise WorkloadRejected(
                "spec.volumeClaimTemplates cannot change once the fleet's StatefulSet exists (Kubernetes fixes a"
                " StatefulSet's claim templates when it is created): put them back as they were; an existing claim"
                " can be resized on its own where its storage class allows it (kubectl patch pvc)"
            )
        if applied_hash(live) == wanted:
            return Applied.UNCHANGED
        if hold:
            return Applied.HELD
        patch = [
            *metadata_ops(live, planned, wanted, {TEMPLATE_HASH_ANNOTATION: template_hash(planned)}),
            *({"op": "add", "path": f"/spec/{key}", "value": value} for key, value in updatable_spec(planned).items()),
        ]
        await written(
            self.cache,
            STATEFULSETS,
            call_json(
                self.apps.patch_namespaced_stateful_set, self.name, self.namespace, patch, _content_type=JSON_PATCH
            ),
            key=(self.namespace, self.name),
        )
        return Applied.UPDATED

    async def _try_claims(self, planned: Mapping[str, Any]) -> None:
        """Let the API server check one claim of each template (a dry run) before the StatefulSet is created.

        Kubernetes checks a StatefulSet's claim templates only when its controller creates the claims, and then a
        refusal is an Event on the StatefulSet while the pod never appears; checked here, it is the fleet's
        condition instead. A claim that exists already (kept from an earlier fleet of that name) is the one the
        StatefulSet will use: nothing to check.
        """
        spec = planned["spec"]
        for index, template in enumerate(spec.get("volumeClaimTemplates") or []):
            metadata = template.get("metadata") or {}
            labels = {**(metadata.get("labels") or {}), **spec["selector"]["matchLabels"]}
            name = claim_name(str(metadata.get("name")), self.name, 0)
            claim = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {**metadata, "name": name, "namespace": self.namespace, "labels": labels},
                "spec": template.get("spec") or {},
            }
            try:
                await call_json(
                    self.core.create_namespaced_persistent_volume_claim, self.namespace, claim, dry_run="All"
                )
            except ApiException as error:
                if error.status in (400, 422):
                    raise WorkloadRejected(
                        f"spec.volumeClaimTemplates[{index}]: the API server refuses its claims:"
                        f" {api_error_text(error)}"
                    ) from error
                if error.status != 409:
                    raise

    async def _ensure_service(self, planned: Mapping[str, Any]) -> Applied:
        # clusterIP is immutable; the selector and publishNotReadyAddresses are what the plan can change.
        return await ensure_owned(
            "Service",
            planned,
            self.fleet_uid,
            read=self._read_service,
            reread=self._fetch_service,
            create=lambda body: written(
                self.cache,
                SERVICES,
                call_json(self.core.create_namespaced_service, self.namespace, body),
                key=(self.namespace, self.name),
            ),
            patch=lambda ops: written(
                self.cache,
                SERVICES,
                call_json(self.core.patch_namespaced_service, self.name, self.namespace, ops, _content_type=JSON_PATCH),
                key=(self.namespace, self.name),
            ),
            changes=lambda plan: [
                {"op": "add", "path": f"/spec/{key}", "value": plan["spec"][key]}
                for key in ("selector", "publishNotReadyAddresses")
            ],
        )
