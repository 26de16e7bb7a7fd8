"""The operations answers: liveness, readiness and the Prometheus text (docs/api.md §2, §10 "Metrics").

Shared by the application's views and the probe listener (``probes``), so ``/healthz``, ``/readyz`` and
``/metrics`` answer the same on either port. The gauges are read from the core at scrape time; the per-group
series are bounded by ``--metrics-max-groups`` (``group_metrics``).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from berth.coordinator.http.engine import Engine
from berth.coordinator.http.group_metrics import GroupFigureRow, Sample, histogram_samples
from berth.coordinator.http.responses import json_response, struct_response
from berth.coordinator.http.state import CoordinatorServer
from berth.coordinator.protocol import StatusResponse
from berth.coordinator.protocol.codec import encode
from berth.coordinator.store import TRANSACTION_BUCKETS_S, TransactionStats

_OK = encode(StatusResponse("ok"))
_READY = encode(StatusResponse("ready"))
_STOPPING = StatusResponse("stopping")
_LOADING = StatusResponse("loading")
_STANDBY = StatusResponse("standby")


def liveness() -> web.Response:
    return json_response(_OK)


def readiness(state: CoordinatorServer) -> web.Response:
    """Ready once loaded, until stopping, while the store takes writes, and on a replicated store only on the
    active replica (docs/api.md §10): a standby is 503 ``standby``, so the Service sends it nobody.

    While the last transaction failed (a full or read-only disk, etcd out of reach or out of space) the answer is
    503 ``store failing`` with the store's reason, and each probe of it queues a small write, so that readiness
    comes back once the store does even when no client (kept away by the failed probe) writes anything. It is
    503 ``store failing`` too while a group unloaded after a failed write cannot be read back (its requests are
    refused meanwhile)."""
    if state.stopping:
        return struct_response(_STOPPING, status=503)
    engine = state.running_engine
    if engine is None or not engine.ready:
        standby = state.leadership.replicated and not state.loading_term
        return struct_response(_STANDBY if standby else _LOADING, status=503)
    if engine.closing:
        return struct_response(_STOPPING, status=503)
    failure = store_failure(engine)
    if failure:
        return struct_response(StatusResponse("store failing", failure), status=503)
    return json_response(_READY)


def store_failure(engine: Engine) -> str:
    """Why the store keeps this coordinator from serving (empty while it does not): the last transaction failed
    (a probe write is queued, to see it recover), or a group could not be read back after a failed write."""
    writer = engine.writer
    if not writer.healthy:
        writer.probe()
        return writer.failure
    return engine.unreadable


def prometheus_text(state: CoordinatorServer) -> web.Response:
    body = state.metrics.exposition(lambda: gauges(state))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def gauges(state: CoordinatorServer) -> list[Sample]:
    core = state.core
    by_state = core.groups_by_state()
    rows: list[Sample] = [
        ("berth_groups", {"state": name}, by_state.get(name, 0))
        for name in ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")
    ]
    rows.append(("berth_members", {}, core.member_count()))
    rows.append(("berth_groups_refused_total", {}, core.groups_refused))
    rows.append(("berth_fenced_members_total", {}, core.fenced_answers))
    rows.extend(
        ("berth_rebalances_total", {"cause": cause}, n) for cause, n in sorted(core.rebalances_by_cause.items())
    )
    engine = state.running_engine
    if engine is not None:
        rows.append(("berth_parked_requests", {}, engine.parked))
        rows.append(("berth_store_writes_in_flight", {}, engine.writes_in_flight))
        rows.extend(store_transactions(engine.writer.stats))
    rows.append(("berth_parked_journal_polls", {}, state.journal_polls.parked))
    active = engine is not None and engine.ready and not engine.closing and not state.stopping
    rows.append(("berth_ready", {}, 1 if active and engine is not None and not store_failure(engine) else 0))
    rows.append(("berth_active", {}, 1 if active else 0))
    rows.append(("berth_terms_total", {}, state.terms))
    rows.extend(journal_size(state))
    rows.extend(per_group(state))
    return rows


def store_transactions(stats: TransactionStats) -> list[Sample]:
    """What this term's writer took per committed transaction (docs/api.md §10): the store's time, the writes they
    carried, the writer's preparing time."""
    counts = list(stats.counts)  # the writer thread may count one more meanwhile: the copy stays consistent
    return [
        *histogram_samples("berth_store_transaction_seconds", {}, TRANSACTION_BUCKETS_S, counts, stats.seconds),
        ("berth_store_transaction_writes_total", {}, stats.writes),
        ("berth_store_preparing_seconds_total", {}, stats.preparing_seconds),
    ]


def journal_size(state: CoordinatorServer) -> list[Sample]:
    """The journal against its bound (docs/api.md §10): the store's in-memory figures, no scan. The oldest event's
    time is absent while the journal holds no event."""
    size = state.journal.journal_size()
    rows: list[Sample] = [
        ("berth_journal_bytes", {}, size.bytes),
        ("berth_journal_retention_bytes", {}, size.retention_bytes),
    ]
    if size.oldest_ts_ms is not None:
        rows.append(("berth_journal_oldest_event_timestamp_seconds", {}, size.oldest_ts_ms / 1000))
    return rows


def per_group(state: CoordinatorServer) -> list[Sample]:
    groups = state.core.groups

    def figures(group_id: str) -> GroupFigureRow | None:
        group = groups.get(group_id)  # type: ignore[call-overload]  # a GroupId is a str
        if group is None:
            return None
        return (group.state.value, len(group.members), group.generation_id, group.fenced_answers)

    tracked = state.metrics.groups
    tracked.refresh(groups, len(groups), figures)
    return tracked.samples(figures)
