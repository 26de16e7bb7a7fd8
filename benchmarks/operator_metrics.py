"""Benchmark: the operator's ``/metrics`` with thousands of fleets — render time, and how late the event loop's
timers fire while it is scraped back to back.

Side by side in one process: the exposition as it was before issue 22 (prometheus-client's registry, 45 series per
fleet, rendered by an aiohttp handler on the event loop Kopf's handlers share: :class:`LegacyMetrics`, kept here as
the baseline) and the operator's (``berth.operator.adapters.metrics``: 20 series per fleet, 10 when measured, before the
restart counters; each fleet's lines cached until it changes, served from a thread of its own). For 2,000 and
10,000 fleets:

- series per fleet, and the render time of one scrape (cold: every fleet changed since the last; warm: 1 % did);
- the event loop's lateness while a client scrapes ``/metrics`` back to back for a few seconds: a 100 ms timer on
  the loop (what Kopf's timers and handlers wait on) records how late it wakes, while the loop also records a pass
  every 10 ms (``pass_done`` and ``state`` of a fleet, as the reconcile passes do).

Goal: the loop's timer wakes within 100 ms of its time at 10,000 fleets while scraped (before: seconds late).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from benchmarks.common import Result, progress, spread
from benchmarks.goals import GOALS
from berth.operator.adapters.metrics import OperatorMetrics, serving

FLEETS = (2_000, 10_000)
SCRAPE_WINDOW_S = 6.0
TICK_S = 0.1
PASS_EVERY_S = 0.01
OUTCOMES = ("converged", "waiting", "refused", "retry", "error")


class Metrics(Protocol):
    def pass_done(self, namespace: str, fleet: str, outcome: str) -> None: ...

    def left(self, namespace: str, fleet: str, removed: int, delay_s: float, since_start_s: float | None) -> None: ...

    def state(self, namespace: str, fleet: str, *, ready: bool, refused: bool, departing: int) -> None: ...

    def exposition(self) -> bytes: ...


class LegacyMetrics:
    """The operator's metrics before issue 22 (the baseline): a prometheus-client registry, every family per fleet
    (the two histograms too), counters and histograms at 0 from a fleet's first pass, rendered whole per scrape."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        fleet = ("namespace", "fleet")
        self.reconciles = Counter("berth_operator_reconciles", "passes", [*fleet, "outcome"], registry=r)
        self.batch_leaves = Counter("berth_operator_batch_leaves", "leaves", fleet, registry=r)
        self.members_left = Counter("berth_operator_members_left", "left", fleet, registry=r)
        buckets = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
        self.leave_delay = Histogram("berth_operator_leave_delay_seconds", "delay", fleet, buckets=buckets, registry=r)
        buckets = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)
        self.scale_down = Histogram("berth_operator_scale_down_seconds", "down", fleet, buckets=buckets, registry=r)
        self.departing = Gauge("berth_operator_departing_members", "departing", fleet, registry=r)
        self.ready = Gauge("berth_operator_fleet_ready", "ready", fleet, registry=r)
        self.refused = Gauge("berth_operator_fleet_refused", "refused", fleet, registry=r)
        self._known: set[tuple[str, str]] = set()

    def pass_done(self, namespace: str, fleet: str, outcome: str) -> None:
        self.reconciles.labels(namespace, fleet, outcome).inc()

    def left(self, namespace: str, fleet: str, removed: int, delay_s: float, since_start_s: float | None) -> None:
        self.batch_leaves.labels(namespace, fleet).inc()
        self.members_left.labels(namespace, fleet).inc(removed)
        self.leave_delay.labels(namespace, fleet).observe(delay_s)
        if since_start_s is not None:
            self.scale_down.labels(namespace, fleet).observe(since_start_s)

    def state(self, namespace: str, fleet: str, *, ready: bool, refused: bool, departing: int) -> None:
        if (namespace, fleet) not in self._known:
            self._known.add((namespace, fleet))
            for family in (self.batch_leaves, self.members_left, self.leave_delay, self.scale_down):
                family.labels(namespace, fleet)
            for outcome in OUTCOMES:
                self.reconciles.labels(namespace, fleet, outcome)
        self.ready.labels(namespace, fleet).set(1 if ready else 0)
        self.refused.labels(namespace, fleet).set(1 if refused else 0)
        self.departing.labels(namespace, fleet).set(departing)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


