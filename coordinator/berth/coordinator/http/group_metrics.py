"""Per-group Prometheus series with a bounded number of groups (docs/api.md §10 "Metrics").

Owns ``GroupMetrics``: each group's state, member count, generation, fenced answers, rebalances by cause, how long
its rebalances took, and join and sync latency histograms. Rules:

- Cardinality is bounded: at most ``max_groups`` groups have per-group series. A group takes a slot when it is
  first seen (at start in load order, then when it first rebalances or is first scraped with a slot free) and keeps
  it until it no longer exists (deleted or expired); then the slot goes to the next group. Groups without a slot
  are counted in ``berth_metrics_groups_omitted`` and appear only in the aggregate series. A slot never moves
  between live groups, so a series never jumps from one group to another between scrapes.
- No tenant can take the slots of the others (issue 22, point 7): the groups one non-admin token created hold at
  most ``max_per_tenant`` slots, and all such groups together at most half of them; the other half is kept for the
  groups the alerts are for, those owned by a fleet (docs/api.md §7a) or created by an admin, which take any free
  slot.
- A rebalance lasts from its ``rebalance_started`` to the group's next ``assignment_stored`` (docs/formats.md), on the
  journal's clock: the time its members consumed nothing. One superseded by another start lasts until the
  assignment that ends them both; one ended by the group emptying or being deleted is not a duration. Observed per
  group (``berth_group_rebalance_duration_seconds``, groups with a slot) and for all groups
  (``berth_rebalance_duration_seconds``), so a group without a slot still counts in the second.
- Recording is cheap (a dict lookup, a bisect); the gauges are read at scrape time from the caller's groups.
- Nothing here knows the core: the caller hands in group ids, a way to read a group's figures and a way to tell
  whose quota a group takes (``GroupQuota``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

from berth.coordinator.core.events import RebalanceCause

#: Join and sync answers wait for the rebalance: their buckets reach the rebalance timeout's range.
GROUP_BUCKETS_S = (0.01, 0.05, 0.25, 1.0, 3.0, 10.0, 30.0, 60.0, 300.0)
#: A rebalance lasts from a fraction of a second (every member heartbeating often) to the rebalance timeout.
REBALANCE_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

Sample = tuple[str, dict[str, str], float]


class Histogram:
    __slots__ = ("buckets", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.buckets, seconds)] += 1
        self.sum += seconds

    def samples(self, name: str, labels: dict[str, str]) -> list[Sample]:
        return histogram_samples(name, labels, self.buckets, self.counts, self.sum)


def histogram_samples(
    name: str, labels: dict[str, str], buckets: tuple[float, ...], counts: list[int], total: float
) -> list[Sample]:
    """A histogram's series: cumulative ``_bucket`` per upper bound (``counts`` has one more, for +Inf), ``_sum`` and
    ``_count``."""
    rows: list[Sample] = []
    cumulative = 0
    for bound, count in zip((*buckets, float("inf")), counts, strict=True):
        cumulative += count
        rows.append((f"{name}_bucket", {**labels, "le": "+Inf" if bound == float("inf") else repr(bound)}, cumulative))
    rows.append((f"{name}_sum", labels, total))
    rows.append((f"{name}_count", labels, cumulative))
    return rows


_CAUSES = sorted(cause.value for cause in RebalanceCause)


class GroupSeries:
    """The counters of one group holding a slot, and whose quota the slot counts in ("": none)."""

    __slots__ = ("durations", "join", "quota", "rebalances", "sync")

    def __init__(self, quota: str = "") -> None:
        self.quota = quota
        # Every cause from 0, so that a group's first rebalance of a cause is an increase Prometheus can see
        # (a counter series born at 1 hides its first event from rate() and increase()).
        self.rebalances: dict[str, int] = dict.fromkeys(_CAUSES, 0)
        self.durations = Histogram(REBALANCE_BUCKETS_S)
        self.join = Histogram(GROUP_BUCKETS_S)
        self.sync = Histogram(GROUP_BUCKETS_S)


#: (state, members, generation, FENCED_INSTANCE_ID answers) of a live group.
GroupFigureRow = tuple[str, int, int, int]
#: A live group's figures, or None when it no longer exists.
GroupFigures = Callable[[str], GroupFigureRow | None]
#: Whose quota a live group's slot counts in: its tenant's name, "" for a fleet's or an admin's group (no quota);
#: None when the group does not exist.
GroupQuota = Callable[[str], str | None]


class GroupMetrics:
    def __init__(self, max_groups: int, max_per_tenant: int = 0, quota_of: GroupQuota = lambda _: "") -> None:
        self.max_groups = max_groups
        self.max_per_tenant = max_per_tenant
        self.quota_of = quota_of
        self.series: dict[str, GroupSeries] = {}
        self.omitted = 0
        self._held: dict[str, int] = {}  # slots per tenant
        self._held_by_tenants = 0
        self.durations = Histogram(REBALANCE_BUCKETS_S)  # every group's, with a slot or not
        self._started_ms: dict[str, int] = {}  # groups rebalancing -> when their rebalance started

    def slot(self, group_id: str) -> GroupSeries | None:
        """The group's series, taking a free slot if it has none and its quota allows; None otherwise."""
        series = self.series.get(group_id)
        if series is not None or len(self.series) >= self.max_groups:
            return series
        quota = self.quota_of(group_id)
        if quota is None:
            return None  # not a group (any more)
        if quota and self.max_per_tenant:
            if self._held.get(quota, 0) >= self.max_per_tenant or 2 * self._held_by_tenants >= self.max_groups:
                return None
            self._held[quota] = self._held.get(quota, 0) + 1
            self._held_by_tenants += 1
        series = self.series[group_id] = GroupSeries(quota if self.max_per_tenant else "")
        return series

    def _free(self, group_id: str) -> None:
        quota = self.series.pop(group_id).quota
        if quota:
            self._held_by_tenants -= 1
            left = self._held[quota] - 1
            if left:
                self._held[quota] = left
            else:
                del self._held[quota]

    def rebalance(self, group_id: str, cause: str, at_ms: int | None = None) -> None:
        series = self.slot(group_id)
        if series is not None:
            series.rebalances[cause] = series.rebalances.get(cause, 0) + 1
        if at_ms is not None:
            self._started_ms.setdefault(group_id, at_ms)  # a superseding start does not restart the pause

    def rebalanced(self, group_id: str, at_ms: int) -> None:
        """The group stored its leader's assignment at ``at_ms``: a rebalance since its start is over."""
        started = self._started_ms.pop(group_id, None)
        if started is None:
            return
        seconds = max(0, at_ms - started) / 1000
        self.durations.observe(seconds)
        series = self.series.get(group_id)
        if series is not None:
            series.durations.observe(seconds)

    def stopped(self, group_id: str) -> None:
        """The group emptied or is gone: a rebalance under way ends without a duration."""
        self._started_ms.pop(group_id, None)

    def observe(self, operation: str, group_id: str, seconds: float) -> None:
        """A join or sync answered after ``seconds``."""
        series = self.slot(group_id)
        if series is not None:
            (series.join if operation == "join" else series.sync).observe(seconds)

    def refresh(self, live: Iterable[str], count: int, figures: GroupFigures) -> None:
        """At scrape time: free the slots of groups that are gone, give free slots to live groups in order."""
        for group_id in [g for g in self.series if figures(g) is None]:
            self._free(group_id)
        if len(self.series) < self.max_groups:
            for group_id in live:
                if len(self.series) >= self.max_groups:
                    break
                self.slot(group_id)
        self.omitted = max(0, count - len(self.series))

    def samples(self, figures: GroupFigures) -> list[Sample]:
        rows: list[Sample] = []
        for group_id, series in self.series.items():
            current = figures(group_id)
            if current is None:
                continue
            state, members, generation, fenced = current
            group = {"group": group_id}
            rows.append(("berth_group_state", {**group, "state": state}, 1))
            rows.append(("berth_group_members", group, members))
            rows.append(("berth_group_generation", group, generation))
            rows.append(("berth_group_fenced_members_total", group, fenced))
            rows.extend(
                ("berth_group_rebalances_total", {**group, "cause": cause}, n)
                for cause, n in sorted(series.rebalances.items())
            )
            rows.extend(series.durations.samples("berth_group_rebalance_duration_seconds", group))
            rows.extend(series.join.samples("berth_group_join_duration_seconds", group))
            rows.extend(series.sync.samples("berth_group_sync_duration_seconds", group))
        rows.extend(self.durations.samples("berth_rebalance_duration_seconds", {}))
        rows.append(("berth_metrics_groups_exported", {}, len(self.series)))
        rows.append(("berth_metrics_groups_omitted", {}, self.omitted))
        return rows
