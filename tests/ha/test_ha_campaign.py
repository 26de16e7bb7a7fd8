"""The failover campaign under load: static members of the member library heartbeat and commit through the
Service stand-in while the active replica is killed (kill -9) or frozen past its lease (SIGSTOP, then SIGCONT),
round after round; an admin client (``retry_for_s``) reads and writes throughout.

Counted, as ``tests/http/test_crash.py`` counts them for the single replica: every commit the member library
acknowledged (``commit()`` returned) must be there afterwards (the one in flight at a failover may or may not have
landed); no member may fail or rebalance (one rebalance each: the group's forming), the generation and member ids
never change, and the admin client never surfaces an error. 2 rounds in ``make test``; ``make soak`` runs more
(``BERTH_HA_ROUNDS``) and writes the figures (``BERTH_HA_RESULTS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable

import pytest
from support.ha_fixtures import HaSetup

from berth.coordinator.client import CoordinatorAdmin, GroupMember, MemberConfig
from berth.coordinator.client.state import Phase
from berth.operator.local.coordinator_process import CoordinatorProcess
from berth.operator.local.replicas import Replicas

ROUNDS = int(os.environ.get("BERTH_HA_ROUNDS", "2"))
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(180 + 30 * ROUNDS)]
GROUP = "fleet"
MEMBERS = 4
PARTITIONS = 8


class Ledger:
    def __init__(self) -> None:
        self.acknowledged: dict[int, int] = {}  # partition -> last offset whose commit returned
        self.commits = 0
        self.errors: list[str] = []
        self.admin_calls = 0


async def commit_forever(member: GroupMember, ledger: Ledger) -> None:
    offset = 0
    while True:
        await member.wait_until_stable()
        mine = member.assignment.partitions.get("t", ())
        offset += 1
        try:
            await member.commit({("t", p): offset for p in mine})
        except Exception as exc:  # anything surfaced to the user is a failure of the ride-through
            ledger.errors.append(f"{member.config.group_instance_id}: {exc!r}")
            return
        for p in mine:
            ledger.acknowledged[p] = offset
        ledger.commits += 1
        await asyncio.sleep(0.02)


async def admin_forever(admin: CoordinatorAdmin, ledger: Ledger, instances: list[str]) -> None:
    while True:
        try:
            described = await admin.describe_group(GROUP)
            assert described.group_state == "Stable", described.group_state
            await admin.put_expected_members(GROUP, instances)
        except Exception as exc:
            ledger.errors.append(f"admin: {exc!r}")
            return
        ledger.admin_calls += 1
        await asyncio.sleep(0.2)


async def fail_over(replicas: Replicas, kind: str) -> tuple[CoordinatorProcess, float]:
    """Kill or freeze the active replica; (it, seconds until another replica was ready). A killed replica is
    started again as a standby; a frozen one resumes once the other leads."""
    victim = await asyncio.to_thread(replicas.active)
    started = time.monotonic()
    await asyncio.to_thread(victim.kill if kind == "kill" else victim.freeze)
    while True:
        ready = [p for p in replicas.processes if p is not victim and await asyncio.to_thread(replicas.ready, p)]
        if ready:
            break
        await asyncio.sleep(0.05)
    took = time.monotonic() - started
    await asyncio.sleep(2)  # the members move over while the old one is dead or frozen
    if kind == "kill":
        await asyncio.to_thread(victim.start)
    else:
        await asyncio.to_thread(victim.thaw)
    return victim, took


async def test_static_members_ride_through_failovers_without_a_rebalance_or_a_lost_commit(
    ha: Callable[..., HaSetup],
) -> None:
    setup = ha(2)
    url = setup.service.url
    instances = [f"{GROUP}-{i}" for i in range(MEMBERS)]
    ledger = Ledger()
    async with CoordinatorAdmin(url, retry_for_s=45.0, request_timeout_s=5.0) as admin:
        await admin.put_expected_members(GROUP, instances)
        members = [
            GroupMember(
                MemberConfig(group_id=GROUP, topics={"t": PARTITIONS}, coordinator_url=url, group_instance_id=i)
            )
            for i in instances
        ]
        for member in members:
            await member.start()
        await asyncio.wait_for(asyncio.gather(*(m.wait_until_stable() for m in members)), 60)
        generation = members[0].generation_id
        member_ids = {m.config.group_instance_id: m.member_id for m in members}
        load = [asyncio.create_task(commit_forever(m, ledger)) for m in members]
        load.append(asyncio.create_task(admin_forever(admin, ledger, instances)))
        takeovers: list[tuple[str, float]] = []
        try:
            for round_ in range(ROUNDS):
                await asyncio.sleep(1)
                kind = "kill" if round_ % 2 == 0 else "freeze"
                before = ledger.commits
                _, took = await fail_over(setup.replicas, kind)
                takeovers.append((kind, took))
                deadline = time.monotonic() + 60
                while ledger.commits < before + 4 * MEMBERS and not ledger.errors:  # they carry on
                    assert time.monotonic() < deadline, f"no progress after the {kind} of round {round_}"
                    await asyncio.sleep(0.1)
                assert not ledger.errors, ledger.errors
        finally:
            for task in load:
                task.cancel()
            for task in load:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        committed = await admin.fetch_offsets(GROUP, ["t"])
        lost = {p: (acked, committed[("t", p)].committed_offset) for p, acked in ledger.acknowledged.items()}
        lost = {p: pair for p, pair in lost.items() if pair[1] not in (pair[0], pair[0] + 1)}
        described = await admin.describe_group(GROUP)
        for member in members:
            await member.close()
    print(f"failovers {takeovers}: {ledger.commits} acknowledged commits, {len(lost)} lost")
    assert not ledger.errors, ledger.errors
    assert lost == {}
    assert all(m.state.phase is not Phase.FAILED for m in members)
    assert [m.state.rebalances for m in members] == [1] * MEMBERS  # the forming only
    assert described.generation_id == generation
    assert {m.group_instance_id: m.member_id for m in described.members} == member_ids
    if results := os.environ.get("BERTH_HA_RESULTS"):
        with open(results, "w") as out:  # noqa: ASYNC230 - once, at the end
            json.dump(
                {
                    "rounds": ROUNDS,
                    "takeovers_s": [took for _, took in takeovers],
                    "kinds": [kind for kind, _ in takeovers],
                    "acknowledged_commits": ledger.commits,
                    "lost": len(lost),
                    "rebalances": sum(m.state.rebalances - 1 for m in members),
                    "admin_calls": ledger.admin_calls,
                    "errors": len(ledger.errors),
                },
                out,
            )
