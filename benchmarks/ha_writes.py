"""Durable writes on the replicated store (etcd) and on SQLite, side by side: the one measurement ``failover`` and
``durable_writes`` both report (docs/high-availability.md, "Throughput").

``side_by_side`` runs ``writes_loadgen`` (64 connections: static replacements in one 64-member group, and commits of
50 partitions, each connection to a group of its own) against a SQLite coordinator and the active replica of a
3-member etcd cluster (fsync on), alternating, ``runs`` times each, on the same machine at the same time, neither
coordinator pinned (the etcd members need the cores too). Besides the rates and their ratio it records what
explains the ratio, per write:

- ``writes_per_etcd_transaction``: the writes done over the etcd transactions they took (the cluster's revision
  moves by one per transaction), which says whether group commit batches them (it does: everything queued while a
  transaction is in flight goes into the next one);
- ``cpu_us_per_write``: CPU of the coordinator, of the three etcd members together and of the load generator per
  write done: on a machine of 2 cores the etcd members' CPU is what the replicated store costs the others;
- ``per_transaction``: from each coordinator's ``/metrics`` (docs/api.md §10, ``berth_store_transaction_*``), the
  median over runs of the milliseconds the store took per transaction (SQLite's statements and fsync; etcd's round
  trip), the milliseconds the writer spent preparing one with none in flight, the writes one carried, and the
  writer's whole cycle (the load's window over its transactions) with what is left of it once those two are taken
  out: the writer waiting for a write with nothing queued. With one transaction in flight at a time, the writes
  over the cycle are the rate; a writer that waits is held by the requests reaching it, not by its store;
- ``load_average``: the machine's 1-minute load average before each run. A ratio measured side by side holds when
  the machine is busy; the absolute rates do not.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.common import Coordinator, cpu_seconds, progress, spread
from benchmarks.heartbeat import form_groups
from benchmarks.writes_loadgen import CLIENTS, PARTITIONS_PER_COMMIT, load
from berth.coordinator.store.etcd.client import EtcdClient
from berth.operator.local.etcd_cluster import EtcdCluster
from berth.operator.local.replicas import Replicas

KINDS = ("replace", "commit")


@dataclass(frozen=True)
class Target:
    """A coordinator to load: its URL and process id."""

    url: str
    pid: int


#: The writer's figures read from a coordinator's /metrics (docs/api.md §10).
STORE_FIGURES = (
    "berth_store_transaction_seconds_count",
    "berth_store_transaction_seconds_sum",
    "berth_store_transaction_writes_total",
    "berth_store_preparing_seconds_total",
)


def store_figures(url: str) -> dict[str, float]:
    """The writer's figures of the coordinator at ``url``, from its ``/metrics``."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    samples = (sample for family in text_string_to_metric_families(text) for sample in family.samples)
    found = {sample.name: sample.value for sample in samples if sample.name in STORE_FIGURES}
    return {name: found.get(name, 0.0) for name in STORE_FIGURES}


def per_transaction(before: dict[str, float], after: dict[str, float], window_s: float) -> dict[str, float]:
    """Between two readings of ``store_figures`` around a load of ``window_s`` seconds: the store's and the writer's
    milliseconds per transaction, the writes one carried, and the writer's whole cycle (the window over the
    transactions) with what is left of it once the store and the preparing are taken out: the writer waiting for a
    write with nothing queued (and reporting its answers, a few microseconds)."""
    count, seconds, writes, preparing = (after[name] - before[name] for name in STORE_FIGURES)
    count = max(1.0, count)
    store_ms, preparing_ms, cycle_ms = seconds / count * 1e3, preparing / count * 1e3, window_s / count * 1e3
    return {
        "store_ms": store_ms,
        "preparing_ms": preparing_ms,
        "waiting_ms": max(0.0, cycle_ms - store_ms - preparing_ms),
        "cycle_ms": cycle_ms,
        "writes": writes / count,
    }


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the load generators, once each has been waited for
    return usage.ru_utime + usage.ru_stime


def load_spec(kind: str, url: str, seconds: float, label: str) -> dict[str, Any]:
    common = {"url": url, "connections": CLIENTS, "seconds": seconds}
    if kind == "replace":
        instances = [f"writes-0-{i}" for i in range(CLIENTS)]
        return {**common, "kind": "replace", "group": "writes-0", "instances": instances}
    return {**common, "kind": "commit", "group": f"simple-{label}", "partitions": PARTITIONS_PER_COMMIT}


