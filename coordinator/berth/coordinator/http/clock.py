"""Clocks for the adapter: the system clock, and the manual clock that only moves when told (docs/api.md §9).

Both give milliseconds since the Unix epoch. The system clock is wall time at start plus monotonic time
elapsed, so a wall-clock jump never fires a session timer early or late.
"""

from __future__ import annotations

import time


class SystemClock:
    manual = False

    def __init__(self) -> None:
        self._epoch_base_ms = time.time_ns() // 1_000_000
        self._monotonic_base_ns = time.monotonic_ns()

    def now_ms(self) -> int:
        return self._epoch_base_ms + (time.monotonic_ns() - self._monotonic_base_ns) // 1_000_000


class ManualClock:
    manual = True

    def __init__(self, start_ms: int | None = None) -> None:
        self._now_ms = time.time_ns() // 1_000_000 if start_ms is None else start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def set(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise ValueError("the manual clock never moves backwards")
        self._now_ms = now_ms


Clock = SystemClock | ManualClock
