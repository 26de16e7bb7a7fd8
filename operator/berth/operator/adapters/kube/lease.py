"""``LeaseApi``: the leader-election Lease (``coordination.k8s.io/v1``) in the operator's own namespace, its watch,
and the Event that says who took it.

Rules:

- Read, created, replaced, listed and watched by name only (RBAC: a Role in the operator's namespace, never the
  ClusterRole; list and watch carry the ``metadata.name`` field selector, which a Role's ``resourceNames`` admits);
  replace carries the resourceVersion read, so a write after someone else's is answered 409
  (:class:`LeaseConflict`), never applied. A replace answered 404 (the Lease deleted), 401 or 403 (this replica's
  credentials or rights gone, as ``helm uninstall`` leaves a replica that has not stopped yet) raises
  :class:`LeaseLost`: retrying cannot renew it.
- Calls run on a thread of their own, not the shared pool the fleets' calls use: a thousand passes queued there
  must not hold a renewal back past the renew deadline. Each call is bounded by ``timeout_s`` and made once:
  urllib3 does not retry it (three attempts of a call that hangs would outlast the renew deadline, and a renewal
  that could have succeeded after a short partition would come too late); the elector tries again every retry
  period. With ``write_bound_s``, the connections carry ``TCP_USER_TIMEOUT`` as the gated clients' do.
- :meth:`LeaseApi.watching` watches that one Lease while a standby waits (``kube.informer``: list, then watch from
  the list's resourceVersion, started again from the last one seen when it ends, listed again after 410 Gone, a
  failure logged once per episode and retried with backoff) and sets an event whenever it changes: the standby
  looks again at once instead of at its next retry period. The watch runs on an aiohttp session of its own
  (``kube.api_session``), not the passes': a standby's watch never queues behind their calls. Without a session
  (``api`` None) the event is never set and the standby looks every retry period.
- The Event (reason ``LeaderElection``, on the Lease, as controller-runtime posts it) says which replica became
  the leader; posting it never fails the election.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import kubernetes

from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.calls import ApiException, api_error_text, call_json_here, is_conflict, is_not_found
from berth.operator.adapters.kube.informer import Informer, Obj, WatchedResource
from berth.operator.adapters.leadership.gated_http import bound_connections
from berth.operator.planners.conditions import format_time
from berth.operator.planners.lease import LeaseConflict, LeaseLost, LeaseRecord
from berth.operator.spec.names import COMPONENT

logger = logging.getLogger("berth.operator.leader")

LEASES = WatchedResource("coordination.k8s.io", "v1", "leases")


class LeaseApi:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        namespace: str,
        name: str,
        timeout_s: float,
        write_bound_s: float | None = None,
        api: ApiSession | None = None,
    ) -> None:
        pool = api_client.rest_client.pool_manager
        pool.connection_pool_kw["retries"] = False
        if write_bound_s is not None:
            bound_connections(pool, write_bound_s)
        pool.clear()
        self.coordination = kubernetes.client.CoordinationV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.timeout = (min(5.0, timeout_s), timeout_s)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lease")
        self.api = api

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[asyncio.Event]:
        """While the block runs, an event set whenever the Lease changes (created, written, deleted); the caller
        clears it before it reads."""
        changed = asyncio.Event()
        if self.api is None:
            yield changed
            return
        watch = Informer(
            self.api,
            LEASES,
            namespace=self.namespace,
            selector="",
            name=self.name,
            project=_lease_version,
            on_change=lambda old, new: changed.set(),
        )
        watch.start()
        try:
            yield changed
        finally:
            await watch.stop()

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
            if not create and error.status in (401, 403, 404):
                raise LeaseLost(f"writing Lease {self.namespace}/{self.name}: {api_error_text(error)}") from error
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


def _lease_version(lease: Obj) -> Obj:
    """What is kept of the Lease: its resourceVersion, so that every write of it is a change (the standby's clock
    restarts on any new version it reads, ``planners.lease.observe``)."""
    return {"resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")}
