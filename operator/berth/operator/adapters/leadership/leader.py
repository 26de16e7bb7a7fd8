"""Leader election: replicas wait on a Lease, only its holder acts, and a holder that cannot renew stops acting
before another may take over (``planners.lease`` decides; this module keeps time and talks to the Lease).

- :class:`LeaderGate` is the :class:`~berth.operator.ports.WriteGate` every write passes (the official client's,
  Kopf's session's, the coordinators'): open only until the renew deadline after the last renewal that succeeded
  (counted from when it was sent). A frozen or partitioned leader finds it closed the moment it runs again, before
  any write it had under way goes out.
- :class:`LeaderElector` acquires the Lease (:meth:`~LeaderElector.acquire`), renews it (:meth:`~LeaderElector.keep`:
  returns once leadership is lost: the Lease taken by another, deleted, no longer writable by this replica, or no
  renewal for the renew deadline), and releases it on a graceful stop. It announces a new leader with an Event on
  the Lease and logs who leads whenever that changes.
- A standby watches the Lease (``LeaseStore.watching``) and reads it and decides again whenever it changes, and at
  the moment the decision says it would change if nothing changes (``Wait.until``: a holder's lease duration run
  out on the standby's clock), and at the latest every retry period (the watch may be down): it sees a release or
  a renewal as it happens and takes an expired Lease when it expires, instead of up to a retry period later. The
  wait for "unchanged for a lease duration" still runs from when the standby saw the change (``planners.lease``):
  seeing sooner never makes it take over sooner than the rules allow.
- What losing leadership does is the caller's (``berth-operator`` exits, as controller-runtime's managers do, and
  starts again as a standby): the gate is closed first, whatever the caller does next.
- :func:`holding_the_lease` is how ``app`` runs the operator's work under the Lease: wait as a standby, keep it
  while the work runs, release it after, or as soon as the stop is asked for (``stopping``): the gate is closed
  first, so whatever the work still does while it winds down writes nothing, and the standby need not wait for the
  wind-down. The Lease's calls get an API client of their own (not gated: a candidate must write the Lease to become
  the leader) on a thread of their own, and its watch an aiohttp session of its own (``kube.lease``).
- The failpoint switch ``bug.operator_no_release`` (``berth.coordinator.daemon.failpoints``; tests only) brings
  back what issue 28 found, so that the robustness checker can be shown to report it: the gate stays open until the
  elector learns that it lost (no deadline), and a graceful stop leaves the Lease held.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Protocol

import kubernetes

from berth.coordinator.daemon import failpoints
from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.identity import KubeIdentity
from berth.operator.adapters.kube.lease import LeaseApi
from berth.operator.adapters.leadership.leader_options import LeaderElection
from berth.operator.planners.lease import (
    LeaseConflict,
    LeaseLost,
    LeaseRecord,
    LeaseTiming,
    Observed,
    Wait,
    decide,
    observe,
    released,
    renewal,
    write_bound_s,
)
from berth.operator.ports import NotLeading

logger = logging.getLogger("berth.operator.leader")

#: The failpoint switch that brings back issue 28's leader (no deadline on the gate, no release on a stop).
NO_RELEASE_BUG = "bug.operator_no_release"


class LeaseStore(Protocol):
    async def read(self) -> LeaseRecord | None: ...

    async def write(self, record: LeaseRecord, *, create: bool) -> LeaseRecord:
        """Raises :class:`LeaseConflict` when the Lease changed meanwhile."""
        ...

    async def announce(self, message: str, *, now: datetime) -> None: ...

    def watching(self) -> AbstractAsyncContextManager[asyncio.Event]:
        """While the block runs, an event set whenever the Lease changes (never set by a store that cannot watch:
        the elector then looks every retry period)."""
        ...


class LeaderGate:
    """Open until ``valid_until`` (monotonic seconds); closed before the first acquisition and after a loss."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.valid_until = -math.inf

    @property
    def leading(self) -> bool:
        if failpoints.enabled(NO_RELEASE_BUG):
            return self.valid_until > -math.inf  # issue 28's gate: open until the elector noticed the loss
        return self.clock() < self.valid_until

    def check(self) -> None:
        if not self.leading:
            raise NotLeading("this replica does not hold the leader's Lease: nothing is written")

    def renewed(self, sent_at: float, renew_deadline_s: float) -> None:
        self.valid_until = sent_at + renew_deadline_s

    def close(self) -> None:
        self.valid_until = -math.inf


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        *,
        identity: str,
        timing: LeaseTiming,
        gate: LeaderGate,
        on_leading: Callable[[bool], None] = lambda leading: None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.identity = identity
        self.timing = timing
        self.gate = gate
        self.on_leading = on_leading
        self.clock = clock
        self.wall = wall
        self.sleep = sleep
        self.record: LeaseRecord | None = None  # ours, as last written, while we hold it
        self._observed: Observed | None = None
        self._leader_seen: str | None = None
        #: When the last decision to wait changes if the Lease does not (monotonic); None: look after a retry period.
        self._until: float | None = None

    async def acquire(self) -> None:
        """Return once this replica holds the Lease (the gate open): read and decide, then wait for a change of the
        Lease, for the moment the decision would change, or for a retry period, whichever comes first."""
        failing = False
        async with self.store.watching() as changed:
            while True:
                changed.clear()  # a change from here on wakes the wait below, even one this read already sees
                try:
                    if await self._try_acquire():
                        return
                    failing = False
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    self._until = None
                    if not failing:
                        logger.warning("cannot read or take the leader's Lease (%s); trying again", error)
                    failing = True
                await self._wait(changed, self._next_look_s())

    def _next_look_s(self) -> float:
        """How long to wait before the next read if the Lease does not change meanwhile."""
        retry = self.timing.retry_period_s
        return retry if self._until is None else max(0.0, min(retry, self._until - self.clock()))

    async def _wait(self, changed: asyncio.Event, seconds: float) -> None:
        """``sleep(seconds)`` or until ``changed`` is set, whichever comes first."""
        if changed.is_set():
            return
        waits = {asyncio.ensure_future(self.sleep(seconds)), asyncio.ensure_future(changed.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _try_acquire(self) -> bool:
        self._until = None
        record = await self.store.read()
        self._observed = observe(self._observed, record, self.clock())
        decision = decide(self.identity, self._observed, self.timing, now=self.clock(), wall=self.wall())
        if isinstance(decision, Wait):
            self._until = decision.until
            if decision.holder != self._leader_seen:
                self._leader_seen = decision.holder
                if decision.holder:
                    logger.info("%s leads; this replica (%s) waits as a standby", decision.holder, self.identity)
                else:
                    logger.info(
                        "there is no leader's Lease: this replica (%s) creates it once it has seen none for %g s (a"
                        " leader whose Lease was deleted has stopped acting by then)",
                        self.identity,
                        self.timing.lease_duration_s,
                    )
            return False
        sent_at = self.clock()
        try:
            self.record = await self.store.write(decision.record, create=decision.create)
        except LeaseConflict:
            return False  # someone else wrote it first: look again
        self.gate.renewed(sent_at, self.timing.renew_deadline_s)
        self._leader_seen = self.identity
        before = f" (taking over from {decision.taking_from})" if decision.taking_from else ""
        logger.info("this replica (%s) is the leader now%s", self.identity, before)
        self.on_leading(True)
        await self.store.announce(f"{self.identity} became leader{before}", now=self.wall())
        return True

    async def keep(self) -> None:
        """Renew every retry period; return once leadership is lost (the gate closed first)."""
        while True:
            await self.sleep(self.timing.retry_period_s)
            if not self.gate.leading:  # no renewal within the deadline (or the process stood still past it)
                self._lost("no renewal succeeded within the renew deadline")
                return
            record = self.record
            assert record is not None
            sent_at = self.clock()
            try:
                self.record = await self.store.write(renewal(record, self.timing, self.wall()), create=False)
            except asyncio.CancelledError:
                raise
            except LeaseConflict:
                current = await self._read_quietly()
                if current is not None and current.holder == self.identity:
                    self.record = current  # changed by someone else (an annotation?), still ours: renew that
                    continue
                self._lost("another replica holds the Lease now")
                return
            except LeaseLost as error:
                self._lost(f"the Lease cannot be renewed any more ({error})")
                return
            except Exception as error:
                logger.warning("renewing the leader's Lease failed (%s); trying again", error)
                continue
            if self.clock() - sent_at >= self.timing.renew_deadline_s:
                continue  # too late to count: the gate stays as it was, and closes on its own
            self.gate.renewed(sent_at, self.timing.renew_deadline_s)

    async def _read_quietly(self) -> LeaseRecord | None:
        try:
            return await self.store.read()
        except Exception:
            return None

    def _lost(self, why: str) -> None:
        self.gate.close()
        self.record = None
        self.on_leading(False)
        logger.error("this replica (%s) is no longer the leader: %s", self.identity, why)

    async def release(self) -> None:
        """Let go of the Lease (best effort), so a standby takes over as soon as it sees the release (it watches)."""
        record = self.record
        if record is None:
            return
        self.gate.close()
        self.record = None
        self.on_leading(False)
        if failpoints.enabled(NO_RELEASE_BUG):
            logger.warning("failpoint %s: the leader's Lease is left held", NO_RELEASE_BUG)
            return
        for _ in range(3):
            try:
                await self.store.write(released(record, self.wall()), create=False)
                logger.info("released the leader's Lease")
                return
            except LeaseConflict:
                # A renewal still on its way when the keeper was cancelled changed it: still ours, release that.
                current = await self._read_quietly()
                if current is None or current.holder != self.identity:
                    return
                record = current
            except Exception as error:
                logger.warning("could not release the leader's Lease (%s): a standby takes over when it expires", error)
                return
        logger.warning("could not release the leader's Lease (it kept changing): a standby takes over when it expires")


@contextlib.asynccontextmanager
async def holding_the_lease(
    identity: KubeIdentity,
    election: LeaderElection,
    gate: LeaderGate,
    *,
    user_agent: str,
    on_leading: Callable[[bool], None],
    on_lost: Callable[[], None],
    stopping: asyncio.Event | None = None,
) -> AsyncIterator[bool]:
    """Wait until this replica holds the Lease (True), or ``stopping`` is set first (False); keep renewing it while
    the block runs (``on_lost`` when it is lost); release it as soon as ``stopping`` is set (the gate closed first:
    the block's wind-down writes nothing), or when the block ends."""
    client = kubernetes.client.ApiClient(identity.configuration)
    client.user_agent = user_agent
    watch_session = ApiSession(identity, user_agent=user_agent)  # reads only: the Lease's watch
    lease = LeaseApi(
        client,
        namespace=election.namespace,
        name=election.lease,
        timeout_s=election.timing.renew_deadline_s / 2,
        write_bound_s=write_bound_s(election.timing),
        api=watch_session,
    )
    elector = LeaderElector(lease, identity=election.identity, timing=election.timing, gate=gate, on_leading=on_leading)
    on_leading(False)
    holding = _Holding(elector, on_lost)
    try:
        if not await _until_stopped(elector.acquire(), stopping):
            yield False
            return
        holding.start(stopping)
        yield True
    finally:
        await holding.let_go()
        lease.close()
        await watch_session.close()
        client.close()  # type: ignore[no-untyped-call]


class _Holding:
    """The Lease while it is held: kept, and let go once (when the stop is asked for, or when the holder ends)."""

    def __init__(self, elector: LeaderElector, on_lost: Callable[[], None]) -> None:
        self.elector = elector
        self.on_lost = on_lost
        self._keeping: asyncio.Task[None] | None = None
        self._letting_go: asyncio.Task[None] | None = None
        self._stop_watch: asyncio.Task[None] | None = None

    def start(self, stopping: asyncio.Event | None) -> None:
        self._keeping = asyncio.create_task(self._keep(), name="leader's Lease")
        if stopping is not None:
            self._stop_watch = asyncio.create_task(self._let_go_on(stopping), name="leader's Lease: release on stop")

    async def _keep(self) -> None:
        await self.elector.keep()
        self.on_lost()

    async def _let_go_on(self, stopping: asyncio.Event) -> None:
        await stopping.wait()
        logger.info("stopping: releasing the leader's Lease before the operator's work winds down")
        await self.let_go()

    async def let_go(self) -> None:
        """Stop renewing and release the Lease (the gate closed first); once, whoever asks first, the others wait
        for it."""
        if self._letting_go is None:
            self._letting_go = asyncio.ensure_future(self._release())
        await asyncio.shield(self._letting_go)
        if self._stop_watch is not None and self._stop_watch is not asyncio.current_task():
            self._stop_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stop_watch

    async def _release(self) -> None:
        if self._keeping is not None:
            self._keeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeping
        await self.elector.release()


async def _until_stopped(waiting: Awaitable[None], stopping: asyncio.Event | None) -> bool:
    """Await ``waiting``; False (and it cancelled) when ``stopping`` is set first."""
    task = asyncio.ensure_future(waiting)
    if stopping is None:
        await task
        return True
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, stopped, return_exceptions=True)
    if task.cancelled():
        return False
    task.result()
    return True
