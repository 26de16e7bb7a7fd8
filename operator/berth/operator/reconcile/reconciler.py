"""``FleetReconciler``: runs reconcile passes for fleets when something changed, one at a time per fleet, each from a
fresh read of the fleet.

A pass is asked for (:meth:`poke`) by whatever sees a change: Kopf's handlers (a fleet created, its spec changed,
every fleet when the operator starts), the watch cache (an object a fleet owns changed), the journal follower (its
group changed at the coordinator). Nothing polls: after a pass, the fleet is next due only when
``planners.pass_timing`` says (a slow resync, a wait's backstop, a retry's backoff). Rules:

- Passes go through a :class:`~berth.operator.reconcile.queue.PassQueue`: pokes coalesce (a burst is one pass, a
  poke during a pass one more pass after it) and at most ``workers`` passes run at once.
- One pass per fleet at a time (an asyncio lock per namespace/name, shared with the finalizer), and every pass
  starts by reading the fleet from the API server, so it sees every status write of the pass before it.
- A fleet that is gone is forgotten; one being deleted is left to :meth:`finalize` (Kopf's finalizer handler).
- Passes start once Kopf has handed over the claims index (:meth:`attach`, from its first handler call); pokes
  before then wait.
- Status follows the coordinator: a pass on a Berth coordinator records which group the fleet follows, and a
  :class:`~berth.operator.reconcile.journal_follower.JournalFollower` per coordinator URL pokes the fleets whose
  groups its journal mentions (:meth:`poke_groups`). What the journal says of a followed group's restarts is kept
  for its fleet's next pass (``context.activity``), which counts it into status (``reconcile.restarts``).
- A change of the session-timeout advice pokes the fleets it sizes (:meth:`poke_advised`, from the advice watch):
  each pass records which advice key sizes its fleet (``PassResult.advised_by``).
- A replica that is not the leader (``NotLeading`` from a gated port) stops the pass and asks for no other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from berth.operator.planners.pass_timing import Outcome, PassTiming, next_pass_in
from berth.operator.planners.restarts import GroupActivity
from berth.operator.ports import CoordinatorUnavailable, FleetReader, JournalSource, NotLeading
from berth.operator.reconcile.context import ClaimsLookup, PassContext, PassResult, RetryLater
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.journal_follower import JournalFollower
from berth.operator.reconcile.queue import PassQueue

logger = logging.getLogger("berth.operator.reconcile")

#: Passes at once, over all fleets.
WORKERS = 16


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
        timing: PassTiming,
        journal_source: Callable[[str], JournalSource] | None = None,
        workers: int = WORKERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.context = context
        self.fleets = fleets
        self.timing = timing
        self.clock = clock
        self._locks: dict[FleetKey, asyncio.Lock] = {}
        #: Where a coordinator's journal is read from; None: status follows at ``timing.interval_s``.
        self.journal_source = journal_source
        self._followers: dict[str, JournalFollower] = {}
        self._follows: dict[FleetKey, tuple[str, str]] = {}  # fleet -> (coordinator URL, group id)
        self._advised: dict[FleetKey, str] = {}  # fleet -> the key of the advice that sizes it
        self._claims: ClaimsLookup | None = None  # the claims index (Kopf's is live: any handler's lookup serves)
        self._failures: dict[FleetKey, int] = {}
        self._waiting_since: dict[FleetKey, float] = {}
        self.queue: PassQueue[FleetKey] = PassQueue(self._queued_pass, workers=workers, clock=clock)

    # ---------------------------------------------------------------------------------------------- asking

    def attach(self, claims: ClaimsLookup) -> None:
        """The claims index (from Kopf's handlers); passes start with the first."""
        if self._claims is None:
            self._claims = claims
            self.queue.start()

    def poke(self, key: FleetKey, delay_s: float = 0.0) -> None:
        """A pass for ``key`` within ``delay_s`` (sooner if one was due sooner)."""
        self.queue.due(key, delay_s)

    async def poke_groups(self, url: str, group_ids: Mapping[str, GroupActivity]) -> None:
        """A pass soon for every fleet following one of ``group_ids`` on ``url``; what the journal said of their
        restarts is kept for that pass (``context.activity``)."""
        followed = {group for followed_url, group in self._follows.values() if followed_url == url}
        self.context.activity.add(url, {group: group_ids[group] for group in followed if group in group_ids})
        for key, (followed_url, group) in list(self._follows.items()):
            if followed_url == url and group in group_ids:
                self.poke(key)

    def poke_url(self, url: str) -> None:
        """A pass soon for every fleet following a group on ``url`` (its journal's follower just found the end)."""
        for key, (followed_url, _) in list(self._follows.items()):
            if followed_url == url:
                self.poke(key)

    def poke_advised(self, keys: Collection[str]) -> None:
        """A pass soon for every fleet whose session-timeout advice is among ``keys`` (the advice changed)."""
        for key, advised_by in list(self._advised.items()):
            if advised_by in keys:
                self.poke(key)

    # -------------------------------------------------------------------------------------------- passing

    @asynccontextmanager
    async def _exclusive(self, key: FleetKey) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            yield

    async def reconcile(self, key: FleetKey, claims: ClaimsLookup) -> PassResult | None:
        """One pass now; None when the fleet is gone or being deleted (left alone)."""
        async with self._exclusive(key):
            return await self._pass(key, claims)

    async def _queued_pass(self, key: FleetKey) -> float | None:
        """A pass from the queue: its outcome decides when the fleet is next due (None: only when poked)."""
        claims = self._claims
        assert claims is not None  # the queue starts with attach()
        try:
            result = await self.reconcile(key, claims)
        except NotLeading as error:
            logger.warning("fleet %s: pass stopped: %s", key, error)
            return None
        except (CoordinatorUnavailable, RetryLater) as error:
            return self._failed(key, f"{error}")
        except Exception:
            logger.exception("fleet %s: a pass failed", key)
            return self._failed(key, "an unexpected error (logged above)")
        if result is None:
            self._forget(key)
            return None
        self._failures.pop(key, None)
        outcome = Outcome.REFUSED if result.refused else Outcome.WAITING if result.waiting else Outcome.CONVERGED
        now = self.clock()
        waiting_for = 0.0
        if outcome is Outcome.WAITING:
            waiting_for = now - self._waiting_since.setdefault(key, now)
        else:
            self._waiting_since.pop(key, None)
        followed = result.follows is not None and self.journal_source is not None
        delay = next_pass_in(
            self.timing, outcome, name=str(key), followed=followed, waiting_for_s=waiting_for, failures=0
        )
        if result.again_at is not None:
            delay = min(delay, max(0.0, (result.again_at - self.context.now()).total_seconds()))
        return delay

    def _failed(self, key: FleetKey, why: str) -> float:
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay = next_pass_in(
            self.timing, Outcome.FAILED, name=str(key), followed=False, waiting_for_s=0.0, failures=failures
        )
        logger.info("fleet %s: %s; next try in %g s", key, why, delay)
        return delay

    async def _pass(self, key: FleetKey, claims: ClaimsLookup) -> PassResult | None:
        body = await self.fleets.read(key.namespace, key.name)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            return None
        try:
            result = await FleetPass(self.context, body, claims).run()
        except NotLeading:
            raise
        except (CoordinatorUnavailable, RetryLater):
            self._count(key, "retry")
            raise
        except Exception:
            self._count(key, "error")
            raise
        self._count(key, "refused" if result.refused else "waiting" if result.waiting else "converged")
        self._follow(key, result.follows)
        if result.advised_by is None:
            self._advised.pop(key, None)
        else:
            self._advised[key] = result.advised_by
        return result

    def _count(self, key: FleetKey, outcome: str) -> None:
        if self.context.metrics is not None:
            self.context.metrics.pass_done(key.namespace, key.name, outcome)

    def _forget(self, key: FleetKey) -> None:
        self.queue.forget(key)
        self._follows.pop(key, None)
        self._advised.pop(key, None)
        self._failures.pop(key, None)
        self._waiting_since.pop(key, None)

    # ---------------------------------------------------------------------------------------- following

    def _follow(self, key: FleetKey, follows: tuple[str, str] | None) -> None:
        if follows is None:
            self._follows.pop(key, None)
            return
        self._follows[key] = follows
        url = follows[0]
        if self.journal_source is not None and url not in self._followers:
            follower = JournalFollower(url, self.journal_source(url), self.poke_groups, on_following=self.poke_url)
            self._followers[url] = follower
            follower.start()

    async def close(self) -> None:
        await self.queue.close()
        for follower in self._followers.values():
            await follower.stop()
        self._followers.clear()

    # ------------------------------------------------------------------------------------------ deletion

    async def finalize(self, key: FleetKey, claims: ClaimsLookup, *, budget_s: float) -> str | None:
        """Deletion passes until the fleet may be released (None) or ``budget_s`` is spent (what it waits for)."""
        self.attach(claims)
        deadline = time.monotonic() + budget_s
        while True:
            async with self._exclusive(key):
                body = await self.fleets.read(key.namespace, key.name)
                waiting = None if body is None else await FleetPass(self.context, body, claims).finalize()
            if waiting is None:
                self._locks.pop(key, None)
                self._forget(key)
                if self.context.metrics is not None:
                    self.context.metrics.forget(key.namespace, key.name)
                uid = str((body or {}).get("metadata", {}).get("uid") or "")
                self.context.last_waiting.pop(uid, None)
                if self.context.evidence is not None:
                    self.context.evidence.forget(uid)
                self.context.instances.forget(uid)
                return None
            if time.monotonic() >= deadline:
                return waiting
            await asyncio.sleep(self.timing.poll_s)
