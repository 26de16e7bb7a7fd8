"""Rebalances as the application sees them: eager revoke-before-join, assign-after-sync, the diff, the iterator."""

from __future__ import annotations

import asyncio
import base64

import pytest
from member_harness import REBALANCE_TIMEOUT_MS, CallbackLog, MemberFactory, form_group, group_journal, until_listed
from support.api import Api

from berth.coordinator.client import AssignmentChange, GroupMember, Phase
from berth.coordinator.client.encoding import decode_subscription

pytestmark = pytest.mark.timeout(60)

ALL = frozenset(("orders", p) for p in range(8))


async def test_revoke_and_assign_callbacks_fire_in_order_across_a_rebalance(
    api: Api, new_member: MemberFactory
) -> None:
    first_log, second_log = CallbackLog(), CallbackLog()
    first = new_member("orders", "orders-0", on_assigned=first_log.on_assigned, on_revoked=first_log.on_revoked)
    await form_group(api, [first])
    assert first_log.events == [("assigned", 1, ALL)]

    second = new_member("orders", "orders-1", on_assigned=second_log.on_assigned, on_revoked=second_log.on_revoked)
    await second.start()  # joins the stable group: the first member hears of it through its heartbeat
    await second.wait_until_stable()
    await first.wait_for(lambda state: state.rebalances == 2 and state.phase is Phase.STABLE)

    kept = first.state.partitions
    assert first_log.events == [("assigned", 1, ALL), ("revoked", None, ALL), ("assigned", 2, kept)]
    assert second_log.events == [("assigned", 2, ALL - kept)]
    assert len(kept) == 4  # balanced, and (sticky) everything the first one kept is what it owned before
    change = first_log.changes[-1]
    assert change.previous.partitions == {"orders": tuple(range(8))}
    assert change.added == frozenset() and change.removed == ALL - kept
    assert second_log.changes[-1].added == ALL - kept and second_log.changes[-1].removed == frozenset()


async def test_the_subscription_carries_the_partitions_the_member_owned(api: Api, new_member: MemberFactory) -> None:
    first = new_member("orders", "orders-0")
    await form_group(api, [first])
    second = new_member("orders", "orders-1")
    await second.start()
    await second.wait_until_stable()
    await first.wait_for(lambda state: state.rebalances == 2 and state.phase is Phase.STABLE)

    # The first member's rejoin (generation 2) told the leader what it had owned in generation 1.
    described = {m["group_instance_id"]: m for m in (await api.describe("orders"))["members"]}
    subscription = decode_subscription(base64.b64decode(described["orders-0"]["member_metadata"]))
    assert subscription.topics == ("orders",)
    assert subscription.owned_partitions == {"orders": tuple(range(8))}


async def test_assignments_iterator_yields_each_generation_and_ends_on_close(
    api: Api, new_member: MemberFactory
) -> None:
    first = new_member("orders", "orders-0")
    await form_group(api, [first])
    seen: list[AssignmentChange] = []
    one_seen, two_seen = asyncio.Event(), asyncio.Event()

    async def consume(member: GroupMember) -> None:
        async for change in member.assignments():
            seen.append(change)
            (one_seen if len(seen) == 1 else two_seen).set()

    consumer = asyncio.create_task(consume(first))
    await one_seen.wait()  # the current assignment comes first
    second = new_member("orders", "orders-1")
    await second.start()
    await two_seen.wait()
    assert first.stable.is_set()
    await first.close()
    await consumer  # the iterator ends when the member closes

    assert [change.generation_id for change in seen] == [1, 2]
    assert seen[0].partitions == ALL
    assert len(seen[1].partitions) == 4 and seen[1].removed == ALL - seen[1].partitions
    assert first.state.phase is Phase.CLOSED and not first.stable.is_set()


async def test_an_expired_member_resets_and_rejoins_under_a_new_member_id(api: Api, new_member: MemberFactory) -> None:
    member = new_member("orders", "orders-0")
    await form_group(api, [member])
    expired = member.state

    await api.advance(10_000)  # a whole session timeout of coordinator time without a heartbeat it could see
    # The next heartbeat is answered UNKNOWN_MEMBER_ID: the member forgets its id and generation and joins afresh.
    await member.wait_for(lambda state: state.member_id == "" and state.phase is Phase.JOINING)
    await until_listed(api, member)
    await api.advance(REBALANCE_TIMEOUT_MS)
    rejoined = await member.wait_until_stable()

    assert rejoined.member_id not in ("", expired.member_id)
    assert rejoined.generation_id > expired.generation_id
    assert rejoined.partitions == ALL
    events = await group_journal(api, "orders")
    assert [e["phase"] for e in events if e["type"] == "member_expired"] == ["session"]
