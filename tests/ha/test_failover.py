"""Failover of the replicated coordinator, with real processes: a three-member etcd cluster on loopback, two
coordinator replicas, and a ``ServiceProxy`` in the place of their Service (new connections go to the replica whose
``/readyz`` said 200 at the last probe, every second).

- kill -9 of the active replica: the standby takes over within the lease; every group, static member map, offset
  and journal event is there; the static members heartbeat on with their member ids and generation (no rebalance).
- SIGSTOP of the active replica past its lease, then SIGCONT: the standby takes over; the frozen replica, once it
  runs again, answers nothing from its memory (NOT_COORDINATOR) and its write in flight is refused by etcd (the
  leader key's create revision is no longer its term's), so the client is told COORDINATOR_NOT_AVAILABLE, never
  NONE; what the new active acknowledged stays.

- an etcd member dies: no failover, no acknowledged commit lost (a transaction in flight to it is sent again).

The campaign under load (members of the member library heartbeating and committing through failovers) is
``test_ha_campaign.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.api import Api
from support.ha_fixtures import HaSetup
from support.metrics_text import samples

from berth.coordinator.store.etcd import EtcdClient
from berth.coordinator.store.etcd.client import EtcdRefused, b64
from berth.coordinator.store.etcd.keys import Keys
from berth.operator.local.etcd_cluster import EtcdCluster
from berth.operator.local.replicas import Replicas, ServiceProxy

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(180)]

RETRIABLE = {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"}


async def answered(call: Callable[[], Awaitable[dict[str, Any]]], timeout_s: float = 60.0) -> dict[str, Any]:
    """``call()`` until it is answered with something other than a "try again" (the client's retries)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            body = await call()
            if body.get("error") not in RETRIABLE:
                return body
        except (aiohttp.ClientError, AssertionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not answered within {timeout_s} s")
        await asyncio.sleep(0.05)


async def until(call: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not done(answer := await call()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still {answer!r} after {timeout_s} s")
        await asyncio.sleep(0.05)
    return answer


async def form(api: Api, group: str, instances: list[str]) -> dict[str, dict[str, Any]]:
    """A static group of ``instances``, pre-registered so that it forms as soon as all have joined, synced."""
    status, _ = await api.request("PUT", api.group_path(group, "/expected-members"), {"group_instance_ids": instances})
    assert status == 200
    joined = dict(
        zip(
            instances,
            await asyncio.gather(*(api.join(group, instance_id=i, session_timeout_ms=45_000) for i in instances)),
            strict=True,
        )
    )
    leader = next(r for r in joined.values() if r["leader"] == r["member_id"])
    plan = {r["member_id"]: i.encode() for i, r in joined.items()}
    synced = await asyncio.gather(
        *(
            api.sync(group, r["member_id"], r["generation_id"], i, plan if r is leader else None)
            for i, r in joined.items()
        )
    )
    assert all(s["error"] == "NONE" for s in synced), synced
    return joined


async def commit(
    api: Api, group: str, joined: dict[str, Any] | None, instance: str | None, offset: int
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}]
    }
    if joined is not None:
        body.update(member_id=joined["member_id"], generation_id=joined["generation_id"], group_instance_id=instance)
    _, answer = await api.post(api.group_path(group, "/offsets"), body)
    return answer


async def committed(api: Api, group: str) -> int:
    _, fetched = await api.get(api.group_path(group, "/offsets?topic=t"))
    return int(fetched["topics"][0]["partitions"][0]["committed_offset"])


async def test_kill_9_of_the_active_replica_loses_nothing_and_rebalances_nothing(ha: Callable[..., HaSetup]) -> None:
    setup = ha(2)
    replicas = setup.replicas
    async with aiohttp.ClientSession() as session:
        api = Api(session, setup.service.url)
        instances = ["orders-0", "orders-1", "orders-2"]
        joined = await form(api, "orders", instances)
        generation = joined["orders-0"]["generation_id"]
        for offset in range(1, 6):
            assert (await commit(api, "orders", joined["orders-0"], "orders-0", offset))["error"] == "NONE"
        assert (await commit(api, "simple", None, None, 42))["error"] == "NONE"
        before = await api.whole_journal()

        killed = replicas.active()
        await asyncio.to_thread(killed.kill)
        started = time.monotonic()
        probe = await answered(lambda: api.join("probe", api_version=4))  # the first join answered after the death
        took = time.monotonic() - started
        assert probe["error"] == "MEMBER_ID_REQUIRED"
        print(f"kill -9: first join answered {took:.2f} s after the active replica died")

        described = await answered(lambda: api.describe("orders"))
        assert described["group_state"] == "Stable"
        assert described["generation_id"] == generation
        mapped = {m["group_instance_id"]: m["member_id"] for m in described["members"]}
        assert mapped == {i: r["member_id"] for i, r in joined.items()}
        for instance, member in joined.items():  # they carry on: same member id, same generation
            beat = await api.heartbeat("orders", member["member_id"], generation, instance)
            assert beat["error"] == "NONE"
        assert await committed(api, "orders") == 5
        assert await committed(api, "simple") == 42
        after = await api.whole_journal()
        assert after[: len(before)] == before
        assert not any(e["type"] == "rebalance_started" for e in after[len(before) :])

        await asyncio.to_thread(killed.start)  # back, as a standby
        assert not killed.active
        assert not replicas.ready(killed)


async def test_a_frozen_active_replica_is_fenced_when_it_resumes(ha: Callable[..., HaSetup]) -> None:
    # The manual clock: no session timer fires while the test takes its time; the lease is etcd's, in real time.
    setup = ha(2, manual_clock=True)
    replicas = setup.replicas
    # A client's requests time out (the member library's request timeout): one sent on a connection to the frozen
    # replica would wait for it, as it would behind a Service (established connections stay where they are).
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as clients,
        aiohttp.ClientSession() as session,
    ):
        api = Api(clients, setup.service.url)
        joined = await form(api, "orders", ["orders-0", "orders-1"])
        member = joined["orders-0"]
        assert (await commit(api, "orders", member, "orders-0", 1))["error"] == "NONE"

        frozen = replicas.active()
        direct = Api(session, frozen.url)
        await direct.post("/v1/debug/store", {"stalled": True})  # its next write will wait ...
        in_flight = asyncio.create_task(commit(direct, "orders", member, "orders-0", 2))
        await direct.until_parked(1)  # ... holding this commit's answer
        await asyncio.to_thread(frozen.freeze)
        queued = asyncio.create_task(
            direct.heartbeat("orders", member["member_id"], member["generation_id"], "orders-0")
        )

        # The standby takes over once the frozen replica's lease has expired.
        takeover = await answered(lambda: commit(api, "orders", member, "orders-0", 3))
        assert takeover["error"] == "NONE"
        assert replicas.active() is not frozen

        await asyncio.to_thread(frozen.thaw)
        beat = await asyncio.wait_for(queued, 30)
        assert beat["error"] == "NOT_COORDINATOR"  # nothing answered from a deposed replica's memory
        await direct.post("/v1/debug/store", {"stalled": False})  # its write goes to etcd now, on the old term
        late = await asyncio.wait_for(in_flight, 30)
        assert late["error"] != "NONE" and late["topics"][0]["partitions"][0]["error"] == "COORDINATOR_NOT_AVAILABLE"

        assert await committed(api, "orders") == 3  # the new active's commit stands; the fenced one never landed
        await until(lambda: direct.get("/readyz"), lambda answer: answer[1] == {"status": "standby"})
        journal = await api.whole_journal()
        assert [e["seq"] for e in journal] == list(range(1, len(journal) + 1))


async def test_losing_an_etcd_member_costs_no_failover_and_no_acknowledged_commit(tmp_path: Path) -> None:
    """The replicas start on the first endpoint; when that member dies, a transaction in flight to it is sent again to
    another one (applying once), the lease is renewed there, and the active replica stays the active one. At the
    default lease TTL (5 s): a 3 s lease can run out on a busy machine while the surviving members elect a leader."""
    with EtcdCluster(tmp_path / "etcd", 3, fsync=False) as etcd:
        replicas = Replicas(tmp_path / "replicas", etcd.endpoints_flag, "/berth/", 2)
        with replicas, ServiceProxy(lambda: replicas.processes) as service:
            active = replicas.active()
            async with aiohttp.ClientSession() as session:
                api = Api(session, service.url)
                acknowledged = 0
                stop_at = time.monotonic() + 8

                async def commit_forever() -> None:
                    nonlocal acknowledged
                    offset = 0
                    while time.monotonic() < stop_at:
                        offset += 1
                        answer = await answered(lambda offset=offset: commit(api, "simple", None, None, offset))
                        assert answer["error"] == "NONE", answer
                        acknowledged = offset

                load = asyncio.create_task(commit_forever())
                await asyncio.sleep(2)
                await asyncio.to_thread(etcd.kill, 0)
                await load
                assert acknowledged > 0
                assert await committed(api, "simple") in (acknowledged, acknowledged + 1)
                metrics = await (await session.get(f"{active.probe_url}/metrics")).text()
                assert (samples(metrics)["berth_active"], samples(metrics)["berth_terms_total"]) == (
                    1,
                    1,
                )  # no failover
                assert replicas.active() is active


async def test_the_active_replica_steps_down_when_its_leader_key_is_deleted(ha: Callable[..., HaSetup]) -> None:
    """Issue 28 R2: someone deletes the leader key (the lease lives on), and a new term begins at once (either
    replica may win it). The replica of the old term must stop answering from its memory as soon as it learns (it
    watches its own key): one replica answers afterwards, and it answers what was acknowledged last (the review saw
    21 s of two actives, one serving offset 1 while the other acknowledged newer ones)."""
    setup = ha(2)
    replicas = setup.replicas
    leader = Keys(setup.prefix).leader
    client = EtcdClient(tuple(setup.endpoints.split(",")))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        api = Api(session, setup.service.url)
        assert (await commit(api, "simple", None, None, 1))["error"] == "NONE"
        replicas.active()
        (before,), _, _, _ = await asyncio.to_thread(client.range, leader)
        await asyncio.to_thread(client.txn, [], [{"request_delete_range": {"key": b64(leader)}}])
        (now,), _, _, _ = await until(
            lambda: asyncio.to_thread(client.range, leader),
            lambda found: bool(found[0]) and found[0][0].create_revision != before.create_revision,
        )
        winner = replicas.processes[int(json.loads(now.value)["name"].removeprefix("replica-"))]
        new = Api(session, winner.url)  # the new term's replica, directly: nothing is written to the other one
        assert (await answered(lambda: commit(new, "simple", None, None, 2)))["error"] == "NONE"
        path = api.group_path("simple", "/offsets?topic=t")
        answers = [(await Api(session, p.url).get(path))[1] for p in replicas.processes]
        served = [a["topics"][0]["partitions"][0]["committed_offset"] for a in answers if a["error"] == "NONE"]
        assert served == [2], answers  # one replica answers, with the offset acknowledged last


async def test_readiness_is_false_and_says_why_while_etcd_is_out_of_space(tmp_path: Path) -> None:
    """Issue 28 R4: etcd out of space (its NOSPACE alarm) refuses every write; the replica must not stay Ready
    (the review saw 37 of 60 commits answered 15 behind a 200 ``/readyz``). It is 503 ``store failing`` with the
    reason, and Ready again once an operator frees the space (compact, defragment, disarm the alarm)."""
    with EtcdCluster(tmp_path / "etcd", 1, fsync=False, flags=["--quota-backend-bytes=8388608"]) as etcd:
        replicas = Replicas(tmp_path / "replicas", etcd.endpoints_flag, "/berth/", 1)
        with replicas:
            active = replicas.active()
            client = EtcdClient(tuple(etcd.endpoints))
            async with aiohttp.ClientSession() as session:
                api = Api(session, active.url)
                assert (await commit(api, "simple", None, None, 1))["error"] == "NONE"
                await asyncio.to_thread(fill_until_out_of_space, client)
                assert (await commit(api, "simple", None, None, 2))["error"] != "NONE"
                status, body = await api.get("/readyz")
                assert (status, body["status"]) == (503, "store failing")
                assert "out of space" in body["reason"]
                await asyncio.to_thread(free_space, client)
                await until(lambda: api.get("/readyz"), lambda answer: answer[0] == 200)
                assert (await answered(lambda: commit(api, "simple", None, None, 3)))["error"] == "NONE"


def fill_until_out_of_space(client: EtcdClient) -> None:
    filler = b"x" * 512 * 1024
    refused: EtcdRefused | None = None
    for i in range(200):
        try:
            client.txn([], [{"request_put": {"key": b64(f"/filler/{i}".encode()), "value": b64(filler)}}])
        except EtcdRefused as exc:
            refused = exc
            break
    assert refused is not None and "space" in str(refused), refused


def free_space(client: EtcdClient) -> None:
    """What an operator does after a NOSPACE alarm: delete, compact, defragment, disarm."""
    end = b"/filler0"  # the range end of the prefix "/filler/"
    answer = client.txn([], [{"request_delete_range": {"key": b64(b"/filler/"), "range_end": b64(end)}}])
    revision = int(answer["header"]["revision"])
    client.call("/v3/kv/compaction", {"revision": revision, "physical": True})
    client.call("/v3/maintenance/defragment", {})
    alarms = client.call("/v3/maintenance/alarm", {"action": "GET"}).get("alarms", [])
    for alarm in alarms:
        disarm = {"action": "DEACTIVATE", "memberID": alarm["memberID"], "alarm": "NOSPACE"}
        client.call("/v3/maintenance/alarm", disarm)
