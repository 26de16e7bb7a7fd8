"""``PassQueue``: which fleets need a pass, and when; a work queue in the manner of controller-runtime's.

Rules:

- A key is due at most once: asking again for a key already due keeps the earlier time (a burst of pokes is one
  pass), and asking while its pass runs makes exactly one more pass after it.
- At most one pass per key runs at a time, and at most ``workers`` in all (a thousand fleets created or resumed
  at once queue up instead of starting a thousand passes).
- ``run(key)`` returns when the key is next due on its own (seconds from the pass's end), or None for never; it
  must not raise (what fails is the run's to report and to time).
- Nothing runs before :meth:`start`; keys asked for before then are kept.
- Time is ``clock`` (monotonic seconds); the waiting is asyncio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

logger = logging.getLogger("berth.operator.reconcile")

K = TypeVar("K", bound=Hashable)


class PassQueue(Generic[K]):
    def __init__(
        self,
        run: Callable[[K], Awaitable[float | None]],
        *,
        workers: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._run = run
        self._clock = clock
        self._slots = asyncio.Semaphore(workers)
        self._due: dict[K, float] = {}  # key -> when (the heap may hold older entries: skipped)
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()
        self._running: set[K] = set()
        self._again: dict[K, float] = {}  # asked for while running: due again then, at the latest
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        """Keys due or running."""
        return len(self._due.keys() | self._running)

    def due(self, key: K, delay_s: float = 0.0) -> None:
        at = self._clock() + max(0.0, delay_s)
        if key in self._running:
            self._again[key] = min(at, self._again.get(key, at))
            return
        current = self._due.get(key)
        if current is not None and current <= at:
            return
        self._due[key] = at
        heapq.heappush(self._heap, (at, next(self._order), key))
        self._wake.set()

    def forget(self, key: K) -> None:
        """No pass for ``key`` until it is asked for again."""
        self._due.pop(key, None)
        self._again.pop(key, None)

    def start(self) -> None:
        if self._dispatcher is None:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="pass queue")

    async def close(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
            self._dispatcher = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _dispatch(self) -> None:
        while True:
            key = await self._next()
            await self._slots.acquire()
            self._running.add(key)
            task = asyncio.create_task(self._one(key), name=f"pass {key}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _next(self) -> K:
        """The earliest due key, once it is due."""
        while True:
            timeout: float | None = None
            while self._heap:
                at, _, key = self._heap[0]
                if self._due.get(key) != at:  # superseded, forgotten or taken
                    heapq.heappop(self._heap)
                    continue
                now = self._clock()
                if at <= now:
                    heapq.heappop(self._heap)
                    del self._due[key]
                    return key
                timeout = at - now
                break
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _one(self, key: K) -> None:
        later: float | None = None
        try:
            later = await self._run(key)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("a pass for %s failed unexpectedly", key)
        finally:
            self._running.discard(key)
            self._slots.release()
        again = self._again.pop(key, None)
        if again is not None:
            self.due(key, again - self._clock())
        if later is not None:
            self.due(key, later)
