"""Offset commit and fetch through the member: the round trip, and a commit from a member the group moved past."""

from __future__ import annotations

import pytest
from member_harness import REBALANCE_TIMEOUT_MS, MemberFactory, form_group, group_journal, until_listed
from support.api import Api
from support.coordinator import CoordinatorProcess

from berth.coordinator.client import CommitFailedError, CoordinatorAdmin, Error, OffsetAndMetadata, Phase

pytestmark = pytest.mark.timeout(60)


async def test_committed_offsets_round_trip(api: Api, new_member: MemberFactory) -> None:
    member = new_member("orders", "orders-0")
    await form_group(api, [member])

    await member.commit({("orders", 0): 42, ("orders", 3): OffsetAndMetadata(7, metadata="batch-17", leader_epoch=4)})

    committed = await member.committed()
    assert {tp: c.offset for tp, c in committed.items()} == {("orders", 0): 42, ("orders", 3): 7}
    assert committed[("orders", 3)].metadata == "batch-17"
    assert committed[("orders", 3)].leader_epoch == 4
    assert await member.committed(["payments"]) == {}


async def test_commit_before_joining_a_generation_is_refused_locally(new_member: MemberFactory) -> None:
    member = new_member("orders", "orders-0")  # never started

    with pytest.raises(CommitFailedError, match="has not joined a generation") as refused:
        await member.commit({("orders", 0): 1})
    assert not refused.value.rejoining


async def test_commit_from_a_member_that_missed_a_rebalance_fails_and_it_rejoins(
    api: Api, new_member: MemberFactory
) -> None:
    # A dynamic member heartbeating rarely (every 60 s of real time) does not hear of the next rebalance ...
    slow = new_member("orders", session_timeout_ms=120_000, heartbeat_interval_ms=60_000)
    await form_group(api, [slow])
    missed_generation, old_member_id = slow.generation_id, slow.member_id
    other = new_member("orders", "orders-1")
    await other.start()
    await until_listed(api, other)
    # ... so once the join phase times out on the coordinator's clock, the group moves on without it.
    await api.advance(REBALANCE_TIMEOUT_MS)
    await other.wait_until_stable()
    assert any(e["type"] == "member_expired" for e in await group_journal(api, "orders"))

    with pytest.raises(CommitFailedError) as refused:
        await slow.commit({("orders", 0): 1})

    assert refused.value.rejoining
    assert set(refused.value.errors.values()) <= {Error.UNKNOWN_MEMBER_ID, Error.ILLEGAL_GENERATION}
    rejoined = await slow.wait_for(
        lambda state: state.phase is Phase.STABLE and state.generation_id > missed_generation
    )
    assert rejoined.member_id != old_member_id  # it was reset: a new dynamic member id
    await other.wait_for(lambda state: state.generation_id == rejoined.generation_id and state.phase is Phase.STABLE)
    assert slow.state.partitions | other.state.partitions == {("orders", p) for p in range(8)}


async def test_on_revoked_can_still_commit_while_the_member_closes(
    api: Api, new_member: MemberFactory, coordinator: CoordinatorProcess
) -> None:
    revoked: list[frozenset[tuple[str, int]]] = []

    async def commit_on_revoke(partitions: frozenset[tuple[str, int]]) -> None:
        await member.commit(dict.fromkeys(partitions, 5))  # the last chance before the partitions move
        revoked.append(partitions)

    member = new_member("orders", "orders-0", on_revoked=commit_on_revoke)
    await form_group(api, [member])
    await member.close()

    assert revoked == [frozenset(("orders", p) for p in range(8))]
    async with CoordinatorAdmin(coordinator.url) as admin:
        offsets = await admin.fetch_offsets("orders")
    assert {tp: c.offset for tp, c in offsets.items()} == {("orders", p): 5 for p in range(8)}
