"""Test support for the member library: configs sized for tests, group formation on the manual clock, records.

Real time drives the library (heartbeats every 50 ms, retries from 10 ms); the coordinator's manual clock drives
the group (sessions never expire unless a test advances it). Groups form the way they do in production: every
member's join parks, then the coordinator's clock is advanced past the initial rebalance delay and its extensions.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from support.api import Api

from berth.coordinator.client import (
    AssignmentChange,
    BackoffPolicy,
    GroupMember,
    MemberConfig,
    TopicPartition,
)
from berth.coordinator.client.assignors import AssignorMember, MemberId, StickyAssignor
from berth.coordinator.client.encoding import Assignment

#: Members' rebalance timeout. It also bounds the initial rebalance: Kafka delays it by 3 s and extends the delay
#: while new members keep arriving, but never past the rebalance timeout.
REBALANCE_TIMEOUT_MS = 10_000
TOPICS: Mapping[str, int] = {"orders": 8}

#: The ``new_member`` fixture: ``new_member(group_id, instance_id=None, **options)`` -> a member, not started.
MemberFactory = Callable[..., GroupMember]


def member_config(url: str, group_id: str, instance_id: str | None = None, **overrides: Any) -> MemberConfig:
    config = MemberConfig(
        group_id=group_id,
        topics=TOPICS,
        coordinator_url=url,
        group_instance_id=instance_id,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        heartbeat_interval_ms=50,
        retry_backoff_ms=10,
        retry_backoff_max_ms=200,
    )
    return dataclasses.replace(config, **overrides)


async def start_in_order(api: Api, members: Sequence[GroupMember]) -> None:
    """Start the members one by one, each once the previous one is in the group (so the first one leads)."""
    for member in members:
        await member.start()
        await until_listed(api, member)


async def until_listed(api: Api, member: GroupMember, timeout: float = 10.0) -> None:
    """Wait until the coordinator lists the member (its join has arrived and is parked, awaiting the others).

    The parked-request gauge cannot tell whose request is parked; describe can. Pending (KIP-394) ids are never
    listed, so a dynamic member counts only once its second join, the one with its id, has arrived.
    """
    if member.config.group_instance_id is not None:
        await until_instance_listed(api, member.config.group_id, member.config.group_instance_id, timeout)
        return
    await member.wait_for(lambda state: bool(state.member_id))
    await _until(api, member.config.group_id, lambda m: m["member_id"] == member.member_id, timeout)


async def until_instance_listed(api: Api, group_id: str, instance_id: str, timeout: float = 10.0) -> None:
    await _until(api, group_id, lambda m: m["group_instance_id"] == instance_id, timeout)


async def _until(api: Api, group_id: str, listed: Callable[[dict[str, Any]], bool], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(listed(m) for m in (await api.describe(group_id))["members"]):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the member was not listed in group {group_id!r} after {timeout} s")
        await asyncio.sleep(0.005)


async def form_group(api: Api, members: Sequence[GroupMember]) -> None:
    """Start the members of a new group and let its initial rebalance complete; all end stable."""
    await start_in_order(api, members)
    await api.advance(REBALANCE_TIMEOUT_MS)
    await asyncio.gather(*(member.wait_until_stable() for member in members))


async def group_journal(api: Api, group_id: str, after: int = 0) -> list[dict[str, Any]]:
    return [event for event in await api.journal(after) if event["group_id"] == group_id]


async def last_seq(api: Api) -> int:
    events = await api.journal()
    return int(events[-1]["seq"]) if events else 0


class CallbackLog:
    """Records the revoke/assign callbacks of one member, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int | None, frozenset[TopicPartition]]] = []
        self.changes: list[AssignmentChange] = []

    async def on_assigned(self, change: AssignmentChange) -> None:
        self.events.append(("assigned", change.generation_id, change.partitions))
        self.changes.append(change)

    async def on_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(("revoked", None, partitions))


class RecordingSleep:
    """An injectable backoff sleep: records each wait, then really waits it (so retries stay paced)."""

    def __init__(self) -> None:
        self.delays_s: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays_s.append(seconds)
        await asyncio.sleep(seconds)


def recording_backoff(sleep: RecordingSleep, *, initial_ms: float = 10, max_ms: float = 80) -> BackoffPolicy:
    """Jitter pinned to the middle of its range, so the waits are exactly initial * 2**n, capped."""
    return BackoffPolicy(initial_ms=initial_ms, max_ms=max_ms, sleep=sleep, uniform=lambda low, high: (low + high) / 2)


class CountingSticky:
    """The sticky assignor, counting how often a leader ran it."""

    name = "sticky"

    def __init__(self) -> None:
        self.calls = 0
        self._sticky = StickyAssignor()

    def assign(
        self, members: Sequence[AssignorMember], partitions_per_topic: Mapping[str, int]
    ) -> dict[MemberId, Assignment]:
        self.calls += 1
        return self._sticky.assign(members, partitions_per_topic)
