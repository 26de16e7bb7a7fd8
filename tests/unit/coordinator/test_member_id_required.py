"""KIP-394: a dynamic JoinGroup v4+ with an empty member id gets MEMBER_ID_REQUIRED and a pending id.

Pending ids (Kafka's pendingJoinMembers) are admitted when they rejoin, expire after the join's session
timeout, can leave, block the completion of a join phase, and are never listed as members.
"""

from __future__ import annotations

import pytest

from berth.coordinator.protocol import Error, JoinResponse, LeaveMemberResult

from .scenario import COMPLETING, EMPTY, PREPARING, REBALANCE_MS, SESSION_MS, STABLE, Scenario, bring_to


def pending_id(ctx: Scenario, session_ms: int = SESSION_MS) -> str:
    handle = ctx.join("", None, session_ms=session_ms)
    assert handle.error == Error.MEMBER_ID_REQUIRED
    return handle.result.member_id


def test_the_rejoin_with_the_pending_id_is_admitted(ctx: Scenario) -> None:
    member_id = pending_id(ctx)
    handle = ctx.join(member_id, None)
    assert handle.parked
    group = ctx.group()
    assert member_id in group.members and not group.is_pending(member_id)
    assert ctx.state() is PREPARING
    assert ctx.event_types() == ["group_created", "member_id_required", "member_joined", "rebalance_started"]
    ctx.advance_until(lambda: handle.answered)
    assert handle.result.member_id == member_id == handle.result.leader


def test_pending_ids_expire_after_the_session_timeout(ctx: Scenario) -> None:
    member_id = pending_id(ctx, session_ms=SESSION_MS)
    ctx.advance(SESSION_MS - 1)
    assert ctx.group().is_pending(member_id)
    ctx.advance(1)
    assert not ctx.group().is_pending(member_id)
    expired = ctx.events("member_expired")[-1]
    assert (expired["member_id"], expired["phase"]) == (member_id, "pending")
    late = ctx.join(member_id, None)
    assert late.result == JoinResponse(Error.UNKNOWN_MEMBER_ID, member_id=member_id)


def test_a_pending_id_is_not_a_member(ctx: Scenario) -> None:
    """Pending ids are never listed (docs/api.md §4) and cannot heartbeat, sync or commit."""
    formed = ctx.form_group("i-0")
    member_id = pending_id(ctx)
    assert member_id not in {m.member_id for m in ctx.describe().members}
    assert ctx.heartbeat(member_id, formed.generation).error == Error.UNKNOWN_MEMBER_ID
    assert ctx.sync(member_id, formed.generation).error == Error.UNKNOWN_MEMBER_ID
    assert ctx.commit(member_id, formed.generation).error == Error.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_joins_below_v4_are_admitted_at_once(ctx: Scenario, version: int) -> None:
    handle = ctx.join("", None, version=version)
    assert handle.parked
    assert not ctx.group().pending_join_members and len(ctx.group().members) == 1
    assert ctx.events("member_id_required") == []


def test_a_pending_id_joining_with_an_instance_id_is_refused_and_changes_nothing(ctx: Scenario) -> None:
    """Kafka throws IllegalStateException (pending ids are dynamic only): UNKNOWN_SERVER_ERROR reaches the client."""
    member_id = pending_id(ctx)
    mark = ctx.mark()
    handle = ctx.join(member_id, "i-0")
    assert handle.result == JoinResponse(Error.UNKNOWN_SERVER_ERROR, member_id=member_id)
    assert ctx.group().is_pending(member_id) and not ctx.group().members
    assert ctx.event_types(since=mark) == []


def test_leave_of_a_pending_id_in_an_empty_group(ctx: Scenario) -> None:
    member_id = pending_id(ctx)
    leave = ctx.leave((member_id, None))
    assert leave.result.members == (LeaveMemberResult(member_id, None, Error.NONE),)
    assert not ctx.group().is_pending(member_id) and ctx.state() is EMPTY
    assert ctx.timer_deadline("heartbeat", "g", member_id) is None
    left = ctx.events("member_left")[-1]
    assert (left["member_id"], left["via"]) == (member_id, "leave")


def test_leave_of_only_a_pending_id_from_a_stable_group_starts_a_rebalance(ctx: Scenario) -> None:
    """docs/api.md §11 (Java coordinator): the pending member counts as a valid leaver."""
    ctx.form_group("i-0", "i-1")
    member_id = pending_id(ctx)
    mark = ctx.mark()
    ctx.leave((member_id, None))
    assert ctx.state() is PREPARING
    assert ctx.rebalance_causes(since=mark) == ["member_left"]


