"""Benchmark 6: durable writes through the whole coordinator (HTTP, core, SQLite with fsync), 64 clients.

Static replacements/s: 64 members of one group restart over and over; each restart rewrites the group record
and is answered only once durable. Committed offsets/s: 64 clients commit 50 partitions per request. Group
commit lets many writes share one transaction and one fsync. Goals: >= 2,000 replacements/s and >= 20,000
partition offsets/s. Then the same load on the replicated store (etcd) and on SQLite side by side
(``ha_writes``): HA / SQLite, with the writes per etcd transaction, the CPU per write of each party and the load.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from benchmarks import ha_writes
from benchmarks.common import Coordinator, Result, progress, spread
from benchmarks.goals import GOALS
from benchmarks.heartbeat import form_groups
from benchmarks.writes_loadgen import CLIENTS, PARTITIONS_PER_COMMIT, load

SECONDS = 8
RUNS = 3


def main() -> Result:
    instances = [f"writes-0-{i}" for i in range(CLIENTS)]
    replacements: list[float] = []
    offsets: list[float] = []
    cpu_per_replacement: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Coordinator(Path(tmp) / "data", cpu=0) as coordinator:
        asyncio.run(form_groups(coordinator.url, 1, CLIENTS, prefix="writes"))
        for run in range(RUNS):
            common = {"url": coordinator.url, "connections": CLIENTS, "seconds": SECONDS}
            r = load({**common, "kind": "replace", "group": "writes-0", "instances": instances}, coordinator.pid)
            assert not r["errors"], r
            c = load(
                {**common, "kind": "commit", "group": f"simple-{run}", "partitions": PARTITIONS_PER_COMMIT},
                coordinator.pid,
            )
            assert not c["errors"], c
            replacements.append(r["per_s"])
            cpu_per_replacement.append(r["server_cpu_s"] / r["done"] * 1e6)
            offsets.append(c["per_s"] * PARTITIONS_PER_COMMIT)
            progress(f"run {run + 1}: {r['per_s']:.0f} static replacements/s, {offsets[-1]:.0f} offsets/s")
    rep, off = spread(replacements), spread(offsets)
    progress("the replicated store (etcd) and SQLite side by side")
    ha = ha_writes.on_a_cluster_of_its_own(RUNS, SECONDS)
    return Result(
        name="durable_writes",
        title="Durable writes with 64 concurrent clients (fsync on)",
        command="python -m benchmarks durable_writes",
        goal=GOALS["durable_writes"],
        met=rep["median"] >= 2_000 and off["median"] >= 20_000,
        summary=f"{rep['median']:.0f} replacements/s, {off['median']:.0f} partition offsets/s; {ha_writes.summary(ha)}",
        figures={
            "static_replacements_per_s": rep,
            "coordinator_cpu_us_per_replacement": spread(cpu_per_replacement),
            "partition_offsets_per_s": off,
            "clients": CLIENTS,
            "partitions_per_commit": PARTITIONS_PER_COMMIT,
            "group_members": CLIENTS,
            "ha_side_by_side": ha,
        },
        note="Each replacement writes its member's new id and the group's fields, whatever the group's size (a "
        "delta; Kafka rewrites the whole group record), and is answered only once "
        "durable. The coordinator is pinned to one core and CPU-bound here: coordinator_cpu_us_per_replacement is "
        "its CPU (event loop and writer thread) per replacement. ha_side_by_side: the same load on the replicated "
        "store (3 etcd members with fsync, one replica) and on SQLite, alternating, neither pinned "
        "(benchmarks/ha_writes.py); its ratios are medians of per-run ratios.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
