"""Log lines a client can provoke, rate-limited and made safe to print (docs/api.md §10 "Logging").

Owns ``QuietLog`` and ``printable``. Rules:

- A hostile client must not be able to flood the log: per kind of line (``malformed_http``, ``auth``,
  ``header_timeout``, ...) at most one line per window is written; the rest are counted, and the count is written
  when the window ends (``41 more auth lines held back in the last 10 s``), so nothing disappears without a trace.
- Anything taken from a request (a path, a parser's complaint quoting the client's bytes) goes through
  ``printable``: control characters are escaped and the text is cut short, so a client cannot forge log lines.
- One line per event, never a traceback: these are the client's mistakes, not the coordinator's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 10.0


def printable(text: str, limit: int = 200) -> str:
    """``text`` with unprintable characters escaped (``\\x1b``, ``\\n``, ``\\u202e``), cut to ``limit``."""
    escaped = text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@dataclass(slots=True)
class _Kind:
    last_written: float
    suppressed: int = 0
    flush: asyncio.TimerHandle | None = None


class QuietLog:
    """At most one line per kind per ``window_s``; the lines held back are counted and reported."""

    def __init__(
        self, logger: logging.Logger, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.window_s = window_s
        self.clock = clock
        self._kinds: dict[str, _Kind] = {}

    def warning(self, kind: str, message: str, *args: object) -> None:
        """Write ``message % args`` now, or count it if a line of this kind was written within the window."""
        self.write(logging.WARNING, kind, message, *args)

    def write(self, level: int, kind: str, message: str, *args: object, exc_info: BaseException | None = None) -> None:
        now = self.clock()
        state = self._kinds.get(kind)
        if state is not None and now - state.last_written < self.window_s:
            state.suppressed += 1
            if state.flush is None:
                state.flush = self._schedule(state.last_written + self.window_s - now, kind)
            return
        self._kinds[kind] = _Kind(now)
        self.logger.log(level, message, *args, exc_info=exc_info)

    def close(self) -> None:
        """Report what is still held back (at shutdown)."""
        for kind in list(self._kinds):
            self._report(kind)

    def _schedule(self, delay_s: float, kind: str) -> asyncio.TimerHandle | None:
        try:
            return asyncio.get_running_loop().call_later(max(0.0, delay_s), self._report, kind)
        except RuntimeError:  # no event loop (a unit test): reported with the next line or at close
            return None

    def _report(self, kind: str) -> None:
        state = self._kinds.get(kind)
        if state is None:
            return
        if state.flush is not None:
            state.flush.cancel()
            state.flush = None
        if state.suppressed:
            self.logger.warning("%d more %s lines held back in the last %g s", state.suppressed, kind, self.window_s)
            state.suppressed = 0
            state.last_written = self.clock()
