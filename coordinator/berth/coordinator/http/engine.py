"""The bridge between the pure core and the asyncio world: tickets, durable replies, timers, shutdown.

Rules it keeps:
- Every request that waits for an answer holds a ticket; the core answers tickets through ``Effects``.
- A reply is released only once every write that touched its group and was handed to the writer before the
  reply is durable (docs/api.md §10: "a response is sent only after what it reveals is durable"). Groups are
  independent, so a group's replies never wait on another group's writes: a flood of writes in one group
  does not slow the heartbeats of the others, and a group with nothing in flight is answered at once. A reply the
  core made in a write's continuation and marked ``own_write`` (it reveals nothing the group's later writes
  change: a static member's replacement answered to a follower) goes out as that write is durable: in a busy
  group the next transaction is always in flight, and waiting for it too would double every answer's wait.
- Writes complete in submission order; each completion runs the core's continuation for that write.
- With the system clock, one asyncio timer is armed at the core's next deadline. With the manual clock,
  time moves only in ``advance``, which fires due timers one by one and lets each one's work (writes,
  continuations, replies) finish before the next.
- After every batch of completed writes, ``on_durable`` hears that the journal grew (long-polls wake on it);
  ``on_write`` sees each write as it is submitted (per-group metrics count its events).
- ``shutdown`` answers what is parked and lets in-flight writes land (idempotent); ``close`` stops the writer.
- With ``acting`` (a replicated store's lease), the engine is ``ready`` only while ``acting()`` holds, and a timer
  that comes due while it does not is put off: a replica that may have been replaced answers nothing from memory
  and changes nothing (its writes would be refused by the store anyway).
- Reads (``read``: describe, offsets, expected members, the owner checks) are held like replies: what they show of
  a group is released only once that group's writes handed over before them are durable.
- A write that failed makes every answer gated on it unsafe: memory holds what the store does not, and with several
  writes of a group in flight no revert can know which of them will land. So the write's groups are *unloaded*
  (``Coordinator.unload_group``): every request of theirs still open is answered COORDINATOR_NOT_AVAILABLE (a
  retriable error, so the client asks again), as is every new one, until each group is loaded again from the store
  (``load_group``, the same replay as a restart) once every write handed over before the failure is done. The
  store, not memory, says what became durable; other groups carry on. (The core's own reverts are not used here.)
  A group the store could not read back is tried again every ``RELOAD_RETRY_S``; meanwhile ``unreadable`` says why,
  and readiness counts it as a failing store (a replica that takes writes but cannot serve a group is not ready).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from berth.coordinator.core import Coordinator, Effects, Record, Response, Write
from berth.coordinator.daemon import failpoints
from berth.coordinator.http.clock import Clock, ManualClock
from berth.coordinator.protocol import GroupId
from berth.coordinator.store import TransactionStats

log = logging.getLogger("berth.coordinator")

WritesDone = Callable[[list[tuple[int, bool]]], None]
#: One group's records from the store (blocking: run in an executor).
LoadGroup = Callable[[GroupId], list[Record]]

#: How soon a timer put off while the term does not hold is looked at again.
_NOT_ACTING_RECHECK_S = 0.1
#: How soon a group's reload is tried again when the store could not be read.
RELOAD_RETRY_S = 0.5


class FaultInjector(Protocol):
    """Store fault injection for tests (``/v1/debug/store``, docs/api.md §9)."""

    @property
    def injected(self) -> int: ...

    def fail_next(self, n: int = 1) -> None: ...

    def set_failing(self, failing: bool) -> None: ...

    def set_stalled(self, stalled: bool) -> None: ...

    def set_reads_failing(self, failing: bool) -> None: ...

    def raise_if_reads_failing(self) -> None: ...


class WriterPort(Protocol):
    def submit(self, write: Write) -> None: ...

    @property
    def healthy(self) -> bool:
        """Whether the last transaction committed."""
        ...

    @property
    def failure(self) -> str:
        """Why it did not (one line; empty while healthy)."""
        ...

    def probe(self) -> None:
        """Queue a small transaction that updates ``healthy`` when no other write comes."""
        ...

    def flush(self, timeout: float | None = None) -> object: ...

    def close(self) -> None: ...

    @property
    def faults(self) -> FaultInjector | None: ...

    @property
    def stats(self) -> TransactionStats:
        """What the committed transactions took (the metrics of docs/api.md §10)."""
        ...


class Engine:
    def __init__(
        self,
        core: Coordinator,
        clock: Clock,
        make_writer: Callable[[WritesDone], WriterPort],
        load_group: LoadGroup,
        on_write_failure: Callable[[], None] = lambda: None,
        on_durable: Callable[[], None] = lambda: None,
        on_write: Callable[[Write], None] = lambda _write: None,
        acting: Callable[[], bool] | None = None,
    ) -> None:
        self.core = core
        self._acting = acting
        self.clock = clock
        self._loop = asyncio.get_running_loop()
        self.writer = make_writer(self._writes_done_threadsafe)
        self._on_write_failure = on_write_failure
        self._on_durable = on_durable
        self._on_write = on_write
        self._futures: dict[int, asyncio.Future[Response]] = {}
        self._answered: dict[int, Response] = {}
        self._unavailable: dict[int, Callable[[], Response]] = {}  # every live ticket, with its shutdown answer
        self._next_ticket = 1
        self._submitted = 0
        self._completed = 0
        self._write_offsets: dict[int, int] = {}
        self._gated: dict[int, list[tuple[int, Response]]] = {}  # write offset -> replies waiting for it
        self._group_last_write: dict[GroupId, int] = {}  # group id -> offset of its latest write
        self._ticket_group: dict[int, GroupId | None] = {}
        self._write_groups: dict[int, frozenset[GroupId]] = {}  # write token -> the groups it touches
        # Groups unloaded after a failed write -> the writes handed over by then (reloaded once they are done).
        self._unloaded: dict[GroupId, int] = {}
        self._reloads: dict[GroupId, asyncio.Task[None]] = {}
        self._unreadable: dict[GroupId, str] = {}  # unloaded groups whose last reload failed -> why
        self._load_group = load_group
        self._settled = asyncio.Event()
        self._settled.set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._timers = core.timers
        self._timer_pushes_seen = -1  # the timer queue's push count when the asyncio timer was last armed
        self._advance_lock = asyncio.Lock()
        self._ready = False
        self.closing = False

    @property
    def ready(self) -> bool:
        """Loaded, and (on a replicated store) still sure to lead."""
        return self._ready and (self._acting is None or self._acting())

    @ready.setter
    def ready(self, ready: bool) -> None:
        self._ready = ready

    # ---------------------------------------------------------------------------------------- tickets

    async def call(
        self,
        invoke: Callable[[int, int], Effects],
        unavailable: Callable[[], Response],
        group_id: GroupId | None = None,
    ) -> Response:
        """Run one core call under a fresh ticket and wait for the ticket's (durable) answer.

        ``unavailable()`` answers the ticket if the coordinator shuts down first. A request answered within
        its own call, with nothing in flight (every heartbeat), never allocates a future.
        """
        if self.closing or (group_id is not None and group_id in self._unloaded):
            return unavailable()  # the term ended while the caller waited; or the group is being loaded again
        ticket = self._next_ticket
        self._next_ticket += 1
        fx = invoke(ticket, self.clock.now_ms())
        if not fx.writes and len(fx.replies) == 1:
            # The common case (every heartbeat): answered at once, nothing written. Its answer may go out now
            # unless a write of its group is still in flight.
            answered_ticket, response = fx.replies[0]
            needed = self._submitted if group_id is None else self._group_last_write.get(group_id, 0)
            if answered_ticket == ticket and needed <= self._completed:
                if self._timers.pushes != self._timer_pushes_seen and not self.clock.manual:
                    self._arm_timer()  # a member back from a parked request has a new, maybe earlier, deadline
                return response
        self._unavailable[ticket] = unavailable
        self._ticket_group[ticket] = group_id
        try:
            self.apply(fx)
        except BaseException:
            self._unavailable.pop(ticket, None)
            self._ticket_group.pop(ticket, None)
            raise
        answered = self._answered.pop(ticket, None)
        if answered is not None:
            return answered
        future: asyncio.Future[Response] = self._loop.create_future()
        self._futures[ticket] = future
        failpoints.hit("engine.parked")
        return await future

    async def read(
        self, group_id: GroupId | None, answer: Callable[[], Response], unavailable: Callable[[], Response]
    ) -> Response:
        """Answer a read of ``group_id`` (every group's when None) once what it shows is durable."""
        return await self.call(lambda ticket, _now: Effects([(ticket, answer())]), unavailable, group_id)

    async def settled(self, group_id: GroupId) -> bool:
        """Wait until no write of the group is in flight (for checks made before a call, such as the owner's);
        False when the group is unloaded (its write failed): the caller answers COORDINATOR_NOT_AVAILABLE."""
        while (last := self._group_last_write.get(group_id, 0)) > self._completed and group_id not in self._unloaded:
            await self._written(last)
        return group_id not in self._unloaded

    async def _written(self, offset: int) -> None:
        while self._completed < offset:
            self._settled.clear()
            await self._settled.wait()

    @property
    def parked(self) -> int:
        return len(self._futures)

    @property
    def writes_in_flight(self) -> int:
        return self._submitted - self._completed

    def _resolve(self, ticket: int, response: Response) -> None:
        if self._unavailable.pop(ticket, None) is None:
            return  # already answered (a core reply is final) or never issued
        self._ticket_group.pop(ticket, None)
        future = self._futures.pop(ticket, None)
        if future is None:
            self._answered[ticket] = response  # answered before its caller started waiting
        elif not future.done():
            future.set_result(response)

    # ---------------------------------------------------------------------------------------- effects

    def apply(self, fx: Effects, continued: int | None = None) -> None:
        """Hand ``fx``'s writes to the writer and release or hold its replies; ``continued``: the offset of the write
        whose continuation made ``fx`` (its ``own_write`` replies need no later write)."""
        own_write = fx.own_write if continued is not None else None
        durable_with = continued or 0
        for write in fx.writes:
            self._submitted += 1
            offset = self._submitted
            self._write_offsets[write.token] = offset
            groups = {record.group_id for record in write.records}
            groups.update(GroupId(event["group_id"]) for event in write.events)
            for touched in groups:
                self._group_last_write[touched] = offset
            self._write_groups[write.token] = frozenset(groups)
            self._on_write(write)
            self.writer.submit(write)
        if self._completed < self._submitted:
            self._settled.clear()
        for ticket, response in fx.replies:
            group = self._ticket_group.get(ticket)
            # A reply of unknown group (an admin call without one) waits for everything, to be safe.
            needed = self._submitted if group is None else self._group_last_write.get(group, 0)
            if own_write is not None and ticket in own_write:
                needed = min(needed, durable_with)
            if needed <= self._completed:
                self._resolve(ticket, response)
            else:
                self._gated.setdefault(needed, []).append((ticket, response))
        if not self.clock.manual:
            self._arm_timer()

    def _writes_done_threadsafe(self, results: list[tuple[int, bool]]) -> None:
        with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is gone, we are exiting
            self._loop.call_soon_threadsafe(self._writes_done, results)

    def _writes_done(self, results: list[tuple[int, bool]]) -> None:
        now = self.clock.now_ms()
        for token, ok in results:
            before = self._completed
            self._completed = self._write_offsets.pop(token)
            groups = self._write_groups.pop(token, frozenset())
            if not ok:
                self._on_write_failure()
                log.error("store write %d failed; its groups are loaded again from the store", token)
            if not groups.isdisjoint(self._unloaded):
                self.core.discard_write(token)  # its group is being reloaded: the store says what landed
            elif ok or failpoints.enabled("bug.ack_failed_writes"):
                self.apply(self.core.on_write_done(token, ok, now), self._completed)
            else:
                self.core.discard_write(token)
                self._unload(groups, self._completed, now)
            for offset in range(before + 1, self._completed + 1):
                for ticket, response in self._gated.pop(offset, ()):
                    self._resolve(ticket, response)
        if self._completed == self._submitted:
            self._settled.set()
            if len(self._group_last_write) > 10_000:  # forget groups whose writes are all durable
                self._group_last_write = {g: o for g, o in self._group_last_write.items() if o > self._completed}
        self._reload_when_written()
        self._on_durable()

    # ---------------------------------------------------------------------------------- failed writes

    def _unload(self, groups: frozenset[GroupId], failed_offset: int, now_ms: int) -> None:
        """A write at ``failed_offset`` failed: drop its groups from memory and answer everything of theirs (and
        every read of all groups held behind it) COORDINATOR_NOT_AVAILABLE; they are reloaded once the writes
        handed over until now are done."""
        fx = Effects()
        for unloaded in groups:
            self._unloaded[unloaded] = self._submitted
            fx.extend(self.core.unload_group(unloaded, now_ms))
        self.apply(fx)
        doomed = [t for t, g in self._ticket_group.items() if g in groups]
        doomed += [t for offset, held in self._gated.items() if offset >= failed_offset for t, _ in held]
        for ticket in doomed:
            group = self._ticket_group.get(ticket)
            unavailable = self._unavailable.get(ticket)
            if unavailable is not None and (group is None or group in groups):
                self._resolve(ticket, unavailable())
        log.warning("unloaded %d group(s) after a failed write: %s", len(groups), ", ".join(sorted(groups)[:5]))

    def _reload_when_written(self) -> None:
        for group, handed_over in self._unloaded.items():
            if handed_over <= self._completed and group not in self._reloads and not self.closing:
                self._reloads[group] = self._loop.create_task(self._reload(group), name=f"berth-reload-{group}")

    async def _reload(self, group: GroupId) -> None:
        try:
            while not self.closing:
                try:
                    records = await self._loop.run_in_executor(None, self._read_group, group)
                    for _ in records:
                        failpoints.hit("load.record")
                    fx = self.core.load_group(group, records, self.clock.now_ms())
                except Exception as exc:  # the store unreachable for now: the group stays unloaded, clients retry
                    log.warning("reloading group %r failed, retrying: %s", group, exc)
                    self._unreadable[group] = str(exc)
                    self.core.unload_group(group, self.clock.now_ms())  # nothing half-loaded stays
                    await asyncio.sleep(RELOAD_RETRY_S)
                    continue
                del self._unloaded[group]
                self._unreadable.pop(group, None)
                self.apply(fx)
                log.info("group %r loaded again from the store (%d records)", group, len(records))
                return
        finally:
            self._reloads.pop(group, None)

    def _read_group(self, group: GroupId) -> list[Record]:
        faults = self.writer.faults
        if faults is not None:
            faults.raise_if_reads_failing()
        return self._load_group(group)

    @property
    def unreadable(self) -> str:
        """Why groups unloaded after a failed write could not be read back yet (one line; empty when none)."""
        if not self._unreadable:
            return ""
        why = next(iter(self._unreadable.values()))  # no group id: /readyz is open to anyone who reaches it
        return f"{len(self._unreadable)} group(s) could not be read back after a failed write: {why}"

    async def settle(self) -> None:
        """Wait until every write submitted so far (and every write their continuations made) is done."""
        while self._completed < self._submitted:
            self._settled.clear()
            await self._settled.wait()

    # ----------------------------------------------------------------------------------------- timers

    def _arm_timer(self) -> None:
        self._timer_pushes_seen = self._timers.pushes
        deadline = self.core.next_deadline()
        if deadline is None:
            return
        if self._timer is not None:
            if self._timer_deadline is not None and self._timer_deadline <= deadline:
                return
            self._timer.cancel()
        delay_s = max(0, deadline - self.clock.now_ms()) / 1000
        self._timer_deadline = deadline
        self._timer = self._loop.call_later(delay_s, self._fire_timers)

    def _fire_timers(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if self.ready and not self.closing:
            self.apply(self.core.fire_due_timers(self.clock.now_ms()))
        elif self._ready and not self.closing:  # not acting: put off until the term holds again, or ends
            self._timer = self._loop.call_later(_NOT_ACTING_RECHECK_S, self._fire_timers)
        else:
            self._arm_timer()

    async def advance(self, ms: int) -> int:
        """Move the manual clock (docs/api.md §9): fire due timers in order, each at its own deadline."""
        clock = self.clock
        assert isinstance(clock, ManualClock)
        async with self._advance_lock:
            target = clock.now_ms() + ms
            while (due := self.core.pop_due_timer(target)) is not None:
                clock.set(max(clock.now_ms(), due.deadline_ms))
                self.apply(self.core.run_timer(due, clock.now_ms()))
                await self.settle()
            clock.set(target)
            await self.settle()
            return target

    # --------------------------------------------------------------------------------------- lifecycle

    async def shutdown(self) -> None:
        """Answer parked requests COORDINATOR_NOT_AVAILABLE and let in-flight writes land (once)."""
        if self.closing:
            return
        self.closing = True
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._reloads.values()):
            task.cancel()
        self.apply(self.core.shutdown(self.clock.now_ms()))
        await self.settle()
        for ticket, unavailable in list(self._unavailable.items()):
            self._resolve(ticket, unavailable())

    async def close(self) -> None:
        """Stop the writer once everything submitted is on disk (after ``shutdown``)."""
        await asyncio.get_running_loop().run_in_executor(None, self.writer.close)
