"""``benchmarks.ha_writes.per_transaction``: the writer's cycle from two readings of its figures and the load's
window, and the part of it the writer spent waiting for writes."""

from __future__ import annotations

import pytest

from benchmarks.ha_writes import STORE_FIGURES, per_transaction

COUNT, SECONDS, WRITES, PREPARING = STORE_FIGURES


def test_the_cycle_is_the_window_over_the_transactions_and_waiting_is_what_the_store_and_preparing_leave() -> None:
    before = {COUNT: 10.0, SECONDS: 1.0, WRITES: 300.0, PREPARING: 0.5}
    after = {COUNT: 110.0, SECONDS: 1.9, WRITES: 2_800.0, PREPARING: 0.7}  # 100 transactions in a 1.5 s window
    figures = per_transaction(before, after, 1.5)
    assert figures == pytest.approx(
        {"store_ms": 9.0, "preparing_ms": 2.0, "cycle_ms": 15.0, "waiting_ms": 4.0, "writes": 25.0}
    )


def test_a_writer_never_idle_waits_nothing() -> None:
    """A window shorter than the store's time (the readings straddle it) gives no negative wait."""
    before = dict.fromkeys(STORE_FIGURES, 0.0)
    after = {COUNT: 10.0, SECONDS: 0.2, WRITES: 100.0, PREPARING: 0.01}
    assert per_transaction(before, after, 0.15)["waiting_ms"] == 0.0
