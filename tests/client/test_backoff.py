"""Retry backoff: capped exponential with jitter (Kafka's ExponentialBackoff), injectable sleep and randomness."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.coordinator.client import BackoffPolicy


def no_jitter(low: float, high: float) -> float:
    return (low + high) / 2


def test_waits_double_from_the_initial_wait_up_to_the_cap() -> None:
    backoff = BackoffPolicy(initial_ms=100, max_ms=1_000, uniform=no_jitter).start()
    assert [backoff.next_delay_ms() for _ in range(6)] == [100, 200, 400, 800, 1_000, 1_000]


def test_reset_starts_again_from_the_initial_wait() -> None:
    backoff = BackoffPolicy(initial_ms=100, max_ms=1_000, uniform=no_jitter).start()
    backoff.next_delay_ms()
    backoff.next_delay_ms()
    backoff.reset()
    assert backoff.next_delay_ms() == 100


def test_jitter_spreads_each_wait_and_the_cap_applies_after_it() -> None:
    highest = BackoffPolicy(initial_ms=100, max_ms=900, jitter=0.2, uniform=lambda low, high: high).start()
    lowest = BackoffPolicy(initial_ms=100, max_ms=900, jitter=0.2, uniform=lambda low, high: low).start()
    assert [highest.next_delay_ms() for _ in range(5)] == pytest.approx([120, 240, 480, 900, 900])  # 960 capped
    assert [lowest.next_delay_ms() for _ in range(5)] == pytest.approx([80, 160, 320, 640, 900])  # 1280 capped


@given(
    initial=st.floats(1, 1_000),
    cap_factor=st.floats(1, 100),
    jitter=st.floats(0, 0.99),
    attempts=st.integers(1, 200),
    seed=st.integers(0, 2**32),
)
def test_every_wait_is_within_its_jittered_bounds_and_never_above_the_cap(
    initial: float, cap_factor: float, jitter: float, attempts: int, seed: int
) -> None:
    rng = random.Random(seed)
    policy = BackoffPolicy(initial_ms=initial, max_ms=initial * cap_factor, jitter=jitter, uniform=rng.uniform)
    backoff = policy.start()
    for attempt in range(attempts):
        delay = backoff.next_delay_ms()
        nominal = initial * 2.0 ** min(attempt, 64)
        assert delay <= policy.max_ms
        assert delay >= min(nominal * (1 - jitter), policy.max_ms) - 1e-9


async def test_wait_sleeps_through_the_injected_sleep() -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    backoff = BackoffPolicy(initial_ms=50, max_ms=150, sleep=record, uniform=no_jitter).start()
    assert [await backoff.wait() for _ in range(3)] == [50, 100, 150]
    assert slept == pytest.approx([0.05, 0.1, 0.15])


@pytest.mark.parametrize(
    "bad",
    [
        {"initial_ms": 0},
        {"initial_ms": 100, "max_ms": 50},
        {"multiplier": 0.5},
        {"jitter": 1.0},
        {"jitter": -0.1},
    ],
)
def test_nonsense_policies_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        BackoffPolicy(**bad)
