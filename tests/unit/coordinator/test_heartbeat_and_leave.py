"""Heartbeat (classicGroupHeartbeatToClassicGroup) and LeaveGroup (classicGroupLeaveToClassicGroup) tables.

Heartbeat: unknown group -> 25; validateMember (25 / 82); generation (22); then Empty -> 25,
PreparingRebalance -> session refreshed and 27, CompletingRebalance / Stable -> session refreshed and 0.
Leave: unknown group -> top-level 25; per member: empty member id = admin removal by instance id (25 when
unknown), a pending id leaves, else validateMember; then Stable/CompletingRebalance rebalance,
PreparingRebalance may complete its join phase.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import GroupRecord
from berth.coordinator.protocol import (
    Error,
    JoinResponse,
    LeaveMemberResult,
    LeaveResponse,
    MemberIdentity,
    SyncResponse,
)

from .scenario import COMPLETING, EMPTY, PREPARING, SESSION_MS, STABLE, STATES, Scenario, bring_to

# --------------------------------------------------------------------------------------------- heartbeat

HEARTBEAT_STATE_TABLE = {
    "missing": Error.UNKNOWN_MEMBER_ID,
    "Empty": Error.UNKNOWN_MEMBER_ID,
    "PreparingRebalance": Error.REBALANCE_IN_PROGRESS,
    "CompletingRebalance": Error.NONE,
    "Stable": Error.NONE,
}


@pytest.mark.parametrize("who", ["leader", "static follower", "dynamic"])
@pytest.mark.parametrize("state", STATES)
def test_heartbeat_of_a_valid_member_in_every_state(ctx: Scenario, state: str, who: str) -> None:
    formed = bring_to(ctx, state)
    index = ["leader", "static follower", "dynamic"].index(who)
    member_id = formed.member_ids[index] if formed else "i-0-u1"
    instance_id = formed.instance_ids[index] if formed else "i-0"
    generation = ctx.group().generation_id if formed else 1
    ctx.advance(1_000)
    handle = ctx.heartbeat(member_id, generation, instance_id)
    assert handle.error == HEARTBEAT_STATE_TABLE[state]
    if handle.error in (Error.NONE, Error.REBALANCE_IN_PROGRESS):
        assert ctx.timer_deadline("heartbeat", "g", member_id) == ctx.now + SESSION_MS
        assert ctx.member(member_id).last_heard_ms == ctx.now
    if state != "missing":
        assert ctx.state().value == state


HEARTBEAT_VALIDATION_TABLE = [
    # (who, instance id, generation offset, expected)
    ("ghost", None, 0, Error.UNKNOWN_MEMBER_ID),
    ("ghost", "i-9", 0, Error.UNKNOWN_MEMBER_ID),
    ("ghost", "i-1", 0, Error.FENCED_INSTANCE_ID),
    ("follower", "i-0", 0, Error.FENCED_INSTANCE_ID),
    ("follower", "i-1", -1, Error.ILLEGAL_GENERATION),
    ("follower", "i-1", +1, Error.ILLEGAL_GENERATION),
    ("dynamic", None, -1, Error.ILLEGAL_GENERATION),
    ("ghost", None, +3, Error.UNKNOWN_MEMBER_ID),  # the member is checked before the generation
    ("ghost", "i-1", +3, Error.FENCED_INSTANCE_ID),
]


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable"])
@pytest.mark.parametrize(("who", "instance_id", "offset", "error"), HEARTBEAT_VALIDATION_TABLE)
def test_heartbeat_validation(
    ctx: Scenario, state: str, who: str, instance_id: str | None, offset: int, error: Error
) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    member_id = {"follower": formed.member_ids[1], "dynamic": formed.member_ids[2]}.get(who, "ghost-u99")
    deadlines = {m: ctx.timer_deadline("heartbeat", "g", m) for m in formed.member_ids}
    ctx.advance(1_000)
    mark = ctx.mark()
    assert ctx.heartbeat(member_id, ctx.group().generation_id + offset, instance_id).error == error
    assert ctx.event_types(since=mark) == (["member_fenced"] if error == Error.FENCED_INSTANCE_ID else [])
    assert {m: ctx.timer_deadline("heartbeat", "g", m) for m in formed.member_ids} == deadlines


def test_heartbeats_keep_a_stable_member_forever(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", None)
    ctx.keep_alive(20 * SESSION_MS, *zip(formed.member_ids, formed.instance_ids, strict=True))
    assert ctx.state() is STABLE and set(ctx.group().members) == set(formed.member_ids)


def test_heartbeat_never_writes(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    records, events = len(ctx.records), len(ctx.journal)
    ctx.heartbeat(formed.leader, 1, "i-0")
    assert (len(ctx.records), len(ctx.journal)) == (records, events)


# ------------------------------------------------------------------------------------------------ leave


def test_leave_of_an_unknown_group_is_unknown_member_id_for_each_member(ctx: Scenario) -> None:
    """Kafka: the request is fine (top-level NONE); no such group means no such member, per member."""
    handle = ctx.leave(("m", None), ("", "i-0"))
    assert handle.result == LeaveResponse(
        Error.NONE,
        (LeaveMemberResult("m", None, Error.UNKNOWN_MEMBER_ID), LeaveMemberResult("", "i-0", Error.UNKNOWN_MEMBER_ID)),
    )
    assert handle.result.legacy_error() == Error.UNKNOWN_MEMBER_ID  # what a v0-2 leave answers
    assert ctx.leave(("m", None), version=2).result.legacy_error() == Error.UNKNOWN_MEMBER_ID
    assert ctx.core.groups == {}


LEAVE_ROW_TABLE = [
    # (row, member id, instance id, per-member error, removed member)
    ("dynamic by member id", "dynamic", None, Error.NONE, "dynamic"),
    ("static by member id and instance id", "follower", "i-1", Error.NONE, "follower"),
    ("static by member id only (downgrade)", "follower", None, Error.NONE, "follower"),
    ("admin: empty member id, known instance id", "", "i-1", Error.NONE, "follower"),
    ("admin: empty member id, unknown instance id", "", "i-9", Error.UNKNOWN_MEMBER_ID, None),
    ("empty member id and no instance id", "", None, Error.UNKNOWN_MEMBER_ID, None),
    ("unknown member id", "ghost-u99", None, Error.UNKNOWN_MEMBER_ID, None),
    ("unknown member id, known instance id", "ghost-u99", "i-1", Error.FENCED_INSTANCE_ID, None),
    ("member id of another instance", "follower", "i-0", Error.FENCED_INSTANCE_ID, None),
    ("dynamic member id with an instance id", "dynamic", "i-1", Error.FENCED_INSTANCE_ID, None),
    ("known member id, unknown instance id", "follower", "i-9", Error.UNKNOWN_MEMBER_ID, None),
]


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable"])
@pytest.mark.parametrize(
    ("row", "who", "instance_id", "error", "removed"), LEAVE_ROW_TABLE, ids=[r[0] for r in LEAVE_ROW_TABLE]
)
def test_leave_rows(
    ctx: Scenario, state: str, row: str, who: str, instance_id: str | None, error: Error, removed: str | None
) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    ids = {"leader": formed.member_ids[0], "follower": formed.member_ids[1], "dynamic": formed.member_ids[2], "": ""}
    member_id = ids.get(who, who)
    mark = ctx.mark()
    handle = ctx.leave((member_id, instance_id))
    assert handle.result == LeaveResponse(Error.NONE, (LeaveMemberResult(member_id, instance_id, error),))
    assert handle.result.legacy_error() == error
    if removed is None:
        assert set(ctx.group().members) == set(formed.member_ids)
        assert ctx.state().value == state
        assert ctx.event_types(since=mark) == (["member_fenced"] if error == Error.FENCED_INSTANCE_ID else [])
        return
    removed_id = ids[removed]
    assert removed_id not in ctx.group().members
    assert ctx.timer_deadline("heartbeat", "g", removed_id) is None
    left = ctx.events("member_left")[-1]
    assert left["member_id"] == removed_id
    assert left["via"] == ("admin" if member_id == "" else "leave")
    if state in ("Stable", "CompletingRebalance"):
        assert ctx.state() is PREPARING and ctx.rebalance_causes(since=mark) == ["member_left"]
    else:
        assert ctx.state() is PREPARING and ctx.rebalance_causes(since=mark) == []


def test_batch_leave_with_mixed_results_starts_one_rebalance(ctx: Scenario) -> None:
    """KIP-345 batch leave: per-member results in request order; one rebalance for all the valid ones."""
    formed = ctx.form_group("i-0", "i-1", "i-2", None)
    leader, follower, third, dynamic = formed.member_ids
    pending = ctx.join("", None).result.member_id
    mark = ctx.mark()
    handle = ctx.leave(
        ("", "i-1"),  # admin removal
        (dynamic, None),  # dynamic member
        ("", "i-9"),  # unknown instance
        (third, "i-0"),  # fenced: i-0 is not third's
        ("ghost-u99", None),  # unknown member
        (pending, None),  # a pending KIP-394 id
        MemberIdentity(third, "i-2", reason="scale down"),
    )
    assert [(r.member_id, r.group_instance_id, r.error) for r in handle.result.members] == [
        ("", "i-1", Error.NONE),
        (dynamic, None, Error.NONE),
        ("", "i-9", Error.UNKNOWN_MEMBER_ID),
        (third, "i-0", Error.FENCED_INSTANCE_ID),
        ("ghost-u99", None, Error.UNKNOWN_MEMBER_ID),
        (pending, None, Error.NONE),
        (third, "i-2", Error.NONE),
    ]
    assert handle.result.error == Error.NONE
    assert handle.result.legacy_error() == Error.UNKNOWN_MEMBER_ID  # v0-2 see the first member error
    assert set(ctx.group().members) == {leader} and not ctx.group().pending_join_members
    assert ctx.rebalance_causes(since=mark) == ["member_left"]
    assert [(e["type"], e.get("member_id")) for e in ctx.journal[mark:]] == [
        ("member_left", follower),
        ("member_left", dynamic),
        ("member_fenced", third),
        ("member_left", pending),
        ("member_left", third),
        ("rebalance_started", None),
    ]


def test_a_leave_with_no_valid_member_changes_nothing(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    mark = ctx.mark()
    ctx.leave(("", "i-9"), ("ghost", None))
    assert ctx.state() is STABLE and ctx.event_types(since=mark) == []


def test_the_last_member_leaving_empties_the_group_and_persists_it(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    mark = ctx.mark()
    ctx.leave((formed.leader, "i-0"))
    assert ctx.state() is EMPTY and ctx.group().generation_id == 2
    assert ctx.event_types(since=mark) == ["member_left", "rebalance_started", "group_emptied"]
    record = ctx.records[-1]
    assert isinstance(record, GroupRecord) and record.value is not None
    assert record.members == () and record.value.generation == 2
    assert ctx.describe().leader is None


def test_leaving_during_completing_rebalance_answers_parked_syncs(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    _, follower, dynamic = formed.member_ids
    follower_sync = ctx.sync(follower, 2, "i-1")
    ctx.leave((dynamic, None))
    assert follower_sync.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)
    assert ctx.state() is PREPARING


def test_the_last_laggard_leaving_completes_the_join_phase(ctx: Scenario) -> None:
    """PreparingRebalance: maybeCompleteJoinPhase after the leave."""
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    leader, follower, dynamic = formed.member_ids
    ctx.join(follower, "i-1")
    leader_join = ctx.last_join_of(leader)
    ctx.leave((dynamic, None))
    assert ctx.state() is COMPLETING
    assert {m.member_id for m in leader_join.result.members} == {leader, follower}


def test_leaving_a_parked_join_answers_it_unknown_member_id(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    parked = ctx.parked()[0]
    ctx.leave((formed.leader, "i-0"))
    assert parked.result == JoinResponse(Error.UNKNOWN_MEMBER_ID)


def test_leaving_with_a_parked_sync_answers_it_unknown_member_id(ctx: Scenario) -> None:
    """docs/api.md §11: a removed member's parked sync is answered UNKNOWN_MEMBER_ID (Kafka leaves it hanging)."""
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    follower = formed.member_ids[1]
    follower_sync = ctx.sync(follower, 2, "i-1")
    ctx.leave(("", "i-1"))
    assert follower_sync.result == SyncResponse(Error.UNKNOWN_MEMBER_ID)


@pytest.mark.parametrize("state", STATES)
def test_leave_summary_per_state(ctx: Scenario, state: str) -> None:
    """The dynamic member leaves: what the group does next, per state."""
    formed = bring_to(ctx, state)
    if formed is None:
        result = ctx.leave(("x", None)).result
        assert result.error == Error.NONE and result.members[0].error == Error.UNKNOWN_MEMBER_ID
        return
    dynamic = formed.member_ids[2]
    result = ctx.leave((dynamic, None)).result
    if state == "Empty":
        assert result.members[0].error == Error.UNKNOWN_MEMBER_ID and ctx.state() is EMPTY
    else:
        assert result.members[0].error == Error.NONE and ctx.state() is PREPARING