@asynccontextmanager
async def legacy_serving(metrics: LegacyMetrics, port: int) -> AsyncIterator[None]:
    """The baseline's server: an aiohttp handler rendering on the event loop."""

    async def handle(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield
    finally:
        await runner.cleanup()


def populate(metrics: Metrics, fleets: int) -> None:
    for n in range(fleets):
        name = f"fleet-{n}"
        metrics.state("ns", name, ready=True, refused=False, departing=0)
        metrics.pass_done("ns", name, "converged")
        if n % 10 == 0:
            metrics.left("ns", name, removed=2, delay_s=0.2, since_start_s=8.0)


def series_per_fleet(text: str) -> int:
    return sum(1 for line in text.splitlines() if 'fleet="fleet-0"' in line)


def render_times(metrics: Metrics, fleets: int, runs: int) -> tuple[list[float], list[float]]:
    """Seconds per render: cold (every fleet changed since the last render) and warm (1 % changed)."""
    cold, warm = [], []
    for run in range(runs):
        for n in range(fleets):
            metrics.pass_done("ns", f"fleet-{n}", "converged")
        started = time.perf_counter()
        metrics.exposition()
        cold.append(time.perf_counter() - started)
        for n in range(0, fleets, 100):
            metrics.pass_done("ns", f"fleet-{n + run}", "waiting")
        started = time.perf_counter()
        metrics.exposition()
        warm.append(time.perf_counter() - started)
    return cold, warm


def scrape_loop(url: str, stop: threading.Event, scraped: threading.Event, durations: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as answer:
            answer.read()
        durations.append(time.perf_counter() - started)
        scraped.set()


async def loop_lateness(metrics: Metrics, fleets: int, url: str) -> dict[str, Any]:
    """How late a 100 ms timer on the loop wakes while ``url`` is scraped back to back and passes are recorded."""
    stop, scraped = threading.Event(), threading.Event()
    durations: list[float] = []
    late: list[float] = []

    async def passes() -> None:
        n = 0
        while not stop.is_set():
            name = f"fleet-{n % fleets}"
            metrics.pass_done("ns", name, "converged")
            metrics.state("ns", name, ready=n % 2 == 0, refused=False, departing=0)
            n += 1
            await asyncio.sleep(PASS_EVERY_S)

    async def ticker() -> None:
        while not stop.is_set():
            due = time.perf_counter() + TICK_S
            await asyncio.sleep(TICK_S)
            late.append(max(0.0, time.perf_counter() - due))

    scraper = threading.Thread(target=scrape_loop, args=(url, stop, scraped, durations), daemon=True)
    tasks = [asyncio.create_task(passes()), asyncio.create_task(ticker())]
    scraper.start()
    await asyncio.sleep(SCRAPE_WINDOW_S)
    await asyncio.to_thread(scraped.wait, 300)  # at least one whole scrape, however long it takes
    stop.set()
    await asyncio.to_thread(scraper.join, 300)
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    late_ms = sorted(1000 * x for x in late)
    return {
        "timer_late_ms_max": round(late_ms[-1], 1),
        "timer_late_ms_p99": round(late_ms[int(0.99 * (len(late_ms) - 1))], 1),
        "timer_late_ms_median": round(statistics.median(late_ms), 1),
        "ticks": len(late_ms),
        "scrapes": len(durations),
        "scrape_s_median": round(statistics.median(durations), 3),
    }


async def measure(kind: str, fleets: int, port: int) -> dict[str, Any]:
    metrics: LegacyMetrics | OperatorMetrics = LegacyMetrics() if kind == "before" else OperatorMetrics()
    populate(metrics, fleets)
    per_fleet = series_per_fleet(metrics.exposition().decode())
    runs = 1 if (kind == "before" and fleets > 2_000) else 3
    cold, warm = render_times(metrics, fleets, runs)
    url = f"http://127.0.0.1:{port}/metrics"
    if isinstance(metrics, LegacyMetrics):
        server = legacy_serving(metrics, port)
    else:
        server = serving(metrics, port, "127.0.0.1")
    async with server:
        lateness = await loop_lateness(metrics, fleets, url)
    figures = {
        "series_per_fleet": per_fleet,
        "render_cold_s": {k: round(v, 4) for k, v in spread(cold).items()},
        "render_warm_s": {k: round(v, 4) for k, v in spread(warm).items()},
        **lateness,
    }
    progress(f"{kind} at {fleets} fleets: {figures}")
    return figures


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> Result:
    figures: dict[str, Any] = {}
    for fleets in FLEETS:
        for kind in ("before", "after"):
            figures[f"{kind}_{fleets}"] = asyncio.run(measure(kind, fleets, free_port()))
    before, after = figures[f"before_{FLEETS[-1]}"], figures[f"after_{FLEETS[-1]}"]
    met = after["timer_late_ms_max"] < 100
    summary = (
        f"at {FLEETS[-1]:,} fleets, scraped back to back: the loop's 100 ms timer woke at most"
        f" {after['timer_late_ms_max']:.0f} ms late (before: {before['timer_late_ms_max'] / 1000:.1f} s); one render"
        f" {after['render_warm_s']['median'] * 1000:.0f} ms warm, {after['render_cold_s']['median'] * 1000:.0f} ms"
        f" cold (before: {before['render_cold_s']['median']:.1f} s); {after['series_per_fleet']} series per fleet"
        f" (before: {before['series_per_fleet']})"
    )
    return Result(
        name="operator_metrics",
        title="Operator /metrics at 2,000 and 10,000 fleets: render time and event-loop lateness",
        command="python -m benchmarks operator_metrics",
        goal=GOALS["operator_metrics"],
        met=met,
        summary=summary,
        figures=figures,
        note=__doc__ or "",
    )


if __name__ == "__main__":
    result = main()
    result.save()
    print(result.summary)
