"""``/metrics`` (docs/api.md §10 "Metrics"): every family declared once with its ``# HELP`` and ``# TYPE``, request
latency histograms, the network edge's counters, the coordinator's gauges and the bounded per-group series
(``group_metrics``), exposed through prometheus-client.

Recording a request costs a bisect and three increments on its route's ``RouteStats`` (the low-level front keeps
a reference to it per route); the gauges are computed at scrape time from the core (O(groups)), so nothing on the
request path maintains them. At a scrape ``Exposition``, a prometheus-client custom collector, yields every family of
``FAMILIES`` in that order with the samples of the moment, and prometheus-client writes the text format (0.0.4). A
family is exposed with its HELP and TYPE even when it has no sample yet, so a dashboard or an alert rule can rely on
every documented name being there.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

from berth.coordinator.http.group_metrics import GroupMetrics, GroupQuota, Sample

BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

#: name -> (type, help). The one list of what /metrics exports; docs/api.md §10 lists the same names.
FAMILIES: dict[str, tuple[str, str]] = {
    "berth_ready": ("gauge", "1 while /readyz is 200: loaded, serving, not stopping, and the store takes writes"),
    "berth_active": (
        "gauge",
        "1 while this replica is the one that acts (loaded; on a replicated store, holding the leader lease)",
    ),
    "berth_terms_total": (
        "counter",
        "Terms this process has acted in: 1 for the single replica; on a replicated store, each takeover",
    ),
    "berth_groups": ("gauge", "Groups by state"),
    "berth_members": ("gauge", "Members of all groups"),
    "berth_groups_refused_total": ("counter", "Requests refused because they would create a group beyond --max-groups"),
    "berth_rebalances_total": ("counter", "Rebalances started, by cause"),
    "berth_rebalance_duration_seconds": (
        "histogram",
        "How long rebalances of all groups took: from rebalance_started to the assignment stored (members consume"
        " nothing meanwhile)",
    ),
    "berth_fenced_members_total": (
        "counter",
        "Answers carrying FENCED_INSTANCE_ID (82): a member id superseded by a newer member with the same"
        " group.instance.id (KIP-345), counted per answer",
    ),
    "berth_parked_requests": ("gauge", "Requests waiting for their answer (join and sync long-polls, durable writes)"),
    "berth_store_writes_in_flight": ("gauge", "Writes handed to the store and not yet durable"),
    "berth_parked_journal_polls": ("gauge", "Journal long-polls waiting for an event"),
    "berth_store_write_failures_total": ("counter", "Store writes that failed (answered COORDINATOR_NOT_AVAILABLE)"),
    "berth_store_transaction_seconds": (
        "histogram",
        "How long the store took to commit each transaction of writes: SQLite's statements and fsync, or etcd's"
        " round trip (resends included); this term's",
    ),
    "berth_store_transaction_writes_total": (
        "counter",
        "Writes carried by committed transactions (over berth_store_transaction_seconds_count: writes per"
        " transaction, what group commit shares); this term's",
    ),
    "berth_store_preparing_seconds_total": (
        "counter",
        "Time the writer spent turning queued writes into a transaction's rows, with none in flight; this term's",
    ),
    "berth_journal_bytes": ("gauge", "Bytes of journal events retained (what --journal-retention-bytes bounds)"),
    "berth_journal_retention_bytes": ("gauge", "The journal's byte bound, --journal-retention-bytes (0: none)"),
    "berth_journal_oldest_event_timestamp_seconds": (
        "gauge",
        "When the oldest retained journal event happened (the coordinator's clock); absent while there is none",
    ),
    "berth_http_responses_total": ("counter", "HTTP answers by route (OpenAPI operation id) and status"),
    "berth_http_request_duration_seconds": ("histogram", "Time from a request's head to its answer, by route"),
    "berth_http_connections": ("gauge", "Open HTTP connections, by listener (api, probes)"),
    "berth_http_connections_refused_total": (
        "counter",
        "Connections refused and closed, by reason (max_connections, per_client)",
    ),
    "berth_http_header_timeouts_total": (
        "counter",
        "Connections closed because a request head was not complete in time",
    ),
    "berth_http_malformed_requests_total": ("counter", "Requests the HTTP parser refused (answered 4xx and closed)"),
    "berth_auth_failures_total": ("counter", "Refused credentials, by reason (missing, malformed, unknown, forbidden)"),
    "berth_tls_reloads_total": ("counter", "Certificate reloads after the files changed, by result (ok, failed)"),
    "berth_tls_certificate_loaded_timestamp_seconds": ("gauge", "When the certificate being served was loaded"),
    "berth_group_state": ("gauge", "1 for the group's current state (per-group series: bounded, see omitted)"),
    "berth_group_members": ("gauge", "Members of the group"),
    "berth_group_generation": ("gauge", "The group's generation"),
    "berth_group_fenced_members_total": (
        "counter",
        "Answers carrying FENCED_INSTANCE_ID (82) in the group since it was created or the coordinator started",
    ),
    "berth_group_rebalances_total": ("counter", "Rebalances the group started, by cause"),
    "berth_group_rebalance_duration_seconds": (
        "histogram",
        "How long the group's rebalances took: from rebalance_started to the assignment stored",
    ),
    "berth_group_join_duration_seconds": ("histogram", "Time from a JoinGroup request to its answer (a long-poll)"),
    "berth_group_sync_duration_seconds": ("histogram", "Time from a SyncGroup request to its answer (a long-poll)"),
    "berth_metrics_groups_exported": ("gauge", "Groups that have per-group series (at most --metrics-max-groups)"),
    "berth_metrics_groups_omitted": ("gauge", "Groups without per-group series because every slot is taken"),
}

_SUFFIXES = ("_bucket", "_sum", "_count")


class RouteStats:
    """One route's latency histogram and responses by HTTP status."""

    __slots__ = ("counts", "statuses", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_S) + 1)
        self.sum = 0.0
        self.statuses: dict[int, int] = {}

    def observe(self, status: int, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS_S, seconds)] += 1
        self.sum += seconds
        statuses = self.statuses
        statuses[status] = statuses.get(status, 0) + 1


