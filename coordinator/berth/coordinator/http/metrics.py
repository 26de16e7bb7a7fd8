"""Prometheus text exposition for ``/metrics``: request latency histograms and the coordinator's gauges.

Recording a request costs a bisect and three increments on its route's ``RouteStats`` (the low-level front keeps
a reference to it per route); the gauges are computed at scrape time from the core (O(groups)), so nothing on the
request path maintains them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


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


class Metrics:
    def __init__(self) -> None:
        self.routes: dict[str, RouteStats] = {}
        self.write_failures = 0

    def route(self, name: str) -> RouteStats:
        stats = self.routes.get(name)
        if stats is None:
            stats = self.routes[name] = RouteStats()
        return stats

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        self.route(route).observe(status, seconds)

    def render(self, gauges: Callable[[], list[tuple[str, str, dict[str, str], float]]]) -> str:
        """Text format 0.0.4. ``gauges`` yields (name, type, labels, value) for the coordinator's own figures."""
        lines: list[str] = []
        declared: set[str] = set()
        for name, kind, labels, value in gauges():
            if name not in declared:
                lines.append(f"# TYPE {name} {kind}")
                declared.add(name)
            lines.append(f"{name}{_labels(labels)} {_number(value)}")
        lines.append("# TYPE berth_http_responses_total counter")
        for route, stats in sorted(self.routes.items()):
            for status, count in sorted(stats.statuses.items()):
                lines.append(f'berth_http_responses_total{{route="{route}",status="{status}"}} {count}')
        lines.append("# TYPE berth_http_request_duration_seconds histogram")
        for route, h in sorted(self.routes.items()):
            cumulative = 0
            for bound, count in zip((*BUCKETS_S, float("inf")), h.counts, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(f'berth_http_request_duration_seconds_bucket{{route="{route}",le="{le}"}} {cumulative}')
            lines.append(f'berth_http_request_duration_seconds_sum{{route="{route}"}} {h.sum:.6f}')
            lines.append(f'berth_http_request_duration_seconds_count{{route="{route}"}} {cumulative}')
        lines.append("# TYPE berth_store_write_failures_total counter")
        lines.append(f"berth_store_write_failures_total {self.write_failures}")
        return "\n".join(lines) + "\n"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
