"""A stop that does not wind down in time: the operator exits anyway, naming what each task still waited on."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import threading
import time

import pytest

from berth.operator.command.app import Stopping


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The exit statuses ``os._exit`` was called with (the process goes on), logging left open for the test."""
    called: list[int] = []
    monkeypatch.setattr(os, "_exit", called.append)
    monkeypatch.setattr(logging, "shutdown", lambda: None)
    return called


async def test_a_wind_down_cut_short_exits_naming_each_task_and_where_it_waits(
    caplog: pytest.LogCaptureFixture, exits: list[int]
) -> None:
    stuck = asyncio.create_task(asyncio.Event().wait(), name="pass shop/orders")
    await asyncio.sleep(0)
    try:
        with caplog.at_level(logging.WARNING, logger="berth.operator"):
            # From another thread, as its timer calls it: while the event loop waits on this very call.
            stopping = Stopping(wind_down_s=20)
            await asyncio.to_thread(stopping.cut_short, asyncio.get_running_loop(), threading.current_thread())
    finally:
        stuck.cancel()
    assert exits == [0]
    [record] = [r for r in caplog.records if "did not wind down" in r.getMessage()]
    message = record.getMessage()
    assert message.startswith("the operator did not wind down within 20 s of the stop signal: exiting;")
    assert re.search(r"the event loop's thread at \w+\.py:\d+ \w+;", message)  # where it ran at that moment
    where = message.split("pass shop/orders at ")[1].split(";")[0]  # the innermost frame: Event.wait in locks.py
    assert where.startswith("locks.py:") and where.endswith(" wait")


async def test_a_stop_signal_cuts_a_wind_down_that_blocks_the_event_loop_short_naming_where_it_blocks(
    caplog: pytest.LogCaptureFixture, exits: list[int]
) -> None:
    stopping = Stopping(wind_down_s=0.05)
    with caplog.at_level(logging.INFO, logger="berth.operator"):
        stopping.signalled(signal.SIGTERM)
        assert stopping.event.is_set()
        # The event loop blocked (its own timers could not fire) until the timer's thread has cut the stop short.
        deadline = time.monotonic() + 60
        while not exits and time.monotonic() < deadline:
            time.sleep(0.01)  # noqa: ASYNC251 - blocking the loop is the point
    assert exits == [0]
    message = next(r.getMessage() for r in caplog.records if "did not wind down" in r.getMessage())
    assert "the event loop's thread at test_stopping.py:" in message
    assert "test_a_stop_signal_cuts_a_wind_down_that_blocks_the_event_loop_short" in message
