"""Crash consistency: ``kill -9`` the coordinator at random moments under load, restart it, and check that
every acknowledged change is there and that static members carry on without a rebalance.

Load per round: offset commits by a static member (increasing offsets), static restarts of the other members
(each one a group-record write), simple commits to a second group, and KIP-394 pending-id churn. A change
counts as acknowledged when its HTTP response said NONE; a change in flight at the kill may or may not have
landed, and the checks allow exactly that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

pytestmark = [pytest.mark.timeout(180)]

FLEET = "fleet"
COMMITTER = "s-0"
RESTARTERS = ["s-1", "s-2", "s-3"]
#: 5 in the test suite; ``make soak`` runs 50 (BERTH_CRASH_ROUNDS) and writes the figures (BERTH_CRASH_RESULTS).
ROUNDS = int(os.environ.get("BERTH_CRASH_ROUNDS", "5"))


class Ledger:
    """What the coordinator acknowledged, and what was in flight when it died."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.simple_offsets: dict[int, int] = {}
        self.members: dict[str, str] = {}
        self.restarting: set[str] = set()
        self.pending_ids: list[str] = []  # MEMBER_ID_REQUIRED answers: their journal events must be durable
        self.pending_left: list[str] = []  # acknowledged leaves of those ids: likewise


async def commit_forever(api: Api, member: dict[str, Any], ledger: Ledger, partition: int) -> None:
    offset = ledger.offsets.get(("t", partition), 0)
    while True:
        offset += 1
        _, body = await api.post(
            api.group_path(FLEET, "/offsets"),
            {
                "member_id": member["member_id"],
                "generation_id": member["generation_id"],
                "group_instance_id": COMMITTER,
                "topics": [{"name": "t", "partitions": [{"partition_index": partition, "committed_offset": offset}]}],
            },
        )
        assert body["error"] == "NONE", body
        ledger.offsets[("t", partition)] = offset


async def restart_forever(api: Api, instance: str, ledger: Ledger) -> None:
    while True:
        ledger.restarting.add(instance)
        joined = await api.join(FLEET, instance_id=instance)
        assert joined["error"] == "NONE", joined
        ledger.members[instance] = joined["member_id"]
        ledger.restarting.discard(instance)


async def simple_commit_forever(api: Api, ledger: Ledger) -> None:
    offset = max(ledger.simple_offsets.values(), default=0)
    while True:
        offset += 1
        _, body = await api.post(
            api.group_path("simple", "/offsets"),
            {"topics": [{"name": "s", "partitions": [{"partition_index": 0, "committed_offset": offset}]}]},
        )
        assert body["error"] == "NONE", body
        ledger.simple_offsets[0] = offset


async def pending_churn_forever(api: Api, ledger: Ledger) -> None:
    while True:
        first = await api.join("churn", api_version=4)
        assert first["error"] == "MEMBER_ID_REQUIRED"
        ledger.pending_ids.append(first["member_id"])
        left = await api.leave("churn", [(first["member_id"], None)])
        assert left["members"][0]["error"] == "NONE"
        ledger.pending_left.append(first["member_id"])


async def run_round(
    api: Api, proc: CoordinatorProcess, committer: dict[str, Any], ledger: Ledger, rng: random.Random
) -> None:
    tasks = [asyncio.ensure_future(commit_forever(api, committer, ledger, p)) for p in range(3)] + [
        asyncio.ensure_future(restart_forever(api, i, ledger)) for i in RESTARTERS
    ]
    tasks += [
        asyncio.ensure_future(simple_commit_forever(api, ledger)),
        asyncio.ensure_future(pending_churn_forever(api, ledger)),
    ]
    await asyncio.sleep(rng.uniform(0.1, 0.4))  # load for a random while ...
    # ... then the disk stalls: writes pile up unacknowledged, and an acknowledgement sent before its write
    # is durable would now be lost by the crash (which a random kill alone almost never catches).
    _, stalled = await api.post("/v1/debug/store", {"stalled": True})
    assert "injected" in stalled
    await asyncio.sleep(rng.uniform(0.05, 0.2))
    for task in tasks:
        assert not task.done(), task  # the load was running when the process died
    await asyncio.get_running_loop().run_in_executor(None, proc.kill)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await task


async def test_acknowledged_changes_survive_kill_9(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    proc = CoordinatorProcess(tmp_path / "data").start()
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, proc.url)
            joined = await api.form_static_group(FLEET, [COMMITTER, *RESTARTERS])
            generation = joined[COMMITTER]["generation_id"]
            ledger = Ledger()
            ledger.members = {i: r["member_id"] for i, r in joined.items()}
            acknowledged = []
            for _ in range(ROUNDS):
                await run_round(api, proc, joined[COMMITTER], ledger, rng)
                await asyncio.get_running_loop().run_in_executor(None, proc.start)
                api.base_url = proc.url
                await check_everything_acknowledged_is_there(api, ledger, generation)
                acknowledged.append(sum(ledger.offsets.values()) + len(ledger.pending_ids) + len(ledger.pending_left))
                ledger.restarting.clear()
            if results := os.environ.get("BERTH_CRASH_RESULTS"):
                figures = {"kills": ROUNDS, "generation_unchanged": True, "acknowledged_changes": acknowledged[-1]}
                with open(results, "w") as out:  # noqa: ASYNC230 - once, at the end
                    json.dump(figures, out)
    finally:
        proc.kill()


async def check_everything_acknowledged_is_there(api: Api, ledger: Ledger, generation: int) -> None:
    journal = await api.whole_journal()  # 50 rounds in make soak write more than one page
    journaled_pending = {e["member_id"] for e in journal if e["type"] == "member_id_required"}
    journaled_left = {e["member_id"] for e in journal if e["type"] == "member_left" and e["group_id"] == "churn"}
    assert set(ledger.pending_ids) <= journaled_pending
    assert set(ledger.pending_left) <= journaled_left
    _, fetched = await api.get(api.group_path(FLEET, "/offsets?topic=t"))
    committed = {p["partition_index"]: p["committed_offset"] for p in fetched["topics"][0]["partitions"]}
    for (_, partition), acknowledged in ledger.offsets.items():
        assert committed[partition] in (acknowledged, acknowledged + 1)  # the one in flight may have landed
        ledger.offsets[("t", partition)] = committed[partition]
    _, simple = await api.get(api.group_path("simple", "/offsets?topic=s"))
    if ledger.simple_offsets:
        landed = simple["topics"][0]["partitions"][0]["committed_offset"]
        assert landed in (ledger.simple_offsets[0], ledger.simple_offsets[0] + 1)
        ledger.simple_offsets[0] = landed

    described = await api.describe(FLEET)
    assert described["group_state"] == "Stable"
    assert described["generation_id"] == generation  # no rebalance, ever
    mapped = {m["group_instance_id"]: m["member_id"] for m in described["members"]}
    assert set(mapped) == {COMMITTER, *RESTARTERS}
    for instance, member_id in mapped.items():
        if instance not in ledger.restarting:
            assert member_id == ledger.members[instance], instance
        ledger.members[instance] = member_id
        beat = await api.heartbeat(FLEET, member_id, generation, instance)
        assert beat["error"] == "NONE"  # carries on without rejoining
