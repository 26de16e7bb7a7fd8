"""The test plays Kubernetes' StatefulSet controller on the emulator (kmock runs no controllers).

For every StatefulSet of one namespace, every few milliseconds: pods ``<name>-0..replicas-1`` are created from the
template one at a time, in order, each Ready at once (OrderedReady); pods at or beyond ``replicas`` are marked
terminating highest ordinal first and then deleted, unless ``hold`` keeps terminating pods around until
:meth:`release`; then ``status.observedGeneration`` catches up with ``metadata.generation``. Every change it makes
is sent to watchers, as a real controller's writes are. It also notes, for each StatefulSet, the sizes it was seen
at, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
from collections.abc import AsyncIterator
from typing import Any

from kopf_apiserver import PODS, STATEFULSETS, ApiServer

TICK_S = 0.02


class StatefulSetController:
    def __init__(self, server: ApiServer, namespace: str) -> None:
        self.server = server
        self.namespace = namespace
        self.hold = False
        self.sizes_seen: dict[str, list[int]] = {}

    def release(self) -> None:
        """Let terminating pods go (and stop holding the next ones)."""
        self.hold = False

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[StatefulSetController]:
        task = asyncio.create_task(self._run())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            for (resource, namespace, name), stored in list(self.server.objects.items()):
                if resource == STATEFULSETS and namespace == self.namespace and not stored.deleted:
                    for changed, object_name, kind in self._step(name, stored.raw):
                        await self.server.tell_watchers(changed, self.namespace, object_name, kind)
            await asyncio.sleep(TICK_S)

    def pods(self, statefulset: str) -> dict[int, dict[str, Any]]:
        found = {}
        for (resource, namespace, name), stored in list(self.server.objects.items()):
            if resource == PODS and namespace == self.namespace and not stored.deleted:
                prefix, _, ordinal = name.rpartition("-")
                if prefix == statefulset and ordinal.isdigit():
                    found[int(ordinal)] = stored.raw
        return found

    def _step(self, name: str, statefulset: dict[str, Any]) -> list[tuple[str, str, str]]:
        """One step for one StatefulSet; what it changed: (resource, name, watch event type)."""
        changes: list[tuple[str, str, str]] = []
        replicas = int(statefulset["spec"].get("replicas") or 0)
        seen = self.sizes_seen.setdefault(name, [])
        if not seen or seen[-1] != replicas:
            seen.append(replicas)
        pods = self.pods(name)
        for ordinal in sorted((o for o in pods if o >= replicas), reverse=True):
            metadata = pods[ordinal]["metadata"]
            pod = f"{name}-{ordinal}"
            if not metadata.get("deletionTimestamp"):
                self.server.objects[PODS, self.namespace, pod].patch({"metadata": {"deletionTimestamp": _now()}})
                changes.append((PODS, pod, "MODIFIED"))
            elif not self.hold:
                self.server.objects[PODS, self.namespace, pod].delete()
                changes.append((PODS, pod, "DELETED"))
            break  # one pod at a time, highest ordinal first
        else:
            missing = [o for o in range(replicas) if o not in pods]
            if missing:
                changes.append((PODS, self._create_pod(name, statefulset, missing[0]), "ADDED"))
        generation = statefulset["metadata"].get("generation", 1)
        live = self.pods(name)
        status = {
            "observedGeneration": generation,
            "replicas": len(live),
            "readyReplicas": sum(1 for pod in live.values() if not pod["metadata"].get("deletionTimestamp")),
        }
        if statefulset.get("status") != status:
            self.server.objects[STATEFULSETS, self.namespace, name].patch({"status": status})
            changes.append((STATEFULSETS, name, "MODIFIED"))
        return changes

    def _create_pod(self, name: str, statefulset: dict[str, Any], ordinal: int) -> str:
        template = copy.deepcopy(statefulset["spec"]["template"])
        pod_name = f"{name}-{ordinal}"
        self.server.objects[PODS, self.namespace, pod_name] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **template.get("metadata", {}),
                "name": pod_name,
                "namespace": self.namespace,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "controller": True}],
            },
            "spec": template["spec"],
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        return pod_name


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
