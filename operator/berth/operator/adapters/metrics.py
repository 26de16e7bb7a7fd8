"""The operator's Prometheus metrics: what it did, per fleet, served on ``--metrics-port`` (``GET /metrics``); the
reconcile service counts through it as its :class:`~berth.operator.ports.PassMetrics`.

Owns every family the operator exports (``berth_operator_*``), with its HELP text, and the rules that keep a scrape
off Kopf's event loop and bounded:

- **Off the loop.** ``/metrics`` is served by a thread of its own (:func:`serving`), never by the event loop the
  handlers run on; recording (on the loop) only updates a fleet's numbers under a lock held for a few assignments.
- **Rendered once per change.** Each fleet's lines are rendered when a scrape finds the fleet changed since its last
  render (a version number per fleet), so a scrape of 10,000 idle fleets joins cached strings instead of formatting
  450,000 samples (what prometheus-client's registry did on the loop: 13.8 s, during which no handler ran).
- **Bounded per fleet.** 20 series per fleet: the reconcile outcomes (5), batch leaves, members left, static
  restarts, rolls, departing members, ready, refused, and a Kafka fleet's lag (total, largest partition), unreleased
  and fencing instance ids and stale instances released (0 for other fleets), and the group's ownership (unowned
  partitions, idle Ready pods, stuck) — labelled by the fleet (namespace,
  name) only, never by instance id, group or URL, and removed when the fleet is released. The two latency
  histograms (leave delay, scale-down duration) are the operator's, not per fleet: the dashboard reads them summed
  over fleets (``sum by (le)``), and per fleet they were 28 of the 45 series a fleet cost. No ``_created`` series.
  With ``--max-fleets`` the whole scrape is bounded.
- Recording never fails a pass. A fleet's counters exist at 0 from its first pass on (``state``), not from their
  first increment: Prometheus' ``increase()`` and ``rate()`` only see an increment between two samples, so a series
  born at 1 would hide a fleet's first scale-down (and its first reconcile error) from the dashboard and the alerts.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OUTCOMES = ("converged", "waiting", "refused", "retry", "error")
LEAVE_DELAY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
SCALE_DOWN_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # as exposed (counters with _total)
    kind: str
    help: str

    def header(self) -> str:
        return f"# HELP {self.name} {self.help}\n# TYPE {self.name} {self.kind}\n"


RECONCILES = Family(
    "berth_operator_reconciles_total",
    "counter",
    "Reconcile passes by outcome: converged, waiting (more to do), refused (spec or trust), retry (a coordinator or"
    " the API could not be asked), error (a bug: see the log)",
)
BATCH_LEAVES = Family(
    "berth_operator_batch_leaves_total", "counter", "Batch leaves sent (ONE per scale-down, normally)"
)
MEMBERS_LEFT = Family(
    "berth_operator_members_left_total", "counter", "Instance ids the batch leaves removed from the group"
)
STATIC_RESTARTS = Family(
    "berth_operator_static_restarts_total",
    "counter",
    "Pods that restarted and rejoined the group as themselves without a rebalance (static membership's benefit), as"
    " the coordinator's journal (or, on Kafka, the operator's evidence) tells",
)
ROLLS = Family(
    "berth_operator_rolls_total",
    "counter",
    "Rollouts of the fleet's StatefulSet whose pods restarted (one per roll, counted when it ends)",
)
DEPARTING = Family("berth_operator_departing_members", "gauge", "Instance ids waiting for their batch leave")
READY = Family("berth_operator_fleet_ready", "gauge", "1 when the fleet's Ready condition is True")
REFUSED = Family("berth_operator_fleet_refused", "gauge", "1 while the fleet is refused (SpecValid=False)")
LAG = Family(
    "berth_operator_fleet_lag",
    "gauge",
    "A Kafka fleet's lag: records between its group's committed offsets and the log ends, summed over the partitions"
    " it committed (status.lag.total; per partition in status and berth-groups)",
)
LAG_MAX = Family(
    "berth_operator_fleet_lag_max_partition",
    "gauge",
    "The largest lag of one partition of a Kafka fleet's group (status.lag.maxPartition)",
)
UNRELEASED = Family(
    "berth_operator_unreleased_instances",
    "gauge",
    "Pods of the fleet whose restarted process is refused UNRELEASED_INSTANCE_ID: their previous member still holds"
    " their group.instance.id (KIP-848 groups)",
)
FENCING = Family(
    "berth_operator_fencing_instances",
    "gauge",
    "Instance ids of the fleet two processes fence each other over (member id changing without a restart)",
)
RELEASED = Family(
    "berth_operator_stale_instances_released_total",
    "counter",
    "Stale members removed so a restarted pod could rejoin (spec.coordinator.kafka.releaseStaleInstances)",
)
UNOWNED = Family(
    "berth_operator_fleet_unowned_partitions",
    "gauge",
    "Partitions of the fleet's group's topics that no member owns (status.stuck; known partitions: Kafka's committed"
    " ones and every assigned one)",
)
IDLE = Family(
    "berth_operator_fleet_idle_ready_pods",
    "gauge",
    "Ready pods of the fleet that own no partition while another member owns two or more",
)
STUCK = Family(
    "berth_operator_fleet_group_stuck",
    "gauge",
    "1 while the fleet's GroupStuck condition is True: partitions unowned, or Ready pods idle while others own"
    " several, for longer than --stuck-group-s",
)
#: The per-fleet families, in exposition order.
FLEET_FAMILIES = (
    RECONCILES,
    BATCH_LEAVES,
    MEMBERS_LEFT,
    STATIC_RESTARTS,
    ROLLS,
    DEPARTING,
    READY,
    REFUSED,
    LAG,
    LAG_MAX,
    UNRELEASED,
    FENCING,
    RELEASED,
    UNOWNED,
    IDLE,
    STUCK,
)
LEAVE_DELAY = Family(
    "berth_operator_leave_delay_seconds",
    "histogram",
    "Seconds from the pass that found a scale-down's departing pods gone to the batch leave's answer (the pods went"
    " at most one poll interval, 1 s, before that pass), over every fleet",
)
SCALE_DOWN = Family(
    "berth_operator_scale_down_seconds",
    "histogram",
    "Seconds from a scale-down's start (status.departingSince) to its batch leave's answer, over every fleet",
)

LEADER = Family(
    "berth_operator_leader",
    "gauge",
    "1 while this replica acts (it holds the leader's Lease, or runs without leader election), 0 while it waits as a"
    " standby",
)
ROLLS_IN_PROGRESS = Family(
    "berth_operator_rolls_in_progress",
    "gauge",
    "Fleets whose roll counts against --max-concurrent-rolls now (StatefulSets rolling, and turns just given)",
)
ROLLS_WAITING = Family(
    "berth_operator_rolls_waiting",
    "gauge",
    "Fleets whose changed pod template waits for its turn to roll (TemplateApplied=False, RollQueued)",
)
WATCH_LISTS = Family(
    "berth_operator_watch_lists_total",
    "counter",
    "Complete lists of a watched kind: at start (reason start), and again after its watch expired (410 Gone: reason"
    " expired)",
)
PASS_TRIGGERS = Family(
    "berth_operator_pass_triggers_total",
    "counter",
    "Passes by what asked for them: fleet (its spec, its pause, its first sight), an owned kind and the first field"
    " of the fleet's workload view its change moved (pods/existing, statefulsets/settled, ...; /applied: the"
    " StatefulSet as applied; /object: a Service, budget or claim), journal, advice, turn (a turn to roll offered),"
    " or the queue's own timing"
    " (timer/resync, timer/interval, timer/waiting, timer/refused, timer/retry, timer/again)",
)

#: Every family the operator exports.
FAMILIES = (
    *FLEET_FAMILIES,
    LEAVE_DELAY,
    SCALE_DOWN,
    LEADER,
    ROLLS_IN_PROGRESS,
    ROLLS_WAITING,
    WATCH_LISTS,
    PASS_TRIGGERS,
)


def _number(value: float) -> str:
    return repr(float(value))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class _Fleet:
    labels: str  # fleet="...",namespace="..."
    reconciles: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    batch_leaves: int = 0
    members_left: int = 0
    static_restarts: int = 0
    rolls: int = 0
    departing: int = 0
    ready: int = 0
    refused: int = 0
    lag: int = 0
    lag_max: int = 0
    unreleased: int = 0
    fencing: int = 0
    released: int = 0
    unowned: int = 0
    idle: int = 0
    stuck: int = 0
    version: int = 0
    rendered: tuple[int, tuple[str, ...]] | None = None  # (version, one block per family)

    def render(self) -> tuple[str, ...]:
        reconciles = "".join(
            f'{RECONCILES.name}{{{self.labels},outcome="{outcome}"}} {_number(count)}\n'
            for outcome, count in self.reconciles.items()
        )
        values = (
            self.batch_leaves,
            self.members_left,
            self.static_restarts,
            self.rolls,
            self.departing,
            self.ready,
            self.refused,
            self.lag,
            self.lag_max,
            self.unreleased,
            self.fencing,
            self.released,
            self.unowned,
            self.idle,
            self.stuck,
        )
        singles = tuple(
            f"{family.name}{{{self.labels}}} {_number(value)}\n"
            for family, value in zip(FLEET_FAMILIES[1:], values, strict=True)
        )
        return (reconciles, *singles)


class _Histogram:
    def __init__(self, family: Family, buckets: Sequence[float]) -> None:
        self.family = family
        self.bounds = tuple(float(bound) for bound in buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds) if value <= bound), len(self.bounds))
        self.counts[index] += 1
        self.sum += value

    def render(self) -> str:
        lines, cumulative = [self.family.header()], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else _number(bound)
            lines.append(f'{self.family.name}_bucket{{le="{le}"}} {_number(cumulative)}\n')
        lines.append(f"{self.family.name}_count {_number(cumulative)}\n{self.family.name}_sum {_number(self.sum)}\n")
        return "".join(lines)


class OperatorMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fleets: dict[tuple[str, str], _Fleet] = {}
        self._leave_delay = _Histogram(LEAVE_DELAY, LEAVE_DELAY_BUCKETS)
        self._scale_down = _Histogram(SCALE_DOWN, SCALE_DOWN_BUCKETS)
        self._leading = 0
        self._rolls = (0, 0)  # (in progress, waiting)
        self._lists: dict[tuple[str, str], int] = {}
        self._triggers: dict[str, int] = {}  # bounded: the sources and view fields are a fixed set

    def _fleet(self, namespace: str, fleet: str) -> _Fleet:
        """The fleet's record (created at 0); call with the lock held."""
        found = self._fleets.get((namespace, fleet))
        if found is None:
            found = _Fleet(f'fleet="{_label(fleet)}",namespace="{_label(namespace)}"')
            self._fleets[(namespace, fleet)] = found
        found.version += 1
        return found

    def pass_done(self, namespace: str, fleet: str, outcome: str) -> None:
        if outcome not in OUTCOMES:
            return
        with self._lock:
            self._fleet(namespace, fleet).reconciles[outcome] += 1

    def left(self, namespace: str, fleet: str, removed: int, delay_s: float, since_start_s: float | None) -> None:
        with self._lock:
            record = self._fleet(namespace, fleet)
            record.batch_leaves += 1
            record.members_left += removed
            self._leave_delay.observe(delay_s)
            if since_start_s is not None:
                self._scale_down.observe(since_start_s)

    def restarted(self, namespace: str, fleet: str, *, static: int, rolls: int) -> None:
        with self._lock:
            record = self._fleet(namespace, fleet)
            record.static_restarts += static
            record.rolls += rolls

    def state(self, namespace: str, fleet: str, *, ready: bool, refused: bool, departing: int) -> None:
        with self._lock:
            record = self._fleets.get((namespace, fleet))
            values = (1 if ready else 0, 1 if refused else 0, departing)
            if record is not None and (record.ready, record.refused, record.departing) == values:
                return  # an idle fleet's pass changes nothing: its rendered lines stay valid
            record = self._fleet(namespace, fleet)
            record.ready, record.refused, record.departing = values

    def lag(self, namespace: str, fleet: str, *, total: int, max_partition: int) -> None:
        with self._lock:
            record = self._fleets.get((namespace, fleet))
            if record is not None and (record.lag, record.lag_max) == (total, max_partition):
                return
            record = self._fleet(namespace, fleet)
            record.lag, record.lag_max = total, max_partition

    def conflicts(self, namespace: str, fleet: str, *, unreleased: int, fencing: int, released: int = 0) -> None:
        with self._lock:
            record = self._fleets.get((namespace, fleet))
            if record is not None and (record.unreleased, record.fencing, released) == (unreleased, fencing, 0):
                return
            record = self._fleet(namespace, fleet)
            record.unreleased, record.fencing = unreleased, fencing
            record.released += released

    def ownership(self, namespace: str, fleet: str, *, unowned: int, idle: int, stuck: bool) -> None:
        with self._lock:
            values = (unowned, idle, 1 if stuck else 0)
            record = self._fleets.get((namespace, fleet))
            if record is not None and (record.unowned, record.idle, record.stuck) == values:
                return
            record = self._fleet(namespace, fleet)
            record.unowned, record.idle, record.stuck = values

    def leading(self, leading: bool) -> None:
        with self._lock:
            self._leading = 1 if leading else 0

    def rolls_counted(self, in_progress: int, waiting: int) -> None:
        """The roll pacer's counts (``planners.roll_pacing``)."""
        with self._lock:
            self._rolls = (in_progress, waiting)

    def listed(self, resource: str, reason: str) -> None:
        with self._lock:
            self._lists[(resource, reason)] = self._lists.get((resource, reason), 0) + 1

    def triggered(self, trigger: str) -> None:
        with self._lock:
            self._triggers[trigger] = self._triggers.get(trigger, 0) + 1

    def forget(self, namespace: str, fleet: str) -> None:
        """Remove a released fleet's series (bounded cardinality: only existing fleets have series)."""
        with self._lock:
            self._fleets.pop((namespace, fleet), None)

    def series_per_fleet(self) -> int:
        return len(OUTCOMES) + len(FLEET_FAMILIES) - 1

    def exposition(self) -> bytes:
        """Prometheus' text format: each fleet's cached lines, rendered again only where it changed. Called by the
        metrics thread; the lock is held only to copy references, never while formatting."""
        with self._lock:
            fleets = list(self._fleets.values())
            histograms = self._leave_delay.render() + self._scale_down.render()
            leader = f"{LEADER.header()}{LEADER.name} {_number(self._leading)}\n"
            leader += "".join(
                f"{family.header()}{family.name} {_number(value)}\n"
                for family, value in zip((ROLLS_IN_PROGRESS, ROLLS_WAITING), self._rolls, strict=True)
            )
            lists = WATCH_LISTS.header() + "".join(
                f'{WATCH_LISTS.name}{{resource="{_label(resource)}",reason="{_label(reason)}"}} {_number(count)}\n'
                for (resource, reason), count in sorted(self._lists.items())
            )
            lists += PASS_TRIGGERS.header() + "".join(
                f'{PASS_TRIGGERS.name}{{trigger="{_label(trigger)}"}} {_number(count)}\n'
                for trigger, count in sorted(self._triggers.items())
            )
        blocks: list[tuple[str, ...]] = []
        for record in fleets:
            version, rendered = record.version, record.rendered
            if rendered is None or rendered[0] != version:
                rendered = (version, record.render())  # a change meanwhile bumps version: rendered again next time
                record.rendered = rendered
            blocks.append(rendered[1])
        parts = [histograms, leader, lists]
        for index, family in enumerate(FLEET_FAMILIES):
            parts.append(family.header())
            parts.extend(block[index] for block in blocks)
        return "".join(parts).encode()


class _Handler(BaseHTTPRequestHandler):
    metrics: OperatorMetrics

    def do_GET(self) -> None:  # http.server's name for it
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        body = self.metrics.exposition()
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # http.server's signature
        return  # scrapes are not worth a log line each


@asynccontextmanager
async def serving(metrics: OperatorMetrics, port: int, host: str = "0.0.0.0") -> AsyncIterator[None]:
    """``GET /metrics`` on ``port`` while the block runs, from a thread of its own (nothing when ``port`` is 0)."""
    if not port:
        yield
        return
    handler = type("MetricsHandler", (_Handler,), {"metrics": metrics})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="berth-metrics", daemon=True)
    thread.start()
    try:
        yield
    finally:
        await asyncio.to_thread(server.shutdown)
        with contextlib.suppress(OSError):
            server.server_close()