def side_by_side(
    sqlite: Target, etcd_replica: Target, etcd_endpoints: list[str], etcd_pids: list[int], *, runs: int, seconds: float
) -> dict[str, Any]:
    """The two stores loaded in turn, ``runs`` times each; figures as the module docstring says."""
    etcd = EtcdClient(etcd_endpoints)
    targets = {"sqlite": sqlite, "etcd": etcd_replica}
    for target in targets.values():
        asyncio.run(form_groups(target.url, 1, CLIENTS, prefix="writes"))
    rates: dict[tuple[str, str], list[float]] = {(s, k): [] for s in targets for k in KINDS}
    cpu: dict[tuple[str, str, str], list[float]] = {}
    per_txn: dict[str, list[float]] = {k: [] for k in KINDS}
    writers: dict[tuple[str, str], list[dict[str, float]]] = {(s, k): [] for s in targets for k in KINDS}
    loads: list[float] = []
    try:
        for run in range(runs):
            for name, target in targets.items():
                for kind in KINDS:
                    loads.append(os.getloadavg()[0])
                    revision = etcd.range(b"\0")[1]
                    etcd_cpu = sum(cpu_seconds(pid) for pid in etcd_pids)
                    children = children_cpu_s()
                    figures = store_figures(target.url)
                    answer = load(load_spec(kind, target.url, seconds, f"{name}-{run}"), target.pid)
                    assert not answer["errors"], answer
                    done = max(1, answer["done"])
                    writers[(name, kind)].append(
                        per_transaction(figures, store_figures(target.url), answer["elapsed_s"])
                    )
                    transactions = etcd.range(b"\0")[1] - revision
                    rate = answer["per_s"] * (PARTITIONS_PER_COMMIT if kind == "commit" else 1)
                    rates[(name, kind)].append(rate)
                    shares = {
                        "coordinator": answer["server_cpu_s"],
                        "etcd": sum(cpu_seconds(pid) for pid in etcd_pids) - etcd_cpu,
                        "loadgen": children_cpu_s() - children,
                    }
                    for party, seconds_used in shares.items():
                        cpu.setdefault((name, kind, party), []).append(seconds_used / done * 1e6)
                    said = f"run {run + 1} {name}: {rate:.0f} {'replacements' if kind == 'replace' else 'offsets'}/s"
                    if name == "etcd":
                        per_txn[kind].append(done / max(1, transactions))
                        said += f" ({per_txn[kind][-1]:.1f} writes per etcd transaction)"
                    us = ", ".join(f"{party} {cpu[(name, kind, party)][-1]:.0f}" for party in shares)
                    cycle = writers[(name, kind)][-1]
                    said += (
                        f"; per transaction: {cycle['store_ms']:.1f} ms in the store, {cycle['preparing_ms']:.1f} ms"
                        f" preparing, {cycle['waiting_ms']:.1f} ms waiting for writes, {cycle['writes']:.1f} writes"
                    )
                    progress(f"{said}; CPU us per write: {us}; load average {loads[-1]:.1f}")
    finally:
        etcd.close()

    def ratio(kind: str) -> float:
        pairs = zip(rates[("etcd", kind)], rates[("sqlite", kind)], strict=True)
        return statistics.median(e / s for e, s in pairs)

    return {
        "clients": CLIENTS,
        "sqlite_replacements_per_s": spread(rates[("sqlite", "replace")]),
        "etcd_replacements_per_s": spread(rates[("etcd", "replace")]),
        "sqlite_offsets_per_s": spread(rates[("sqlite", "commit")]),
        "etcd_offsets_per_s": spread(rates[("etcd", "commit")]),
        "replacements_ratio": ratio("replace"),
        "offsets_ratio": ratio("commit"),
        "writes_per_etcd_transaction": {
            "replacements": spread(per_txn["replace"]),
            "offset_commits": spread(per_txn["commit"]),
        },
        "cpu_us_per_write": {
            f"{store}_{'replacement' if kind == 'replace' else 'commit'}": {
                party: statistics.median(samples) for (s, k, party), samples in cpu.items() if (s, k) == (store, kind)
            }
            for store in targets
            for kind in KINDS
        },
        "per_transaction": {
            f"{store}_{'replacement' if kind == 'replace' else 'commit'}": {
                figure: statistics.median(sample[figure] for sample in writers[(store, kind)])
                for figure in ("store_ms", "preparing_ms", "waiting_ms", "cycle_ms", "writes")
            }
            for store in targets
            for kind in KINDS
        },
        "load_average": spread(loads),
    }


def summary(figures: dict[str, Any]) -> str:
    """One line: the ratios, the batching and the load they were measured at."""
    per_txn = figures["writes_per_etcd_transaction"]
    load = figures["load_average"]
    return (
        f"HA / SQLite at {figures['clients']} clients: replacements {figures['replacements_ratio']:.2f}x, offsets"
        f" {figures['offsets_ratio']:.2f}x ({per_txn['replacements']['median']:.0f} and"
        f" {per_txn['offset_commits']['median']:.0f} writes per etcd transaction; load average"
        f" {load['min']:.1f}-{load['max']:.1f})"
    )


def on_a_cluster_of_its_own(runs: int, seconds: float) -> dict[str, Any]:
    """``side_by_side`` on a 3-member etcd cluster (fsync on) with one replica, and a SQLite coordinator, started for
    it (``durable_writes``; ``failover`` measures on the replicas it already runs)."""
    with tempfile.TemporaryDirectory(prefix="berth-ha-writes-") as tmp:
        root = Path(tmp)
        with EtcdCluster(root / "etcd", 3, fsync=True) as cluster:
            replicas = Replicas(root / "replicas", cluster.endpoints_flag, "/bench/", 1, "--log-level", "warning")
            with replicas, Coordinator(root / "sqlite") as sqlite:
                active = replicas.active()
                return side_by_side(
                    Target(sqlite.url, sqlite.pid),
                    Target(active.url, active.pid),
                    cluster.endpoints,
                    [p.pid for p in cluster.processes if p is not None],
                    runs=runs,
                    seconds=seconds,
                )
