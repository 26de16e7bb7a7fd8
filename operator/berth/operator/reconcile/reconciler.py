"""``FleetReconciler``: runs reconcile passes for fleets when something changed, one at a time per fleet, each from a
read of the fleet at least as new as the change that asked for it.

A pass is asked for (:meth:`poke`) by whatever sees a change: Kopf's watch of the fleets (:meth:`fleet_seen`: a
fleet created, its spec changed, every fleet when the operator starts, as ``planners.pokes`` filters them), the
watch cache (:meth:`owned_changed`: an object a fleet owns changed in what a pass reads; the StatefulSet
controller's progress only while the fleet's last pass used it, ``planners.pokes``, and when passed over during a
pass that ends using it, once that pass ends), the journal follower (its group changed at the
coordinator). Nothing polls: after a pass, the fleet is next due only when ``planners.pass_timing`` says (a slow
resync, a wait's backstop, a retry's backoff). Rules:

- Passes go through a :class:`~berth.operator.reconcile.queue.PassQueue`: pokes coalesce (a burst is one pass, a
  poke during a pass one more pass after it) and at most ``workers`` passes run at once.
- One pass per fleet at a time (an asyncio lock per namespace/name, shared with the finalizer), and every pass
  starts by reading the fleet at least as new as the last version Kopf's watch delivered (``FleetReader.read``'s
  ``seen``: from a cache that holds it, else from the API server), with every status write of the passes before
  it. A fleet Kopf's watch has not delivered yet, and one whose last pass failed (a write that timed out may have
  been applied), is read from the API server.
- A fleet that is gone is forgotten (its memory, ``reconcile.memory``, with it); one being deleted is left to
  :meth:`finalize` (Kopf's finalizer handler), which forgets it once released.
- Passes start once Kopf has handed over the claims index (:meth:`attach`, from its first handler call); pokes
  before then wait.
- Status follows the coordinator: a pass on a Berth coordinator records which group the fleet follows, and a
  :class:`~berth.operator.reconcile.journal_follower.JournalFollower` per coordinator URL pokes the fleets whose
  groups its journal mentions (:meth:`poke_groups`). What the journal says of a followed group's restarts is kept
  for its fleet's next pass (in its memory), which counts it into status (``contributors.restarts``).
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
from typing import Any

from berth.operator.planners.pass_timing import Outcome, PassTiming, next_pass_in
from berth.operator.planners.pokes import owned_change_wants_pass, wants_pass
from berth.operator.planners.restarts import GroupActivity
from berth.operator.ports import ClaimsIndex, CoordinatorUnavailable, FleetReader, JournalSource, NotLeading
from berth.operator.reconcile.context import PassContext, PassResult, RetryLater
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.journal_follower import JournalFollower
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.reconcile.queue import PassQueue

logger = logging.getLogger("berth.operator.reconcile")

#: Passes at once, over all fleets.
WORKERS = 16
#: The prefix of the reasons the queue's own timing gives a pass (``PassMetrics.triggered``).
TIMER = "timer/"


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
        #: What the operator remembers of each fleet (``reconcile.memory``), forgotten with it.
        self._memories: dict[FleetKey, FleetMemory] = {}
        self._claims: ClaimsIndex | None = None  # the claims index (Kopf's is live: any handler's index serves)
        #: Per fleet, the last resourceVersion Kopf's watch delivered (a pass reads the fleet at least that new).
        self._delivered: dict[FleetKey, str] = {}
        #: Fleets whose next read goes to the API server (their last pass failed).
        self._fresh: set[FleetKey] = set()
        #: Per fleet due for a pass, what asked for it (counted when the pass starts: ``PassMetrics.triggered``); a
        #: poke's reason replaces the queue's timing, which a poke brings forward.
        self._why: dict[FleetKey, str] = {}
        #: Fleets whose StatefulSet's progress moved, unpoked, since their last pass started (``owned_changed``).
        self._passed_over: set[FleetKey] = set()
        self.queue: PassQueue[FleetKey] = PassQueue(self._queued_pass, workers=workers, clock=clock)

    # ---------------------------------------------------------------------------------------------- asking

    def attach(self, claims: ClaimsIndex) -> None:
        """The claims index (from Kopf's handlers); passes start with the first."""
        if self._claims is None:
            self._claims = claims
            self.queue.start()

    def poke(self, key: FleetKey, delay_s: float = 0.0, why: str = "poke") -> None:
        """A pass for ``key`` within ``delay_s`` (sooner if one was due sooner), asked for by ``why``."""
        if self._why.get(key, TIMER).startswith(TIMER):
            self._why[key] = why
        self.queue.due(key, delay_s)

    def owned_changed(self, key: FleetKey, kind: str, moved: Collection[str], delay_s: float = 0.0) -> None:
        """An object of ``kind`` the fleet owns changed, moving ``moved`` of what a pass reads (the workload view's
        fields, as the watch cache names them): a pass when that asks for one (``planners.pokes``: the
        StatefulSet controller's progress only while the fleet's last pass watched it)."""
        memory = self._memories.get(key)
        if owned_change_wants_pass(moved, memory is None or memory.watches_progress):
            self.poke(key, delay_s, f"{kind}/{min(moved)}")
        else:
            # Passed over; but a pass running now may have read the workload before it and end watching progress.
            self._passed_over.add(key)

    def fleet_seen(self, key: FleetKey, body: Mapping[str, Any]) -> None:
        """A fleet as Kopf's watch delivered it: its version remembered, and a pass asked for when the change is one
        a pass reads (``planners.pokes``: never passed yet, its spec, its pause)."""
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self._delivered[key] = str(version)
        memory = self._memories.get(key)
        uid = _uid(body)
        passed = None if memory is None or (memory.uid and memory.uid != uid) else memory.generation
        if wants_pass(body, passed):
            self.poke(key, why="fleet")

    async def poke_groups(self, url: str, group_ids: Mapping[str, GroupActivity]) -> None:
        """A pass soon for every fleet following one of ``group_ids`` on ``url``; what the journal said of their
        restarts is kept in their memory for that pass (``FleetMemory.activity``)."""
        for key, memory in list(self._memories.items()):
            if memory.follows is not None and memory.follows[0] == url and memory.follows[1] in group_ids:
                memory.activity = memory.activity + group_ids[memory.follows[1]]
                self.poke(key, why="journal")

    def poke_url(self, url: str) -> None:
        """A pass soon for every fleet following a group on ``url`` (its journal's follower just found the end)."""
        for key, memory in list(self._memories.items()):
            if memory.follows is not None and memory.follows[0] == url:
                self.poke(key, why="journal")

    def poke_advised(self, keys: Collection[str]) -> None:
        """A pass soon for every fleet whose session-timeout advice is among ``keys`` (the advice changed)."""
        for key, memory in list(self._memories.items()):
            if memory.advised_by is not None and memory.advised_by in keys:
                self.poke(key, why="advice")

    def memory(self, key: FleetKey, uid: str | None = None) -> FleetMemory:
        """What is remembered of fleet ``key``: afresh for a fleet of another ``uid`` under the same name."""
        memory = self._memories.get(key)
        if memory is None or (uid is not None and memory.uid and memory.uid != uid):
            memory = self._memories[key] = FleetMemory(uid=uid or "")
        return memory

    # -------------------------------------------------------------------------------------------- passing

    @asynccontextmanager
    async def _exclusive(self, key: FleetKey) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            yield

    async def reconcile(self, key: FleetKey, claims: ClaimsIndex) -> PassResult | None:
        """One pass now; None when the fleet is gone or being deleted (left alone)."""
        async with self._exclusive(key):
            return await self._pass(key, claims)

    async def _queued_pass(self, key: FleetKey) -> float | None:
        """A pass from the queue: its outcome decides when the fleet is next due (None: only when poked)."""
        claims = self._claims
        assert claims is not None  # the queue starts with attach()
        self._triggered(key)
        self._passed_over.discard(key)
        try:
            result = await self.reconcile(key, claims)
        except NotLeading as error:
            logger.warning("fleet %s: pass stopped: %s", key, error)
            return None
        except (CoordinatorUnavailable, RetryLater) as error:
            self._fresh.add(key)
            return self._failed(key, f"{error}")
        except Exception:
            logger.exception("fleet %s: a pass failed", key)
            self._fresh.add(key)
            return self._failed(key, "an unexpected error (logged above)")
        if result is None:
            self._why.pop(key, None)
            return None
        memory = self.memory(key)
        memory.failures = 0
        memory.watches_progress = result.watches_progress
        if result.watches_progress and key in self._passed_over:
            self.poke(key, why="passed-over")
        outcome = Outcome.REFUSED if result.refused else Outcome.WAITING if result.waiting else Outcome.CONVERGED
        now = self.clock()
        waiting_for = 0.0
        if outcome is Outcome.WAITING:
            if memory.waiting_since is None:
                memory.waiting_since = now
            waiting_for = now - memory.waiting_since
        else:
            memory.waiting_since = None
        followed = result.follows is not None and self.journal_source is not None
        delay = next_pass_in(
            self.timing, outcome, name=str(key), followed=followed, waiting_for_s=waiting_for, failures=0
        )
        why = _timer_reason(outcome, followed)
        if result.again_at is not None:
            again = max(0.0, (result.again_at - self.context.ports.now()).total_seconds())
            why, delay = (f"{TIMER}again", again) if again < delay else (why, delay)
        self._why.setdefault(key, why)
        return delay

    def _failed(self, key: FleetKey, why: str) -> float:
        memory = self.memory(key)
        memory.failures += 1
        memory.watches_progress = True
        failures = memory.failures
        delay = next_pass_in(
            self.timing, Outcome.FAILED, name=str(key), followed=False, waiting_for_s=0.0, failures=failures
        )
        logger.info("fleet %s: %s; next try in %g s", key, why, delay)
        self._why.setdefault(key, f"{TIMER}retry")
        return delay

    async def _pass(self, key: FleetKey, claims: ClaimsIndex) -> PassResult | None:
        seen = None if key in self._fresh else self._delivered.get(key)
        body = await self.fleets.read(key.namespace, key.name, seen=seen)
        self._fresh.discard(key)
        if body is None:
            self._forget(key)
            return None
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            self._deleting(key)
            return None
        memory = self.memory(key, _uid(body))
        generation = (body.get("metadata") or {}).get("generation")
        memory.generation = generation if isinstance(generation, int) else None
        try:
            result = await FleetPass(self.context, body, claims, memory).run()
        except NotLeading:
            raise
        except (CoordinatorUnavailable, RetryLater):
            self._count(key, "retry")
            raise
        except Exception:
            self._count(key, "error")
            raise
        self._count(key, "refused" if result.refused else "waiting" if result.waiting else "converged")
        memory.advised_by = result.advised_by
        self._follow(memory, result.follows)
        return result

    def _triggered(self, key: FleetKey) -> None:
        why = self._why.pop(key, "poke")
        metrics = self.context.ports.metrics
        if metrics is not None:
            metrics.triggered(why)

    def _count(self, key: FleetKey, outcome: str) -> None:
        metrics = self.context.ports.metrics
        if metrics is not None:
            metrics.pass_done(key.namespace, key.name, outcome)

    def _deleting(self, key: FleetKey) -> None:
        """The fleet is being deleted: no pass for it but the finalizer's, which keeps what its passes remembered."""
        self.queue.forget(key)
        self._passed_over.discard(key)
        memory = self._memories.get(key)
        if memory is not None:
            memory.follows = memory.advised_by = memory.waiting_since = None
            memory.failures = 0

    def _forget(self, key: FleetKey) -> None:
        """The fleet is gone: no pass for it, and nothing remembered of it."""
        self.queue.forget(key)
        self._memories.pop(key, None)
        self._delivered.pop(key, None)
        self._why.pop(key, None)
        self._passed_over.discard(key)
        self._fresh.discard(key)
        metrics = self.context.ports.metrics
        if metrics is not None:
            metrics.forget(key.namespace, key.name)

    # ---------------------------------------------------------------------------------------- following

    def _follow(self, memory: FleetMemory, follows: tuple[str, str] | None) -> None:
        memory.follows = follows
        if follows is None:
            return
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

    async def finalize(self, key: FleetKey, claims: ClaimsIndex, *, budget_s: float) -> str | None:
        """Deletion passes until the fleet may be released (None) or ``budget_s`` is spent (what it waits for)."""
        self.attach(claims)
        deadline = time.monotonic() + budget_s
        while True:
            async with self._exclusive(key):
                body = await self.fleets.read(key.namespace, key.name)
                waiting = None
                if body is not None:
                    waiting = await FleetPass(self.context, body, claims, self.memory(key, _uid(body))).finalize()
            if waiting is None:
                self._locks.pop(key, None)
                self._forget(key)
                return None
            if time.monotonic() >= deadline:
                return waiting
            await asyncio.sleep(self.timing.poll_s)


def _timer_reason(outcome: Outcome, followed: bool) -> str:
    """What the queue's timing calls the pass it schedules after a pass that ended so (``planners.pass_timing``)."""
    if outcome is Outcome.CONVERGED:
        return f"{TIMER}resync" if followed else f"{TIMER}interval"
    return f"{TIMER}{outcome.value}"


def _uid(body: Mapping[str, object]) -> str:
    metadata = body.get("metadata")
    return str((metadata.get("uid") if isinstance(metadata, Mapping) else None) or "")
