"""The member library against a real coordinator: static membership (KIP-345, KIP-814) and dynamic joins (KIP-394).

Each scenario runs real member objects (real HTTP, real heartbeats every 50 ms) against a coordinator process on
the manual clock, and checks what the group did through the member's state and the coordinator's journal.
"""

from __future__ import annotations

import pytest
from member_harness import CountingSticky, MemberFactory, form_group, group_journal, last_seq
from support.api import Api

from berth.coordinator.client import FencedInstanceError, Phase

pytestmark = pytest.mark.timeout(60)


async def test_static_member_restart_keeps_its_assignment_without_a_rebalance(
    api: Api, new_member: MemberFactory
) -> None:
    first, second = new_member("orders", "orders-0"), new_member("orders", "orders-1")
    await form_group(api, [first, second])
    before = second.state
    seq = await last_seq(api)

    await second.close()  # a static member does not leave: its restart must cost nothing
    restarted = new_member("orders", "orders-1")
    await restarted.start()
    after = await restarted.wait_until_stable()

    assert after.assignment == before.assignment
    assert after.generation_id == before.generation_id
    assert after.member_id != before.member_id  # a fresh member id, the same identity
    events = await group_journal(api, "orders", after=seq)
    assert [e["type"] for e in events] == ["static_member_replaced"]
    assert events[0]["rebalance"] is False
    assert events[0]["old_member_id"] == before.member_id
    assert first.state.rebalances == 1 and first.state.phase is Phase.STABLE


async def test_static_leader_restart_skips_assignment_and_keeps_leading(api: Api, new_member: MemberFactory) -> None:
    assignor = CountingSticky()
    leader, follower = new_member("orders", "orders-0", assignors=[assignor]), new_member("orders", "orders-1")
    await form_group(api, [leader, follower])
    assert leader.is_leader and assignor.calls == 1
    before = leader.state
    seq = await last_seq(api)

    await leader.close()
    restarted_assignor = CountingSticky()
    restarted = new_member("orders", "orders-0", assignors=[restarted_assignor])
    await restarted.start()
    after = await restarted.wait_until_stable()

    assert after.is_leader  # KIP-814: still the leader ...
    assert restarted_assignor.calls == 0  # ... told to skip the assignment, so it did not run the assignor
    assert after.assignment == before.assignment
    assert after.generation_id == before.generation_id
    events = await group_journal(api, "orders", after=seq)
    assert [e["type"] for e in events] == ["static_member_replaced"]
    assert events[0]["rebalance"] is False
    assert follower.state.rebalances == 1


async def test_a_duplicate_instance_id_fences_the_older_member_loudly(api: Api, new_member: MemberFactory) -> None:
    older = new_member("orders", "orders-0")
    await form_group(api, [older])
    held = older.state.partitions

    newer = new_member("orders", "orders-0")  # a second process with the same group.instance.id
    await newer.start()
    await newer.wait_until_stable()

    with pytest.raises(FencedInstanceError, match="'orders-0'") as fenced:
        await older.run()
    assert fenced.value.group_instance_id == "orders-0"
    assert older.state.phase is Phase.FAILED
    assert older.state.partitions == frozenset()  # it stopped owning what it held
    with pytest.raises(FencedInstanceError):
        await older.wait_until_stable()
    assert newer.state.phase is Phase.STABLE and newer.state.partitions == held
    fenced_events = [e for e in await group_journal(api, "orders") if e["type"] == "member_fenced"]
    assert [e["group_instance_id"] for e in fenced_events] == ["orders-0"]


async def test_dynamic_member_joins_through_member_id_required(api: Api, new_member: MemberFactory) -> None:
    member = new_member("payments")
    await form_group(api, [member])

    events = await group_journal(api, "payments")
    required = [e for e in events if e["type"] == "member_id_required"]
    joined = [e for e in events if e["type"] == "member_joined"]
    assert len(required) == 1 and len(joined) == 1
    assert required[0]["member_id"] == joined[0]["member_id"] == member.member_id
    assert joined[0]["static"] is False
    assert member.is_leader and member.state.partitions == {("orders", p) for p in range(8)}


async def test_dynamic_member_leaves_on_close_and_static_member_does_not(api: Api, new_member: MemberFactory) -> None:
    static, dynamic = new_member("mixed", "mixed-0"), new_member("mixed")
    await form_group(api, [static, dynamic])
    seq = await last_seq(api)

    await dynamic.close()
    await static.close()

    left = [e for e in await group_journal(api, "mixed", after=seq) if e["type"] == "member_left"]
    assert [(e["member_id"], e["via"]) for e in left] == [(dynamic.member_id, "leave")]


async def test_static_member_leaves_when_asked(api: Api, new_member: MemberFactory) -> None:
    member = new_member("scale-down", "scale-down-0")
    await form_group(api, [member])

    await member.close(leave=True)

    left = [e for e in await group_journal(api, "scale-down") if e["type"] == "member_left"]
    assert [(e["group_instance_id"], e["via"]) for e in left] == [("scale-down-0", "leave")]
