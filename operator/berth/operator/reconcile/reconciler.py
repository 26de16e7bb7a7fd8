"""``FleetReconciler``: runs reconcile passes for fleets, one at a time per fleet, each from a fresh read.

Kopf runs a fleet's change handlers and its timer concurrently; two passes interleaving could send the same batch
leave twice. Rules:

- One pass per fleet at a time (an asyncio lock per namespace/name), and every pass starts by reading the fleet
  from the API server, so it sees every status write of the pass before it (a handler's body may be older).
- :meth:`converge` repeats passes while the plan waits on something quick (the StatefulSet acting on a new size,
  pods terminating), up to ``budget_s``; after that the timer's passes carry on. So the batch leave goes out
  within a poll interval of the last departing pod disappearing, not a timer interval later.
- A fleet being deleted is left to :meth:`finalize` (Kopf calls it through the finalizer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from berth.operator.reconcile.fleet_pass import ClaimsLookup, FleetPass, PassContext, PassResult


@dataclass(frozen=True, slots=True)
class FleetKey:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class FleetReader(Protocol):
    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The fleet as stored now; None when it is gone."""
        ...


class FleetReconciler:
    def __init__(self, context: PassContext, fleets: FleetReader, *, poll_s: float) -> None:
        self.context = context
        self.fleets = fleets
        self.poll_s = poll_s
        self._locks: dict[FleetKey, asyncio.Lock] = {}

    @asynccontextmanager
    async def _exclusive(self, key: FleetKey) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            yield

    async def reconcile(self, key: FleetKey, claims: ClaimsLookup) -> PassResult:
        """One pass; a fleet that is gone or being deleted is left alone."""
        async with self._exclusive(key):
            body = await self.fleets.read(key.namespace, key.name)
            if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
                return PassResult()
            return await FleetPass(self.context, body, claims).run()

    async def converge(self, key: FleetKey, claims: ClaimsLookup, *, budget_s: float) -> PassResult:
        deadline = time.monotonic() + budget_s
        while True:
            result = await self.reconcile(key, claims)
            if result.waiting is None or time.monotonic() >= deadline:
                return result
            await asyncio.sleep(self.poll_s)

    async def finalize(self, key: FleetKey, claims: ClaimsLookup, *, budget_s: float) -> str | None:
        """Deletion passes until the fleet may be released (None) or ``budget_s`` is spent (what it waits for)."""
        deadline = time.monotonic() + budget_s
        while True:
            async with self._exclusive(key):
                body = await self.fleets.read(key.namespace, key.name)
                waiting = None if body is None else await FleetPass(self.context, body, claims).finalize()
            if waiting is None:
                self._locks.pop(key, None)
                uid = str((body or {}).get("metadata", {}).get("uid") or "")
                self.context.last_waiting.pop(uid, None)
                if self.context.evidence is not None:
                    self.context.evidence.forget(uid)
                return None
            if time.monotonic() >= deadline:
                return waiting
            await asyncio.sleep(self.poll_s)