def test_a_pending_id_blocks_the_join_phase_until_it_expires(ctx: Scenario) -> None:
    """hasAllMembersJoined also needs no pending member; its expiry completes the phase (Kafka)."""
    formed = ctx.form_group("i-0", "i-1")
    member_id = pending_id(ctx, session_ms=SESSION_MS)
    joins = ctx.rejoin_all(formed)
    assert all(j.parked for j in joins) and ctx.state() is PREPARING
    ctx.advance(SESSION_MS)
    assert ctx.state() is COMPLETING
    assert all(j.error == Error.NONE for j in joins)
    assert member_id not in ctx.group().members


def test_a_pending_id_that_joins_in_time_is_part_of_the_generation(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    member_id = pending_id(ctx)
    joins = ctx.rejoin_all(formed)
    new = ctx.join(member_id, None)
    assert ctx.state() is COMPLETING
    assert {m.member_id for m in joins[0].result.members} == {*formed.member_ids, member_id}
    assert new.result.generation_id == 2


@pytest.mark.parametrize("state", ["Stable", "CompletingRebalance", "PreparingRebalance"])
def test_the_rejoin_with_a_pending_id_is_a_new_member(ctx: Scenario, state: str) -> None:
    bring_to(ctx, state)
    member_id = pending_id(ctx)
    mark = ctx.mark()
    handle = ctx.join(member_id, None)
    assert handle.parked and ctx.member(member_id).is_new
    assert ctx.state() is PREPARING
    assert ctx.rebalance_causes(since=mark) == ([] if state == "PreparingRebalance" else ["new_member"])


def test_a_newcomer_beyond_the_groups_pending_bound_pushes_out_the_oldest_pending_id() -> None:
    """Berth's guard against anonymous-join floods: never a refusal (which would lock real newcomers out while the
    flood's ids live), the oldest pending id goes instead, journaled."""
    small = Scenario(max_pending_members_per_group=2)
    try:
        oldest, older = pending_id(small), pending_id(small)
        newest = pending_id(small)
        assert list(small.group().pending_join_members) == [older, newest]
        evicted = small.events("member_expired")[-1]
        assert (evicted["member_id"], evicted["phase"]) == (oldest, "evicted")
        assert small.timer_deadline("heartbeat", "g", oldest) is None
        assert small.join(oldest, None).error == Error.UNKNOWN_MEMBER_ID  # it starts over, as after an expiry
        assert small.join(older, None).parked  # the others are admitted
    finally:
        small.close()


def test_pending_ids_are_bounded_in_total_across_groups() -> None:
    small = Scenario(max_pending_members=3)
    try:
        first = pending_id(small)
        others = [small.join("", None, group=g).result.member_id for g in ("h", "h", "k")]
        assert first not in small.group("g").pending_join_members
        assert set(small.group("h").pending_join_members) | set(small.group("k").pending_join_members) == set(others)
        assert small.events("member_expired")[-1]["phase"] == "evicted"
    finally:
        small.close()


def test_a_pending_id_lives_at_most_the_pending_timeout_whatever_session_it_asked_for(ctx: Scenario) -> None:
    member_id = pending_id(ctx, session_ms=1_800_000)
    assert ctx.timer_deadline("heartbeat", "g", member_id) == ctx.now + ctx.config.pending_member_timeout_ms


def test_a_flood_of_anonymous_joins_does_not_lock_dynamic_members_out(ctx: Scenario) -> None:
    """The first round's finding: 10,000 anonymous joins asking for 30-minute sessions locked the group's dynamic
    newcomers out (GROUP_MAX_SIZE_REACHED) for 30 minutes. Now a newcomer is let in during the flood, and the
    rebalance it starts completes once the flood's ids are gone, within the pending timeout."""
    formed = ctx.form_group(None)
    ctx.check = False  # the invariants once after the flood, not after each of its joins
    for _ in range(10_000):
        assert ctx.join("", None, session_ms=1_800_000).error == Error.MEMBER_ID_REQUIRED
    ctx.check = True
    ctx.check_invariants()
    assert len(ctx.group().pending_join_members) == ctx.config.max_pending_members_per_group
    newcomer = ctx.join_dynamic()
    assert newcomer.parked and ctx.state() is PREPARING
    rejoin = ctx.join(formed.member_ids[0], None)
    ctx.advance(ctx.config.pending_member_timeout_ms)
    assert newcomer.error == rejoin.error == Error.NONE
    assert ctx.state() is COMPLETING and not ctx.group().pending_join_members


def test_the_pending_id_expiry_uses_the_joins_session_timeout(ctx: Scenario) -> None:
    member_id = pending_id(ctx, session_ms=3 * SESSION_MS)
    assert ctx.timer_deadline("heartbeat", "g", member_id) == ctx.now + 3 * SESSION_MS
    ctx.advance(REBALANCE_MS)
    assert ctx.state() is EMPTY and not ctx.group().pending_join_members


def test_a_stable_group_is_not_disturbed_by_pending_ids(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    mark = ctx.mark()
    pending_id(ctx)
    ctx.advance(SESSION_MS - 1)
    assert ctx.state() is STABLE
    assert ctx.event_types(since=mark) == ["member_id_required"]
