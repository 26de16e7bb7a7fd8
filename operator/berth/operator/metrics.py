"""The operator's Prometheus metrics: what it did, per fleet, served on ``--metrics-port`` (``GET /metrics``); the
reconcile service counts through it as its :class:`~berth.operator.ports.PassMetrics`.

Owns every family the operator exports (``berth_operator_*``), with its HELP text, and the rule that keeps their
cardinality bounded: series are labelled by the fleet (namespace, name) only — never by instance id, group or URL —
and a fleet's series are removed when the fleet is released. Recording never fails a pass.

A fleet's counters and histograms exist at 0 from its first pass on (``state``), not from their first increment:
Prometheus' ``increase()`` and ``rate()`` only see an increment between two samples, so a series born at 1 would
hide a fleet's first scale-down (and its first reconcile error) from the dashboard and the alert rules.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

FLEET = ("namespace", "fleet")
OUTCOMES = ("converged", "waiting", "refused", "retry", "error")


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "berth_operator_reconciles",
            "Reconcile passes by outcome: converged, waiting (more to do), refused (spec or trust), retry (a"
            " coordinator or the API could not be asked), error (a bug: see the log)",
            [*FLEET, "outcome"],
            registry=r,
        )
        self.batch_leaves = Counter(
            "berth_operator_batch_leaves", "Batch leaves sent (ONE per scale-down, normally)", FLEET, registry=r
        )
        self.members_left = Counter(
            "berth_operator_members_left", "Instance ids the batch leaves removed from the group", FLEET, registry=r
        )
        self.leave_delay = Histogram(
            "berth_operator_leave_delay_seconds",
            "Seconds from the pass that found a scale-down's departing pods gone to the batch leave's answer (the"
            " pods went at most one poll interval, 1 s, before that pass)",
            FLEET,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.scale_down = Histogram(
            "berth_operator_scale_down_seconds",
            "Seconds from a scale-down's start (status.departingSince) to its batch leave's answer",
            FLEET,
            buckets=(1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=r,
        )
        self.departing = Gauge(
            "berth_operator_departing_members", "Instance ids waiting for their batch leave", FLEET, registry=r
        )
        self.ready = Gauge(
            "berth_operator_fleet_ready", "1 when the fleet's Ready condition is True", FLEET, registry=r
        )
        self.refused = Gauge(
            "berth_operator_fleet_refused", "1 while the fleet is refused (SpecValid=False)", FLEET, registry=r
        )
        self._fleet_families: Iterable[Counter | Gauge | Histogram] = (
            self.batch_leaves,
            self.members_left,
            self.leave_delay,
            self.scale_down,
            self.departing,
            self.ready,
            self.refused,
        )
        self._lock = threading.Lock()
        self._known: set[tuple[str, str]] = set()  # fleets whose series exist (at 0 until something happens)

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
            self._start(namespace, fleet)
        self.ready.labels(namespace, fleet).set(1 if ready else 0)
        self.refused.labels(namespace, fleet).set(1 if refused else 0)
        self.departing.labels(namespace, fleet).set(departing)

    def _start(self, namespace: str, fleet: str) -> None:
        """Create the fleet's counters and histograms at 0 (see the module docstring)."""
        with self._lock:
            self._known.add((namespace, fleet))
            for family in (self.batch_leaves, self.members_left, self.leave_delay, self.scale_down):
                family.labels(namespace, fleet)
            for outcome in OUTCOMES:
                self.reconciles.labels(namespace, fleet, outcome)

    def forget(self, namespace: str, fleet: str) -> None:
        """Remove a released fleet's series (bounded cardinality: only existing fleets have series)."""
        with self._lock:
            self._known.discard((namespace, fleet))
            for family in self._fleet_families:
                with contextlib.suppress(KeyError):
                    family.remove(namespace, fleet)
            for outcome in OUTCOMES:
                with contextlib.suppress(KeyError):
                    self.reconciles.remove(namespace, fleet, outcome)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


@asynccontextmanager
async def serving(metrics: OperatorMetrics, port: int, host: str = "0.0.0.0") -> AsyncIterator[None]:
    """``GET /metrics`` on ``port`` while the block runs (nothing when ``port`` is 0)."""
    if not port:
        yield
        return

    async def handle(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()
