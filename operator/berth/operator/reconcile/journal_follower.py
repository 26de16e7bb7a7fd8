"""Follow each Berth coordinator's journal, so a fleet's status follows its group within about a second.

Nothing else tells the operator that a group changed at its coordinator, and describing every fleet's group over
and over is the polling a watching operator does not do. Instead the operator keeps ONE long-poll per coordinator
that has fleets (``GET /v1/journal?after=SEQ&wait_ms=...``, docs/api.md §8) and hands the groups of each page, with
their activity (restarts, rebalances: ``planners.restarts``), to ``on_change``, which counts the activity for the
fleets holding those groups and runs a pass for them. Rules:

- It starts at the journal's end: history is not replayed (the passes that started it saw what happened before).
  Once it found the end (at its start, and again after a rewind) it calls ``on_following``, which passes every
  fleet on that coordinator once more: what happened between those passes and the end it found is in no page it
  will read (issue 28's campaign: a new leader's batch leave, then the group's rebalance completing before the
  follower found the end, left the fleet's status rebalancing until the slow resync).
- A failure (coordinator down, a 5xx) backs off 1, 2, 4 ... 30 s and is logged once per episode, and the follower
  resumes from its cursor: what happened meanwhile is in the pages it reads next. (The passes of fleets on a
  coordinator that is down fail and retry with their own backoff meanwhile.)
- No answer can make it spin (issue 22: a ``journal:read`` token holding the coordinator's long-poll places got the
  operator's polls answered at once, empty, and the follower polled again at once): an answer that does not move the
  cursor forward and came back sooner than ``MIN_EMPTY_POLL_S`` is followed by a pause of that long (its groups, if
  any, still handed on); a cursor that moves backwards (a coordinator restarted without its journal) is a failure:
  backoff, then the journal's end found again; finding the end reads at most ``END_PAGES`` pages.
- One follower per coordinator URL, started by the first fleet on it and stopped with the operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from berth.operator.planners.restarts import GroupActivity
from berth.operator.ports import JournalSource

logger = logging.getLogger("berth.operator.journal")

#: How long one poll waits on the coordinator for something to happen (its maximum is 30 s).
WAIT_MS = 25_000
#: Events per page: a burst (a 1,000-member rebalance) is read in a few pages, not one event at a time.
PAGE = 1_000
BACKOFF_MAX_S = 30.0
#: An answer that did not move the cursor and came back sooner than this was not held; the next poll waits as long.
MIN_EMPTY_POLL_S = 1.0
#: Finding the journal's end reads at most this many pages of 10,000 (retention keeps it far shorter).
END_PAGES = 1_000


class JournalRewound(Exception):
    """The coordinator answered a cursor before the one asked for: its journal is not the one being followed."""


OnChange = Callable[[str, Mapping[str, GroupActivity]], Awaitable[None]]
OnFollowing = Callable[[str], None]


class JournalFollower:
    def __init__(
        self,
        url: str,
        source: JournalSource,
        on_change: OnChange,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        on_following: OnFollowing = lambda url: None,
    ) -> None:
        self.url = url
        self.source = source
        self.on_change = on_change
        self.on_following = on_following
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
                    self.on_following(self.url)
                asked, started = after, self.clock()
                after, groups = await self.source.journal_page(asked, PAGE, WAIT_MS)
                if after < asked:
                    raise JournalRewound(f"asked for events after {asked}, answered a cursor of {after}")
                failures = self._answered(failures)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # status lags meanwhile; the passes report the coordinator themselves
                if failures == 0:
                    logger.warning("cannot follow the journal of %s (%s); retrying with backoff", self.url, error)
                failures += 1
                if isinstance(error, JournalRewound):
                    after = None  # find the end of the journal the coordinator has now
                await self.sleep(min(BACKOFF_MAX_S, 2.0 ** min(failures - 1, 5)))
                continue
            if groups:
                await self.on_change(self.url, groups)
            if after == asked and self.clock() - started < MIN_EMPTY_POLL_S:
                await self.sleep(MIN_EMPTY_POLL_S)  # not held, and nothing new: never a tight loop

    def _answered(self, failures: int) -> int:
        if failures:
            logger.info("the journal of %s answers again", self.url)
        return 0

    async def _end(self) -> int:
        """The journal's last seq: paged to (retention keeps the journal small enough for that to be cheap), at
        most :data:`END_PAGES` pages; a cursor that does not move forward ends it."""
        after = 0
        for _ in range(END_PAGES):
            cursor, _ = await self.source.journal_page(after, 10_000, 0)
            if cursor <= after:
                return after
            after = cursor
        return after
