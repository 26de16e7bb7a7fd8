"""Long-polls on the journal (``GET /v1/journal?after=SEQ&wait_ms=W``, docs/api.md §8).

A poll with nothing after ``after`` parks until a durable event with a greater seq exists, until ``wait_ms``
passes on the coordinator's clock (with the manual clock: when it is advanced past the deadline), or until the
coordinator shuts down; then it is answered like any other page. Rules:

- Waking is by seq: the engine reports the last durable seq after every batch of writes (``notify``).
- Polls park per *holder* (a token's name, or a client's address without tokens): at most ``max_per_holder`` each,
  and at most ``max_parked`` of every holder but admin tokens together. A poll beyond either is answered at once (it
  is still a valid page). So no reader can take the places the operator's follower needs: a ``journal:read`` token
  that parked a thousand polls used to make every other poll return at once, empty, and the operator's follower
  spin on them.
- ``release_all`` answers every parked poll (shutdown); nothing stays parked once the engine is closed.
  ``release_waiting`` answers them without closing (a replicated store's term ended: each asks again elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from berth.coordinator.http.clock import Clock

#: Parked journal polls at most, of every holder but admin tokens (each holds a connection and a future).
MAX_PARKED_POLLS = 1_000
#: Parked journal polls of one holder at most (the operator keeps one per coordinator).
MAX_PARKED_POLLS_PER_HOLDER = 16


@dataclass(slots=True)
class _Poll:
    after: int
    deadline_ms: int
    woken: asyncio.Future[None]
    holder: str
    admin: bool
    timer: asyncio.TimerHandle | None = field(default=None)


class JournalWaiters:
    def __init__(
        self, clock: Clock, max_parked: int = MAX_PARKED_POLLS, max_per_holder: int = MAX_PARKED_POLLS_PER_HOLDER
    ) -> None:
        self.clock = clock
        self.max_parked = max_parked
        self.max_per_holder = max_per_holder
        self._polls: list[_Poll] = []
        self._held: dict[str, int] = {}
        self._not_admin = 0
        self.closed = False

    @property
    def parked(self) -> int:
        return len(self._polls)

    async def wait(self, after: int, wait_ms: int, holder: str = "", admin: bool = False) -> None:
        """Return once an event after ``after`` is durable, ``wait_ms`` passed, or the polls are released; at once
        when ``holder`` (an admin token's or not) has no place left to park.

        The caller checks for such an event first, with no ``await`` in between, so no wake-up is missed.
        """
        held = self._held.get(holder, 0)
        if self.closed or wait_ms <= 0 or held >= self.max_per_holder:
            return
        if not admin and self._not_admin >= self.max_parked:
            return
        loop = asyncio.get_running_loop()
        poll = _Poll(after, self.clock.now_ms() + wait_ms, loop.create_future(), holder, admin)
        if not self.clock.manual:
            poll.timer = loop.call_later(wait_ms / 1000, _wake, poll)
        self._polls.append(poll)
        self._held[holder] = held + 1
        self._not_admin += not admin
        try:
            await poll.woken
        finally:
            if poll.timer is not None:
                poll.timer.cancel()
            with contextlib.suppress(ValueError):
                self._polls.remove(poll)
            self._not_admin -= not admin
            left = self._held[holder] - 1
            if left:
                self._held[holder] = left
            else:
                del self._held[holder]

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