@dataclass
class EdgeStats:
    """What the network edge counts: connections, refusals, timeouts, malformed requests, auth and TLS."""

    open_connections: dict[str, int] = field(default_factory=lambda: {"api": 0})
    refused: dict[str, int] = field(default_factory=dict)
    header_timeouts: int = 0
    malformed: int = 0
    auth_failures: dict[str, int] = field(default_factory=dict)
    tls_reloads: dict[str, int] = field(default_factory=dict)
    tls_loaded_at: float | None = None

    def samples(self) -> list[Sample]:
        rows: list[Sample] = [
            ("berth_http_connections", {"listener": name}, n) for name, n in sorted(self.open_connections.items())
        ]
        rows += [("berth_http_connections_refused_total", {"reason": r}, n) for r, n in sorted(self.refused.items())]
        rows.append(("berth_http_header_timeouts_total", {}, self.header_timeouts))
        rows.append(("berth_http_malformed_requests_total", {}, self.malformed))
        rows += [("berth_auth_failures_total", {"reason": r}, n) for r, n in sorted(self.auth_failures.items())]
        rows += [("berth_tls_reloads_total", {"result": r}, n) for r, n in sorted(self.tls_reloads.items())]
        if self.tls_loaded_at is not None:
            rows.append(("berth_tls_certificate_loaded_timestamp_seconds", {}, self.tls_loaded_at))
        return rows


def count(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


class Metrics:
    def __init__(
        self, max_groups: int = 200, max_groups_per_tenant: int = 0, quota_of: GroupQuota | None = None
    ) -> None:
        self.routes: dict[str, RouteStats] = {}
        self.write_failures = 0
        self.edge = EdgeStats()
        self.groups = GroupMetrics(max_groups, max_groups_per_tenant, quota_of or (lambda _: ""))

    def route(self, name: str) -> RouteStats:
        stats = self.routes.get(name)
        if stats is None:
            stats = self.routes[name] = RouteStats()
        return stats

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        self.route(route).observe(status, seconds)

    def exposition(self, gauges: Callable[[], Iterable[Sample]]) -> bytes:
        """The text format (0.0.4). ``gauges`` yields (sample name, labels, value) for the coordinator's figures."""
        return generate_latest(Exposition(self, gauges))

    def samples(self) -> list[Sample]:
        """What the recorders hold: requests by route, the network edge, failed writes."""
        failures: Sample = ("berth_store_write_failures_total", {}, self.write_failures)
        return [*self._request_samples(), *self.edge.samples(), failures]

    def _request_samples(self) -> list[Sample]:
        rows: list[Sample] = []
        for route, stats in sorted(self.routes.items()):
            for status, n in sorted(stats.statuses.items()):
                rows.append(("berth_http_responses_total", {"route": route, "status": str(status)}, n))
        for route, h in sorted(self.routes.items()):
            cumulative = 0
            for bound, n in zip((*BUCKETS_S, float("inf")), h.counts, strict=True):
                cumulative += n
                le = "+Inf" if bound == float("inf") else repr(bound)
                rows.append(("berth_http_request_duration_seconds_bucket", {"route": route, "le": le}, cumulative))
            rows.append(("berth_http_request_duration_seconds_sum", {"route": route}, round(h.sum, 6)))
            rows.append(("berth_http_request_duration_seconds_count", {"route": route}, cumulative))
        return rows


class Exposition:
    """A prometheus-client custom collector: ``FAMILIES`` with the samples of one scrape."""

    def __init__(self, metrics: Metrics, gauges: Callable[[], Iterable[Sample]]) -> None:
        self.metrics = metrics
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        # prometheus-client names a counter family without its _total (the text format adds it back).
        families = {
            name: Metric(name.removesuffix("_total") if kind == "counter" else name, help_text, kind)
            for name, (kind, help_text) in FAMILIES.items()
        }
        for name, labels, value in [*self.gauges(), *self.metrics.samples()]:
            families[family_of(name)].add_sample(name, labels, value)
        yield from families.values()


def family_of(sample_name: str) -> str:
    """The family a sample belongs to: a histogram's ``_bucket``/``_sum``/``_count`` samples belong to its name."""
    if sample_name in FAMILIES:
        return sample_name
    for suffix in _SUFFIXES:
        if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in FAMILIES:
            return sample_name[: -len(suffix)]
    raise KeyError(f"{sample_name}: not a sample of a declared family (FAMILIES)")
