"""Long-polls on the journal (``GET /v1/journal?after=SEQ&wait_ms=W``, docs/api.md §8).

A poll with nothing after ``after`` parks until a durable event with a greater seq exists, until ``wait_ms``
passes on the coordinator's clock (with the manual clock: when it is advanced past the deadline), or until the
coordinator shuts down; then it is answered like any other page. Rules:

- Waking is by seq: the engine reports the last durable seq after every batch of writes (``notify``).
- At most ``max_parked`` polls park; a poll beyond that is answered at once (it is still a valid page).
- ``release_all`` answers every parked poll (shutdown); nothing stays parked once the engine is closed.
  ``release_waiting`` answers them without closing (a replicated store's term ended: each asks again elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from berth.coordinator.http.clock import Clock

#: Parked journal polls at most (each holds a connection and a future; an operator needs a handful).
MAX_PARKED_POLLS = 1_000


@dataclass(slots=True)
class _Poll:
    after: int
    deadline_ms: int
    woken: asyncio.Future[None]
    timer: asyncio.TimerHandle | None = field(default=None)


class JournalWaiters:
    def __init__(self, clock: Clock, max_parked: int = MAX_PARKED_POLLS) -> None:
        self.clock = clock
        self.max_parked = max_parked
        self._polls: list[_Poll] = []
        self.closed = False

    @property
    def parked(self) -> int:
        return len(self._polls)

    async def wait(self, after: int, wait_ms: int) -> None:
        """Return once an event after ``after`` is durable, ``wait_ms`` passed, or the polls are released.

        The caller checks for such an event first, with no ``await`` in between, so no wake-up is missed.
        """
        if self.closed or wait_ms <= 0 or len(self._polls) >= self.max_parked:
            return
        loop = asyncio.get_running_loop()
        poll = _Poll(after, self.clock.now_ms() + wait_ms, loop.create_future())
        if not self.clock.manual:
            poll.timer = loop.call_later(wait_ms / 1000, _wake, poll)
        self._polls.append(poll)
        try:
            await poll.woken
        finally:
            if poll.timer is not None:
                poll.timer.cancel()
            with contextlib.suppress(ValueError):
                self._polls.remove(poll)

    def notify(self, last_seq: int) -> None:
        """Events up to ``last_seq`` are durable: wake every poll waiting for one of them."""
        for poll in self._polls:
            if poll.after < last_seq:
                _wake(poll)

    def expire(self, now_ms: int) -> None:
        """The manual clock moved to ``now_ms``: wake every poll whose wait is over."""
        for poll in self._polls:
            if poll.deadline_ms <= now_ms:
                _wake(poll)

    def release_waiting(self) -> None:
        """Answer every parked poll (a term ended); polls may park again."""
        for poll in self._polls:
            _wake(poll)

    def release_all(self) -> None:
        self.closed = True
        for poll in self._polls:
            _wake(poll)


def _wake(poll: _Poll) -> None:
    if not poll.woken.done():
        poll.woken.set_result(None)
