"""``FleetReconciler``: runs reconcile passes for fleets, one at a time per fleet, each from a fresh read.

Kopf runs a fleet's change handlers and its timer concurrently; two passes interleaving could send the same batch
leave twice. Rules:

- One pass per fleet at a time (an asyncio lock per namespace/name), and every pass starts by reading the fleet
  from the API server, so it sees every status write of the pass before it (a handler's body may be older).
- :meth:`converge` repeats passes while the plan waits on something quick (the StatefulSet acting on a new size,
  pods terminating), up to ``budget_s``; after that the timer's passes carry on. So the batch leave goes out
  within a poll interval of the last departing pod disappearing, not a timer interval later.
- A fleet being deleted is left to :meth:`finalize` (Kopf calls it through the finalizer).
- Status follows the coordinator: a pass on a Berth coordinator records which group the fleet follows, and a
  :class:`~berth.operator.reconcile.journal_follower.JournalFollower` per coordinator URL pokes the fleets whose
  groups its journal mentions (:meth:`poke`). Pokes are coalesced: at most one pass runs and one waits per fleet,
  however busy the journal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from berth.operator.ports import CoordinatorUnavailable, FleetReader, JournalSource
from berth.operator.reconcile.context import ClaimsLookup, PassContext, PassResult, RetryLater
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.journal_follower import JournalFollower

logger = logging.getLogger("berth.operator.reconcile")


@dataclass(frozen=True, slots=True)
class FleetKey:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class FleetReconciler:
    def __init__(
        self,
        context: PassContext,
        fleets: FleetReader,
        *,
        poll_s: float,
        journal_source: Callable[[str], JournalSource] | None = None,
    ) -> None:
        self.context = context
        self.fleets = fleets
        self.poll_s = poll_s
        self._locks: dict[FleetKey, asyncio.Lock] = {}
        #: Where a coordinator's journal is read from; None: status follows at the timer's pace only.
        self.journal_source = journal_source
        self._followers: dict[str, JournalFollower] = {}
        self._follows: dict[FleetKey, tuple[str, str]] = {}  # fleet -> (coordinator URL, group id)
        self._claims: ClaimsLookup | None = None  # the claims index (Kopf's is live: any handler's lookup serves)
        self._poked: set[FleetKey] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def _exclusive(self, key: FleetKey) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            yield

    async def reconcile(self, key: FleetKey, claims: ClaimsLookup) -> PassResult:
        """One pass; a fleet that is gone or being deleted is left alone."""
        self._claims = claims
        async with self._exclusive(key):
            return await self._pass(key, claims)

    async def _pass(self, key: FleetKey, claims: ClaimsLookup) -> PassResult:
        body = await self.fleets.read(key.namespace, key.name)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            return PassResult()
        try:
            result = await FleetPass(self.context, body, claims).run()
        except (CoordinatorUnavailable, RetryLater):
            self._count(key, "retry")
            raise
        except Exception:
            self._count(key, "error")
            raise
        self._count(key, "refused" if result.refused else "waiting" if result.waiting else "converged")
        self._follow(key, result.follows)
        return result

    def _count(self, key: FleetKey, outcome: str) -> None:
        if self.context.metrics is not None:
            self.context.metrics.pass_done(key.namespace, key.name, outcome)

    # ---------------------------------------------------------------------------------------- following

    def _follow(self, key: FleetKey, follows: tuple[str, str] | None) -> None:
        if follows is None:
            self._follows.pop(key, None)
            return
        self._follows[key] = follows
        url = follows[0]
        if self.journal_source is not None and url not in self._followers:
            follower = JournalFollower(url, self.journal_source(url), self.poke)
            self._followers[url] = follower
            follower.start()

    async def poke(self, url: str, group_ids: set[str]) -> None:
        """A pass soon for every fleet following one of ``group_ids`` on ``url``, unless one already waits."""
        claims = self._claims
        if claims is None:
            return
        for key, (followed_url, group) in list(self._follows.items()):
            if followed_url == url and group in group_ids and key not in self._poked:
                self._poked.add(key)
                task = asyncio.create_task(self._poked_pass(key, claims), name=f"poked pass {key}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _poked_pass(self, key: FleetKey, claims: ClaimsLookup) -> None:
        async with self._exclusive(key):
            # Taken off before the pass: a change during it pokes again, and that pass sees it.
            self._poked.discard(key)
            try:
                await self._pass(key, claims)
            except (CoordinatorUnavailable, RetryLater) as error:
                logger.info("fleet %s: %s; the timer retries", key, error)
            except Exception:
                logger.exception("fleet %s: a pass after a change at its coordinator failed; the timer retries", key)

    async def close(self) -> None:
        for follower in self._followers.values():
            await follower.stop()
        self._followers.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

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
                self._follows.pop(key, None)
                if self.context.metrics is not None:
                    self.context.metrics.forget(key.namespace, key.name)
                uid = str((body or {}).get("metadata", {}).get("uid") or "")
                self.context.last_waiting.pop(uid, None)
                if self.context.evidence is not None:
                    self.context.evidence.forget(uid)
                return None
            if time.monotonic() >= deadline:
                return waiting
            await asyncio.sleep(self.poll_s)
