"""A member rides out an unavailable coordinator: restarts (SIGTERM, kill -9) and a failing disk, with backoff.

The coordinator keeps its port across the restart (a Service address in production), so the member's only
experience is connection errors, then answers again: it must keep its member id and generation, resume
heartbeating, and cost the group no rebalance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from member_harness import (
    MemberFactory,
    RecordingSleep,
    form_group,
    group_journal,
    member_config,
    recording_backoff,
    until_listed,
)
from support.api import Api
from support.coordinator import CoordinatorProcess
from support.net import free_port

from berth.coordinator.client import GroupMember, Phase

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fixed_port_coordinator(tmp_path: Path) -> Iterator[CoordinatorProcess]:
    process = CoordinatorProcess(tmp_path / "data", "--port", str(free_port())).start()
    yield process
    if process.proc is not None:
        process.kill()


@pytest.fixture
async def fixed_api(fixed_port_coordinator: CoordinatorProcess) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, fixed_port_coordinator.url)


@pytest.mark.parametrize("how", ["sigterm", "kill -9"])
async def test_member_survives_a_coordinator_restart_without_a_rebalance(
    fixed_port_coordinator: CoordinatorProcess, fixed_api: Api, how: str
) -> None:
    members = [GroupMember(member_config(fixed_port_coordinator.url, "orders", f"orders-{i}")) for i in range(2)]
    try:
        await form_group(fixed_api, members)
        before = [member.state for member in members]

        if how == "sigterm":
            assert fixed_port_coordinator.stop() == 0
        else:
            fixed_port_coordinator.kill()
        for member in members:
            await member.wait_for(lambda state: state.unavailable_streak >= 1)  # its heartbeats now fail
        fixed_port_coordinator.start()
        for member in members:
            heartbeats = member.state.heartbeats_ok
            await member.wait_for(lambda state, after=heartbeats: state.heartbeats_ok > after)

        for member, earlier in zip(members, before, strict=True):
            now = member.state
            assert (now.member_id, now.generation_id, now.assignment) == (
                earlier.member_id,
                earlier.generation_id,
                earlier.assignment,
            )
            assert now.phase is Phase.STABLE and now.rebalances == 1 and now.unavailable_streak == 0
        described = await fixed_api.describe("orders")
        assert described["group_state"] == "Stable"
        assert described["generation_id"] == before[0].generation_id
        causes = [e["cause"] for e in await group_journal(fixed_api, "orders") if e["type"] == "rebalance_started"]
        assert causes == ["new_member"]  # the group's first rebalance, and no other
    finally:
        for member in members:
            await member.close()


async def test_commit_is_retried_with_backoff_while_the_disk_fails(api: Api, new_member: MemberFactory) -> None:
    sleep = RecordingSleep()
    # Heartbeats far apart: the waits recorded are the commit's alone (a heartbeat answered
    # COORDINATOR_NOT_AVAILABLE while the group is loaded again would start a doubling of its own in between).
    member = new_member(
        "orders",
        "orders-0",
        backoff=recording_backoff(sleep, initial_ms=10, max_ms=80),
        session_timeout_ms=60_000,
        heartbeat_interval_ms=20_000,
    )
    await form_group(api, [member])

    await api.post("/v1/debug/store", {"fail_next": 5})
    await member.commit({("orders", 1): 99})

    # Doubling, then capped: one wait per failed write, and a few more while the group is loaded again from the store
    # after each failure (answered COORDINATOR_NOT_AVAILABLE too, as docs/api.md §10 says), all at the cap.
    assert sleep.delays_s[:5] == pytest.approx([0.010, 0.020, 0.040, 0.080, 0.080])
    assert sleep.delays_s[5:] == pytest.approx([0.080] * len(sleep.delays_s[5:]))
    assert (await member.committed())[("orders", 1)].offset == 99


async def test_join_is_retried_with_backoff_until_the_disk_recovers(api: Api, new_member: MemberFactory) -> None:
    sleep = RecordingSleep()
    member = new_member("orders", "orders-0", backoff=recording_backoff(sleep, initial_ms=10, max_ms=40))
    await api.post("/v1/debug/store", {"failing": True})
    await member.start()
    failing = await member.wait_for(lambda state: state.unavailable_streak >= 4)
    assert "COORDINATOR_NOT_AVAILABLE" in (failing.last_error or "")
    assert failing.phase is Phase.JOINING

    await api.post("/v1/debug/store", {"failing": False})
    await until_listed(api, member)
    await api.advance(10_000)
    stable = await member.wait_until_stable()

    assert stable.unavailable_streak == 0
    assert sleep.delays_s[:4] == pytest.approx([0.010, 0.020, 0.040, 0.040])


async def test_an_outage_is_logged_at_info_until_it_puts_the_session_at_risk(
    fixed_port_coordinator: CoordinatorProcess, fixed_api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A failover or restart is routine: its retries are INFO (the first) and DEBUG; a WARNING only once the outage
    has lasted a third of the session timeout; the recovery is INFO with how long it took."""
    caplog.set_level(logging.DEBUG, logger="berth.client")
    member = GroupMember(member_config(fixed_port_coordinator.url, "orders", "orders-0"))  # session timeout 10 s
    try:
        await form_group(fixed_api, [member])
        fixed_port_coordinator.kill()

        def outage() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "coordinator unavailable for" in r.getMessage()]

        while not any(r.levelno == logging.WARNING for r in outage()):  # noqa: ASYNC110 - polling the log
            await asyncio.sleep(0.05)
        fixed_port_coordinator.start()
        heartbeats = member.state.heartbeats_ok
        await member.wait_for(lambda state: state.heartbeats_ok > heartbeats)

        seen = [(r.levelno, float(r.getMessage().split(" for ")[1].split(" s ")[0])) for r in outage()]
        assert seen[0] == (logging.INFO, 0.0)
        first_warning = next(i for i, (level, _) in enumerate(seen) if level == logging.WARNING)
        assert all(level == logging.DEBUG for level, _ in seen[1:first_warning])
        logged_to = 0.05  # the log rounds the outage to 0.1 s: 3.33 s reads "3.3"
        assert seen[first_warning][1] >= 10 / 3 - logged_to
        assert all(elapsed < 10 / 3 + logged_to for _, elapsed in seen[:first_warning])
        recovered = [r for r in caplog.records if "coordinator answering again after" in r.getMessage()]
        assert [r.levelno for r in recovered] == [logging.INFO]
    finally:
        await member.close()
