"""Retry backoff: capped exponential with jitter, as Kafka's ``ExponentialBackoff`` computes it.

Owns ``BackoffPolicy`` (the numbers, plus the injectable ``sleep`` and ``uniform`` so tests can record or skip
the waits and pin the jitter) and ``Backoff`` (one retry sequence's attempt counter). Rules:

- The n-th wait (n from 0) is ``initial * multiplier**n`` times a random factor in ``[1 - jitter, 1 + jitter]``,
  and never more than ``max``: the cap applies after the jitter, so a long outage retries every ``max`` at most.
- A sequence is reset by its owner after a success, so the next failure starts from ``initial`` again.
- No clock is read here; waiting is delegated to ``sleep``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeAlias

#: ``await sleep(seconds)``: ``asyncio.sleep`` in production.
Sleep: TypeAlias = Callable[[float], Awaitable[None]]
#: ``uniform(low, high)``: a random float in ``[low, high]``; ``random.uniform`` in production.
Uniform: TypeAlias = Callable[[float, float], float]


@dataclass(frozen=True)
class BackoffPolicy:
    """How long to wait before each retry of one operation. Times in milliseconds."""

    initial_ms: float = 100.0
    max_ms: float = 1_000.0
    multiplier: float = 2.0
    jitter: float = 0.2
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)
    uniform: Uniform = field(default=random.uniform, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.initial_ms <= 0 or self.max_ms < self.initial_ms:
            raise ValueError(f"backoff needs 0 < initial_ms <= max_ms, got {self.initial_ms} and {self.max_ms}")
        if self.multiplier < 1:
            raise ValueError(f"backoff multiplier must be at least 1, got {self.multiplier}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def delay_ms(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0 = the first retry)."""
        # Cap the exponent so a very long outage cannot overflow the float before the cap applies.
        term = self.initial_ms * self.multiplier ** min(attempt, 64)
        factor = self.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else 1.0
        return min(term * factor, self.max_ms)

    def start(self) -> Backoff:
        """A fresh retry sequence."""
        return Backoff(self)


class Backoff:
    """One operation's retries: each ``wait()`` sleeps the next delay; ``reset()`` after a success."""

    def __init__(self, policy: BackoffPolicy) -> None:
        self.policy = policy
        self.attempts = 0

    def next_delay_ms(self) -> float:
        delay = self.policy.delay_ms(self.attempts)
        self.attempts += 1
        return delay

    async def wait(self) -> float:
        """Sleep the next delay; returns it in milliseconds."""
        delay = self.next_delay_ms()
        await self.policy.sleep(delay / 1000)
        return delay

    def reset(self) -> None:
        self.attempts = 0
