"""Follow each Berth coordinator's journal, so a fleet's status follows its group within about a second.

The timer mirrors every fleet's group into status once per reconcile interval; between two ticks a rebalance would
go unseen for up to that long. Instead of describing every fleet more often, the operator keeps ONE long-poll per
coordinator that has fleets (``GET /v1/journal?after=SEQ&wait_ms=...``, docs/api.md §8) and hands the group ids of
each page to ``on_change``, which runs a pass for the fleets holding those groups. Rules:

- It starts at the journal's end: history is not replayed (the timer's passes cover what happened before).
- A failure (coordinator down, a 5xx) backs off 1, 2, 4 ... 30 s and is logged once per episode; the timer's passes
  go on meanwhile, so status still follows within the reconcile interval.
- An empty answer that came back sooner than ``MIN_EMPTY_POLL_S`` (the coordinator did not hold the poll: its places
  were taken, or it is an older one) is followed by a pause of that long, so nothing can make the follower spin.
- One follower per coordinator URL, started by the first fleet on it and stopped with the operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from berth.operator.ports import JournalSource

logger = logging.getLogger("berth.operator.journal")

#: How long one poll waits on the coordinator for something to happen (its maximum is 30 s).
WAIT_MS = 25_000
#: Events per page: a burst (a 1,000-member rebalance) is read in a few pages, not one event at a time.
PAGE = 1_000
BACKOFF_MAX_S = 30.0
#: An empty long-poll answered sooner than this was not held; the next one waits as long.
MIN_EMPTY_POLL_S = 1.0

OnChange = Callable[[str, set[str]], Awaitable[None]]


class JournalFollower:
    def __init__(
        self,
        url: str,
        source: JournalSource,
        on_change: OnChange,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.source = source
        self.on_change = on_change
        self.sleep = sleep
        self.clock = clock
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self.run(), name=f"journal follower {self.url}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def run(self) -> None:
        after: int | None = None
        failures = 0
        while True:
            try:
                if after is None:
                    after = await self._end()
                    logger.info("following the journal of %s from event %d", self.url, after)
                    failures = self._answered(failures)
                asked, started = after, self.clock()
                after, groups = await self.source.journal_page(after, PAGE, WAIT_MS)
                failures = self._answered(failures)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the timer's passes still mirror status; this only makes it prompt
                if failures == 0:
                    logger.warning("cannot follow the journal of %s (%s); retrying with backoff", self.url, error)
                failures += 1
                await self.sleep(min(BACKOFF_MAX_S, 2.0 ** min(failures - 1, 5)))
                continue
            if groups:
                await self.on_change(self.url, groups)
            elif after == asked and self.clock() - started < MIN_EMPTY_POLL_S:
                await self.sleep(MIN_EMPTY_POLL_S)

    def _answered(self, failures: int) -> int:
        if failures:
            logger.info("the journal of %s answers again", self.url)
        return 0

    async def _end(self) -> int:
        """The journal's last seq: paged to (retention keeps the journal small enough for that to be cheap)."""
        after = 0
        while True:
            cursor, _ = await self.source.journal_page(after, 10_000, 0)
            if cursor == after:
                return after
            after = cursor
