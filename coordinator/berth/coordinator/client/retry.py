"""Retrying one call while the coordinator is unavailable, for a bounded number of attempts or time.

Owns ``with_retries`` and ``raise_if_retriable``. Rules:

- Only ``CoordinatorUnavailableError`` is retried (connection errors, timeouts, HTTP 5xx, and in-band 14/15/16
  turned into it by ``raise_if_retriable``); everything else propagates at once.
- Waits come from the caller's ``Backoff`` (capped exponential with jitter, injectable sleep).
- When attempts or time run out, the last error is raised as it is (its type tells the caller what it was).
- The member's protocol loop does not use this: it retries for as long as it runs (``coordination``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from berth.coordinator.client.backoff import Backoff
from berth.coordinator.client.errors import CoordinatorUnavailableError
from berth.coordinator.client.transport import RETRIABLE_ERRORS
from berth.coordinator.protocol import Error

T = TypeVar("T")


def raise_if_retriable(error: Error, what: str) -> None:
    """Turn an in-band "try again later" answer into the ``CoordinatorUnavailableError`` that is retried."""
    if error in RETRIABLE_ERRORS:
        raise CoordinatorUnavailableError(f"{what}: coordinator answered {error.name} ({error.value})")


async def with_retries(
    call: Callable[[], Awaitable[T]],
    backoff: Backoff,
    *,
    attempts: int | None = None,
    timeout_s: float | None = None,
) -> T:
    """``await call()``, retrying while it raises ``CoordinatorUnavailableError``, within the given bounds."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    made = 0
    while True:
        made += 1
        try:
            return await call()
        except CoordinatorUnavailableError:
            out_of_attempts = attempts is not None and made >= attempts
            out_of_time = deadline is not None and loop.time() >= deadline
            if out_of_attempts or out_of_time:
                raise
            await backoff.wait()
