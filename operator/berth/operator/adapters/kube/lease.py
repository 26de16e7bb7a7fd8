"""``LeaseApi``: the leader-election Lease (``coordination.k8s.io/v1``) in the operator's own namespace, and the
Event that says who took it.

Rules:

- Read, created and replaced by name only (RBAC: a Role in the operator's namespace, never the ClusterRole);
  replace carries the resourceVersion read, so a write after someone else's is answered 409
  (:class:`LeaseConflict`), never applied.
- Calls run on a thread of their own, not the shared pool the fleets' calls use: a thousand passes queued there
  must not hold a renewal back past the renew deadline. Each call is bounded by ``timeout_s``.
- The Event (reason ``LeaderElection``, on the Lease, as controller-runtime posts it) says which replica became
  the leader; posting it never fails the election.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import kubernetes

from berth.operator.adapters.kube.calls import ApiException, api_error_text, call_json_here, is_conflict, is_not_found
from berth.operator.planners.conditions import format_time
from berth.operator.planners.lease import LeaseConflict, LeaseRecord
from berth.operator.spec.names import COMPONENT

logger = logging.getLogger("berth.operator.leader")


class LeaseApi:
    def __init__(self, api_client: kubernetes.client.ApiClient, *, namespace: str, name: str, timeout_s: float) -> None:
        self.coordination = kubernetes.client.CoordinationV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.timeout = (min(5.0, timeout_s), timeout_s)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lease")

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._thread, lambda: call_json_here(method, *args, _request_timeout=self.timeout, **kwargs)
        )

    async def read(self) -> LeaseRecord | None:
        try:
            lease = await self._call(self.coordination.read_namespaced_lease, self.name, self.namespace)
        except ApiException as error:
            if is_not_found(error):
                return None
            raise RuntimeError(f"reading Lease {self.namespace}/{self.name}: {api_error_text(error)}") from error
        return LeaseRecord.from_lease(lease)

    async def write(self, record: LeaseRecord, *, create: bool) -> LeaseRecord:
        """Create or replace the Lease as ``record`` says; the record as stored (its new resourceVersion)."""
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.spec(),
        }
        if not create:
            body["metadata"]["resourceVersion"] = record.resource_version
        try:
            if create:
                stored = await self._call(self.coordination.create_namespaced_lease, self.namespace, body)
            else:
                stored = await self._call(self.coordination.replace_namespaced_lease, self.name, self.namespace, body)
        except ApiException as error:
            if is_conflict(error):
                raise LeaseConflict(api_error_text(error)) from error
            raise RuntimeError(f"writing Lease {self.namespace}/{self.name}: {api_error_text(error)}") from error
        return LeaseRecord.from_lease(stored)

    async def announce(self, message: str, *, now: datetime, uid: str | None = None) -> None:
        """A ``LeaderElection`` Event on the Lease (best effort)."""
        stamp = format_time(now)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "name": self.name,
                "namespace": self.namespace,
                **({"uid": uid} if uid else {}),
            },
            "reason": "LeaderElection",
            "message": message,
            "type": "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        with contextlib.suppress(Exception):
            await self._call(self.core.create_namespaced_event, self.namespace, event)
            return
        logger.warning("could not post the LeaderElection Event on Lease %s/%s", self.namespace, self.name)
