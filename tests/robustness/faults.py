"""The faults a run picks from: each injects itself, holds, heals, and says what it did.

A fault is ``async def fault(env) -> str`` over a ``FaultEnv`` (the topology, the lab, the run's random generator);
it returns once everything it did is healed and every process it ended runs again, so that the run's watchdog can
tell a process that died unasked (``env.expected_down`` names those a fault is acting on). Durations are drawn from
the run's generator, so the seed reproduces them; every kept fault stays well inside the members' 30 s session
timeout, so that a static member that restarts, or that cannot reach the coordinator for a while, is still within
it (the guarantee the checker holds the coordinator to).

``SOLO`` and ``REPLICATED`` list the faults of each topology by kind (``python -m robustness --list`` prints them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from support.netlab import Lab

from berth.coordinator.store.etcd import EtcdClient
from berth.coordinator.store.etcd.client import EtcdError, EtcdRefused, b64
from berth.coordinator.store.etcd.keys import Keys
from berth.operator.local.coordinator_process import CoordinatorProcess
from robustness.topology import LEASE_TTL_S, Replicated, Solo, Topology

#: Crash points inside the coordinator (``berth.coordinator.daemon.failpoints``), with the hits to pick among.
CRASH_POINTS = {
    "store.before_commit": 40,
    "store.after_commit": 40,
    "journal.after_append": 40,
    "engine.parked": 10,
    "load.record": 30,
}


@dataclass
class FaultEnv:
    topology: Topology
    lab: Lab
    rng: random.Random
    expected_down: set[int] = field(default_factory=set)  # ids of processes a fault has stopped on purpose

    async def hold(self, low: float, high: float) -> float:
        took = self.rng.uniform(low, high)
        await asyncio.sleep(took)
        return took


Fault = Callable[[FaultEnv], Awaitable[str]]


# ---------------------------------------------------------------------------------------------- processes


async def _start(env: FaultEnv, process: CoordinatorProcess, failpoints: str = "") -> bool:
    """Start ``process`` (with failpoints when given); False when it died while starting (a crash point)."""
    try:
        await asyncio.to_thread(process.start, 60.0, {"BERTH_FAILPOINTS": failpoints} if failpoints else None)
    except RuntimeError:
        return False
    return True


async def _restart_clean(env: FaultEnv, process: CoordinatorProcess) -> None:
    for _ in range(5):
        if process.running:
            await asyncio.to_thread(process.kill)
        if await _start(env, process):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the coordinator would not start again:\n{process.stderr()}")


def _whom(env: FaultEnv) -> str:
    return "active replica" if env.topology.kind == "replicated" else "coordinator"


def _target(env: FaultEnv) -> CoordinatorProcess:
    active = env.topology.active()
    return active if active is not None else env.rng.choice(env.topology.processes)


async def kill(env: FaultEnv) -> str:
    victim = _target(env)
    env.expected_down.add(id(victim))
    try:
        await asyncio.to_thread(victim.kill)
        down = await env.hold(0.2, 2.5)
        await _restart_clean(env, victim)
    finally:
        env.expected_down.discard(id(victim))
    return (
        f"kill -9 of the {'active replica' if env.topology.kind == 'replicated' else 'coordinator'}, {down:.1f} s down"
    )


async def graceful(env: FaultEnv) -> str:
    victim = _target(env)
    env.expected_down.add(id(victim))
    try:
        await asyncio.to_thread(victim.stop)
        down = await env.hold(0.2, 1.5)
        await _restart_clean(env, victim)
    finally:
        env.expected_down.discard(id(victim))
    return f"SIGTERM and restart, {down:.1f} s down"


async def freeze(env: FaultEnv) -> str:
    victim = _target(env)
    low = LEASE_TTL_S + 0.5 if env.topology.kind == "replicated" else 1.0
    await asyncio.to_thread(victim.freeze)
    try:
        took = await env.hold(low, low + 3.0)
    finally:
        await asyncio.to_thread(victim.thaw)
    return f"SIGSTOP for {took:.1f} s" + (" (past the lease)" if env.topology.kind == "replicated" else "")


async def crash_point(env: FaultEnv) -> str:
    """Restart a coordinator with one crash point armed at a random hit; restart it clean once it crashed."""
    point = env.rng.choice(sorted(CRASH_POINTS))
    nth = env.rng.randint(1, CRASH_POINTS[point])
    armed = f"{point}=crash@{nth}"
    topology = env.topology
    if isinstance(topology, Replicated):
        active = topology.active()
        victim = env.rng.choice([p for p in topology.processes if p is not active] or topology.processes)
    else:
        victim = _target(env)
    env.expected_down.add(id(victim))
    try:
        await asyncio.to_thread(victim.kill)
        started = await _start(env, victim, armed)
        if started and isinstance(topology, Replicated):  # the armed one takes over: kill the active
            active = topology.active()
            if active is not None and active is not victim:
                env.expected_down.add(id(active))
                await asyncio.to_thread(active.kill)
                await env.hold(LEASE_TTL_S + 1.0, LEASE_TTL_S + 2.0)
                await _restart_clean(env, active)
                env.expected_down.discard(id(active))
        for _ in range(int(8 / 0.1)):
            if not victim.running:
                break
            await asyncio.sleep(0.1)
        crashed = not victim.running
        await _restart_clean(env, victim)
    finally:
        env.expected_down.discard(id(victim))
    return f"crash point {armed}: {'crashed there' if crashed else 'not reached in 8 s'}"


# ---------------------------------------------------------------------------------------------------- disk


async def disk_full(env: FaultEnv) -> str:
    assert isinstance(env.topology, Solo)
    disk = env.topology.disk
    await asyncio.to_thread(disk.fill)
    try:
        took = await env.hold(2.0, 5.0)
    finally:
        disk.free()
    return f"disk full for {took:.1f} s"


async def disk_stall(env: FaultEnv) -> str:
    assert isinstance(env.topology, Solo)
    disk = env.topology.disk
    await asyncio.to_thread(disk.freeze)
    try:
        took = await env.hold(1.0, 5.0)
    finally:
        await asyncio.to_thread(disk.thaw)
    return f"disk stalled (fsfreeze) for {took:.1f} s"


# ------------------------------------------------------------------------------------------------- network


async def partition_clients(env: FaultEnv) -> str:
    victim = _target(env)
    host = env.topology.hosts_of(victim)
    host.block(env.lab.gateway, port=int(victim.url.rsplit(":", 1)[1]))
    try:
        took = await env.hold(2.0, 6.0)
    finally:
        host.heal()
    return f"clients cut from the {_whom(env)} for {took:.1f} s (blackhole)"


async def packet_loss(env: FaultEnv) -> str:
    victim = _target(env)
    host = env.topology.hosts_of(victim)
    probability = env.rng.uniform(0.1, 0.4)
    host.lose(probability)
    try:
        took = await env.hold(3.0, 7.0)
    finally:
        host.heal()
    return f"{probability:.0%} packet loss for {took:.1f} s"


async def rate_limit(env: FaultEnv) -> str:
    victim = _target(env)
    host = env.topology.hosts_of(victim)
    rate = env.rng.choice(["64kbit", "128kbit", "512kbit"])
    host.limit(rate)
    try:
        took = await env.hold(3.0, 7.0)
    finally:
        host.heal()
    return f"egress limited to {rate} for {took:.1f} s"


async def delay(env: FaultEnv) -> str:
    proxy = env.topology.proxy
    assert proxy is not None
    proxy.delay_s = env.rng.uniform(0.05, 0.4)
    try:
        took = await env.hold(3.0, 7.0)
    finally:
        said = proxy.delay_s
        proxy.delay_s = 0.0
    return f"{said * 1000:.0f} ms added to every chunk between clients and the coordinator for {took:.1f} s"


# ---------------------------------------------------------------------------------------- replicated only


def _etcd_client(topology: Replicated) -> EtcdClient:
    return EtcdClient(tuple(topology.etcd.endpoints), timeout_s=2)


async def partition_replica_from_etcd(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    victim = _target(env)
    host = env.topology.hosts_of(victim)
    for member in env.topology.etcd_hosts:
        host.block(member.ip)
    try:
        took = await env.hold(LEASE_TTL_S + 0.5, LEASE_TTL_S + 4.0)
    finally:
        host.heal()
    return f"the active replica cut from etcd for {took:.1f} s (blackhole)"


async def partition_replicas(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    hosts = env.topology.hosts
    for host in hosts:
        for other in hosts:
            if other is not host:
                host.block(other.ip)
    try:
        took = await env.hold(2.0, 6.0)
    finally:
        for host in hosts:
            host.heal()
    return f"the replicas cut from each other for {took:.1f} s"


async def etcd_member_kill(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    i = env.rng.randrange(3)
    await asyncio.to_thread(env.topology.etcd.kill, i)
    try:
        took = await env.hold(2.0, 6.0)
    finally:
        await asyncio.to_thread(env.topology.etcd._spawn, i, new=False)
    return f"etcd member {i} killed for {took:.1f} s"


async def etcd_quorum_loss(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    lost = env.rng.sample(range(3), 2)
    for i in lost:
        await asyncio.to_thread(env.topology.etcd.kill, i)
    try:
        took = await env.hold(2.0, 6.0)
    finally:
        for i in lost:
            await asyncio.to_thread(env.topology.etcd._spawn, i, new=False)
    return f"etcd quorum lost (members {lost} killed) for {took:.1f} s"


async def etcd_freeze(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    i = env.rng.randrange(3)
    env.topology.etcd.freeze(i)
    try:
        took = await env.hold(2.0, 6.0)
    finally:
        env.topology.etcd.thaw(i)
    return f"etcd member {i} frozen for {took:.1f} s"


async def etcd_partition_member(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    i = env.rng.randrange(3)
    host = env.topology.etcd_hosts[i]
    for other in env.topology.etcd_hosts:
        if other is not host:
            host.block(other.ip)
    try:
        took = await env.hold(2.0, 6.0)
    finally:
        host.heal()
    return f"etcd member {i} cut from its peers for {took:.1f} s"


async def etcd_out_of_space(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    client = _etcd_client(env.topology)
    filled = await asyncio.to_thread(_fill_etcd, client)
    try:
        took = await env.hold(2.0, 4.0)
    finally:
        await asyncio.to_thread(_free_etcd, client)
    return f"etcd out of space ({filled} MiB of junk, NOSPACE alarm) for {took:.1f} s"


def _fill_etcd(client: EtcdClient) -> int:
    filler = b"x" * 1024 * 1024
    for i in range(200):
        try:
            client.txn([], [{"request_put": {"key": b64(f"/junk/{i}".encode()), "value": b64(filler)}}])
        except EtcdRefused:
            return i
        except EtcdError:
            continue
    return 200


def _free_etcd(client: EtcdClient) -> None:
    for _ in range(30):
        try:
            answer = client.txn([], [{"request_delete_range": {"key": b64(b"/junk/"), "range_end": b64(b"/junk0")}}])
            client.call("/v3/kv/compaction", {"revision": int(answer["header"]["revision"]), "physical": True})
            for endpoint in client.endpoints:
                single = EtcdClient((str(endpoint),), timeout_s=5)
                with contextlib.suppress(EtcdError):
                    single.call("/v3/maintenance/defragment", {})
            for alarm in client.call("/v3/maintenance/alarm", {"action": "GET"}).get("alarms", []):
                disarm = {"action": "DEACTIVATE", "memberID": alarm["memberID"], "alarm": "NOSPACE"}
                client.call("/v3/maintenance/alarm", disarm)
            return
        except EtcdError:
            time.sleep(0.5)


async def leader_key_deleted(env: FaultEnv) -> str:
    assert isinstance(env.topology, Replicated)
    client = _etcd_client(env.topology)
    leader = Keys("/berth/").leader
    found, _, _, _ = await asyncio.to_thread(client.range, leader)
    await asyncio.to_thread(client.txn, [], [{"request_delete_range": {"key": b64(leader)}}])
    name = json.loads(found[0].value)["name"] if found else "nobody"
    await env.hold(1.0, 3.0)
    return f"the leader key deleted (it was {name}'s)"


SOLO: dict[str, Fault] = {
    "kill": kill,
    "graceful": graceful,
    "freeze": freeze,
    "crash_point": crash_point,
    "disk_full": disk_full,
    "disk_stall": disk_stall,
    "partition_clients": partition_clients,
    "packet_loss": packet_loss,
    "rate_limit": rate_limit,
    "delay": delay,
}

REPLICATED: dict[str, Fault] = {
    "kill": kill,
    "graceful": graceful,
    "freeze": freeze,
    "crash_point": crash_point,
    "partition_clients": partition_clients,
    "partition_replica_from_etcd": partition_replica_from_etcd,
    "partition_replicas": partition_replicas,
    "packet_loss": packet_loss,
    "rate_limit": rate_limit,
    "delay": delay,
    "etcd_member_kill": etcd_member_kill,
    "etcd_quorum_loss": etcd_quorum_loss,
    "etcd_freeze": etcd_freeze,
    "etcd_partition_member": etcd_partition_member,
    "etcd_out_of_space": etcd_out_of_space,
    "leader_key_deleted": leader_key_deleted,
}
