"""Progress lines on stderr for long runs: which stage, what it counted, how long since the start.

Owns the progress format: ``berth-analyze [  12.3 s] <message>``. Rules: stderr only (stdout stays clean for
pipes), one line per stage, counts with thousands separators. The clock is injected so that output can be tested.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    def __init__(
        self,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        enabled: bool = True,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._started = clock()
        self._enabled = enabled

    def say(self, message: str) -> None:
        if self._enabled:
            elapsed = self._clock() - self._started
            print(f"berth-analyze [{elapsed:6.1f} s] {message}", file=self._stream, flush=True)

    def elapsed_s(self) -> float:
        return self._clock() - self._started


def count(n: int, noun: str | None = None) -> str:
    """1234567 -> ``1,234,567``; with a noun, ``1 group`` or ``1,234 groups``."""
    if noun is None:
        return f"{n:,}"
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
