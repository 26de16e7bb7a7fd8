"""The replicated coordinator (docs/high-availability.md): failover time, rebalances during failovers,
and durable-write throughput against the SQLite store, side by side.

Set-up as the chart's HA option runs it, on this machine: a 3-member etcd cluster on loopback (Debian's etcd-server,
fsync on, the chart's limits), 2 coordinator replicas with the chart's 5 s lease, and a ``ServiceProxy`` probing
their ``/readyz`` every second (the chart's readiness probe period) in the place of their Service.

- Failover: 100 static members of the member library (10 groups of 10; heartbeat 3 s, session timeout 45 s)
  heartbeat through the Service. The active replica is killed (kill -9, 5 runs) or stopped (SIGTERM, a rolling
  update's step down, 3 runs); the time is from the signal to the first join answered through the Service (a new
  connection every 50 ms), and to the standby's ``/readyz`` 200. Goal: well inside the 45 s session timeout;
  stretch: under 10 s.
- Rebalances: the static groups' rebalances started during all the failovers (journal ``rebalance_started`` and
  the members' own count). Goal: 0.
- Throughput: ``ha_writes.side_by_side`` (64 connections: static replacements, and commits of 50 partitions)
  against the SQLite coordinator and the active replica (directly, not through the Service stand-in), alternating,
  3 runs each. Reported as the ratio HA / SQLite, with the writes per etcd transaction, the CPU per write of the
  coordinator, the etcd members and the load generator, and the load average of each run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import ha_writes
from benchmarks.common import Coordinator, Result, progress, spread
from benchmarks.goals import GOALS
from berth.coordinator.client import CoordinatorAdmin, GroupMember, MemberConfig
from berth.operator.local.etcd_cluster import EtcdCluster
from berth.operator.local.replicas import Replicas, ServiceProxy

LEASE_TTL_S = 5
SESSION_TIMEOUT_MS = 45_000
GROUPS = 10
MEMBERS_PER_GROUP = 10
KILLS = 5
STEP_DOWNS = 3
THROUGHPUT_RUNS = 3
THROUGHPUT_SECONDS = 5


async def first_join(url: str, since: float) -> float:
    """Seconds from ``since`` to the first join answered through ``url`` (a fresh connection per attempt)."""
    body = {"member_id": "", "session_timeout_ms": 10_000, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}], "api_version": 4}  # fmt: skip
    while True:
        connector = aiohttp.TCPConnector(force_close=True)
        timeout = aiohttp.ClientTimeout(total=1)
        try:
            async with (
                aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
                session.post(f"{url}/v1/groups/probe/join", json=body) as answer,
            ):
                if answer.status == 200 and (await answer.json())["error"] == "MEMBER_ID_REQUIRED":
                    return time.monotonic() - since
        except (aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.05)


async def until_ready(replicas: Replicas, other_than: Any, since: float) -> float:
    """Seconds from ``since`` until a replica other than ``other_than`` answers /readyz 200 (probed every 50 ms)."""
    others = [p for p in replicas.processes if p is not other_than]
    while True:
        for process in others:
            if await asyncio.to_thread(replicas.ready, process):
                return time.monotonic() - since
        await asyncio.sleep(0.05)


async def failovers(replicas: Replicas, service: ServiceProxy) -> dict[str, Any]:
    url = service.url
    groups = [f"fleet-{g}" for g in range(GROUPS)]
    members: list[GroupMember] = []
    async with CoordinatorAdmin(url, retry_for_s=60.0, request_timeout_s=5.0) as admin:
        for group in groups:
            instances = [f"{group}-{m}" for m in range(MEMBERS_PER_GROUP)]
            await admin.put_expected_members(group, instances)
            for instance in instances:
                config = MemberConfig(group, {"t": 20}, url, instance, session_timeout_ms=SESSION_TIMEOUT_MS)
                members.append(GroupMember(config))
        for member in members:
            await member.start()
        await asyncio.wait_for(asyncio.gather(*(m.wait_until_stable() for m in members)), 120)
        generations = {g: (await admin.describe_group(g)).generation_id for g in groups}
        seq_before = (await admin.journal(limit=0)).last
        runs: list[dict[str, Any]] = []
        for kind in ["kill"] * KILLS + ["step_down"] * STEP_DOWNS:
            await asyncio.sleep(LEASE_TTL_S)  # a few heartbeats on the new active replica first
            victim = await asyncio.to_thread(replicas.active)
            since = time.monotonic()
            if kind == "kill":
                await asyncio.to_thread(victim.kill)
            else:
                assert victim.proc is not None
                victim.proc.terminate()
            ready, joined = await asyncio.gather(until_ready(replicas, victim, since), first_join(url, since))
            runs.append({"kind": kind, "standby_ready_s": ready, "first_join_s": joined})
            progress(f"{kind}: standby ready after {ready:.2f} s, first join answered after {joined:.2f} s")
            if kind == "step_down":
                await asyncio.to_thread(victim.stop)
            await asyncio.to_thread(victim.start)
        await asyncio.sleep(2 * 3)  # two heartbeat intervals: every member has heartbeated on the last active one
        events = [e async for e in admin.journal_events(seq_before)]
        rebalances = sum(1 for e in events if e["type"] == "rebalance_started" and e["group_id"] in generations)
        moved = [g for g in groups if (await admin.describe_group(g)).generation_id != generations[g]]
        failed = sum(1 for m in members if m.state.error is not None)
        member_rebalances = sum(m.state.rebalances - 1 for m in members)
        for member in members:
            await member.close()
    return {
        "runs": runs,
        "rebalances_started": rebalances,
        "member_rebalances": member_rebalances,
        "groups_whose_generation_moved": len(moved),
        "members_failed": failed,
    }


def throughput(replicas: Replicas, etcd: EtcdCluster, root: Path) -> dict[str, Any]:
    with Coordinator(root / "sqlite") as sqlite:
        active = replicas.active()
        return ha_writes.side_by_side(
            ha_writes.Target(sqlite.url, sqlite.pid),
            ha_writes.Target(active.url, active.pid),
            etcd.endpoints,
            [p.pid for p in etcd.processes if p is not None],
            runs=THROUGHPUT_RUNS,
            seconds=THROUGHPUT_SECONDS,
        )


def main() -> Result:
    logging.getLogger("berth.client").setLevel(logging.ERROR)  # each member says so when a failover starts
    with tempfile.TemporaryDirectory(prefix="berth-failover-") as tmp:
        root = Path(tmp)
        with EtcdCluster(root / "etcd", 3, fsync=True) as etcd:
            replicas = Replicas(
                root / "replicas", etcd.endpoints_flag, "/bench/", 2, "--log-level", "warning", lease_ttl_s=LEASE_TTL_S
            )
            with replicas, ServiceProxy(lambda: replicas.processes) as service:
                replicas.active()
                failover = asyncio.run(failovers(replicas, service))
                writes = throughput(replicas, etcd, root)
    kills = [r["first_join_s"] for r in failover["runs"] if r["kind"] == "kill"]
    steps = [r["first_join_s"] for r in failover["runs"] if r["kind"] == "step_down"]
    kill = spread(kills)
    figures = {
        "first_join_after_kill_s": kill,
        "standby_ready_after_kill_s": spread([r["standby_ready_s"] for r in failover["runs"] if r["kind"] == "kill"]),
        "first_join_after_step_down_s": spread(steps),
        "session_timeout_s": SESSION_TIMEOUT_MS / 1000,
        "lease_ttl_s": LEASE_TTL_S,
        "static_members": GROUPS * MEMBERS_PER_GROUP,
        **{k: v for k, v in failover.items() if k != "runs"},
        "runs": failover["runs"],
        **writes,
    }
    rebalances = failover["rebalances_started"] + failover["member_rebalances"]
    return Result(
        name="failover",
        title="Replicated coordinator: failover, rebalances, durable writes vs SQLite",
        command="python -m benchmarks failover",
        goal=GOALS["failover"],
        met=kill["max"] < SESSION_TIMEOUT_MS / 1000 / 2 and rebalances == 0 and failover["members_failed"] == 0,
        summary=(
            f"kill -9 -> first join {kill['median']:.1f} s (max {kill['max']:.1f} s) vs a 45 s session timeout;"
            f" step-down {statistics.median(steps):.1f} s; {rebalances} rebalances;"
            f" {ha_writes.summary(writes)}"
        ),
        figures=figures,
        note="Failover time = the lease TTL (5 s: the dead replica's lease must expire) + the standby's load + up to "
        "one readiness period (1 s) before the Service sends it traffic; a step-down revokes the lease, so only the "
        "load and the probe remain. Throughput is measured against the active replica directly; etcd runs with fsync "
        "on, three members on this one (shared) disk, each transaction a raft round trip. ratios are HA / SQLite, "
        "medians of per-run ratios.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
    sys.exit(0)
