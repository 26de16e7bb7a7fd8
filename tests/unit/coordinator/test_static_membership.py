"""KIP-345 static membership and KIP-814 SkipAssignment, as Kafka's updateStaticMemberThenRebalanceOrCompleteJoin
and validateMember implement them: the six member.id x group.instance.id cases, restarts in every state and at
every join version, fencing of the replaced member (parked requests and later requests), absent static members,
the downgrade path and admin removal by instance id.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import GroupDeltaRecord, GroupRecord
from berth.coordinator.protocol import Error, JoinMember, JoinResponse
from berth.coordinator.protocol import JoinProtocol as Protocol

from .scenario import (
    COMPLETING,
    EMPTY,
    PREPARING,
    PROTOCOLS,
    RANGE,
    REBALANCE_MS,
    ROUNDROBIN,
    SESSION_MS,
    STABLE,
    Scenario,
    bring_to,
)

LONG_SESSION_MS = 2 * REBALANCE_MS  # sessions that outlive a rebalance timeout (Kafka's "long session" tests)


def last_record(ctx: Scenario) -> GroupRecord | GroupDeltaRecord:
    return next(r for r in reversed(ctx.records) if isinstance(r, GroupRecord | GroupDeltaRecord))


# ------------------------------------------------------------------------------------- the six KIP cases

SIX_CASES = [
    # (case, member id, instance id, expected error, rebalance?)
    ("1 known member id, no instance id", "dynamic", None, Error.NONE, False),
    ("2 unknown member id, no instance id", "unknown", None, Error.UNKNOWN_MEMBER_ID, False),
    ("3 empty member id, no instance id", "", None, Error.MEMBER_ID_REQUIRED, False),
    ("4a known member id, its own instance id", "static", "i-1", Error.NONE, False),
    ("4b known member id, another member's instance id", "static", "i-0", Error.FENCED_INSTANCE_ID, False),
    ("5a unknown member id, known instance id", "unknown", "i-1", Error.FENCED_INSTANCE_ID, False),
    ("5b unknown member id, unknown instance id", "unknown", "i-9", Error.UNKNOWN_MEMBER_ID, False),
    ("6a empty member id, known instance id", "", "i-1", Error.NONE, False),
    ("6b empty member id, unknown instance id", "", "i-9", None, True),
]


@pytest.mark.parametrize(("case", "who", "instance_id", "error", "rebalance"), SIX_CASES, ids=[c[0] for c in SIX_CASES])
def test_kip345_join_cases_in_a_stable_group(
    ctx: Scenario, case: str, who: str, instance_id: str | None, error: Error | None, rebalance: bool
) -> None:
    """The closing comments of KIP-345 (as revised for KIP-394), at JoinGroup v5+ against a Stable group."""
    formed = ctx.form_group("i-0", "i-1", None)
    member_id = {"dynamic": formed.member_ids[2], "static": formed.member("i-1"), "": ""}.get(who, "ghost-u99")
    mark = ctx.mark()
    handle = ctx.join(member_id, instance_id)
    if error is None:
        assert handle.parked
    else:
        assert handle.error == error
    assert bool(ctx.rebalance_causes(since=mark)) == rebalance
    assert ctx.state() is (PREPARING if rebalance else STABLE)
    if error == Error.NONE:
        response = handle.result
        assert response.generation_id == 1 and response.leader == formed.leader and response.members == ()
        if case.startswith("6a"):
            assert response.member_id not in formed.member_ids and response.member_id.startswith("i-1-")
            assert ctx.sync(response.member_id, 1, "i-1").result.assignment == formed.assignments[formed.member("i-1")]
        else:
            assert response.member_id == member_id


# --------------------------------------------------------------------------------- restarts in Stable


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9])
def test_static_follower_restart_in_stable_gets_a_new_id_and_the_old_assignment_without_rebalance(
    ctx: Scenario, version: int
) -> None:
    formed = ctx.form_group("i-0", "i-1", None)
    old = formed.member("i-1")
    ctx.heartbeat(old, 1, "i-1")
    heard = ctx.now
    ctx.advance(4_000)
    mark = ctx.mark()
    handle = ctx.join("", "i-1", version=version)
    new = ctx.member_of("i-1")
    assert new != old and new.startswith("i-1-")
    assert handle.result == JoinResponse(
        Error.NONE,
        member_id=new,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader=formed.leader,
        skip_assignment=False,
        members=(),
    )
    assert ctx.state() is STABLE and ctx.group().generation_id == 1
    assert ctx.event_types(since=mark) == ["static_member_replaced"]
    replaced = ctx.events("static_member_replaced")[-1]
    assert replaced["old_member_id"] == old and replaced["member_id"] == new
    assert replaced["offline_ms"] == ctx.now - heard == 4_000 and replaced["rebalance"] is False
    # The new id is persisted with the old assignment, as a swap that costs the same in any group size; its
    # sync returns the assignment.
    delta = last_record(ctx)
    assert isinstance(delta, GroupDeltaRecord)
    assert ([m.member_id for m in delta.upserted], delta.removed) == ([new], (old,))
    assert delta.upserted[0].assignment == formed.assignments[old]
    assert set(ctx.persisted_members()) == {formed.leader, new, formed.member_ids[2]}
    sync = ctx.sync(new, 1, "i-1")
    assert sync.result.assignment == formed.assignments[old]
    # The replaced member is a zombie now.
    assert ctx.heartbeat(old, 1, "i-1").error == Error.FENCED_INSTANCE_ID
    assert ctx.heartbeat(new, 1, "i-1").error == Error.NONE


@pytest.mark.parametrize("version", [5, 6, 7, 8])
def test_static_leader_restart_before_v9_gets_the_old_leader_id_and_no_member_list(ctx: Scenario, version: int) -> None:
    """Before KIP-814 the restarted leader is not told it leads (so it does not reassign): old leader id, no list."""
    formed = ctx.form_group("i-0", "i-1", None)
    old_leader = formed.leader
    mark = ctx.mark()
    handle = ctx.join("", "i-0", version=version)
    new = ctx.member_of("i-0")
    response = handle.result
    assert (response.error, response.member_id, response.generation_id) == (Error.NONE, new, 1)
    assert response.leader == old_leader != new
    assert response.members == () and response.skip_assignment is False
    assert ctx.group().leader_id == new  # the coordinator itself knows who leads
    assert ctx.state() is STABLE and ctx.rebalance_causes(since=mark) == []


def test_static_leader_restart_at_v9_is_told_to_skip_assignment_with_the_member_list(ctx: Scenario) -> None:
    """KIP-814: skip_assignment, the leader's new id, and every member's subscription, without a rebalance."""
    formed = ctx.form_group("i-0", "i-1", None)
    mark = ctx.mark()
    handle = ctx.join("", "i-0", version=9)
    new = ctx.member_of("i-0")
    response = handle.result
    assert (response.error, response.member_id, response.leader, response.skip_assignment) == (
        Error.NONE,
        new,
        new,
        True,
    )
    assert response.generation_id == 1 and response.protocol_name == "range"
    assert set(response.members) == {
        JoinMember(new, "i-0", RANGE.metadata),
        JoinMember(formed.member("i-1"), "i-1", RANGE.metadata),
        JoinMember(formed.member_ids[2], None, RANGE.metadata),
    }
    assert ctx.state() is STABLE and ctx.rebalance_causes(since=mark) == []
    # The leader then syncs with no assignment to collect its own (KIP-814).
    sync = ctx.sync(new, 1, "i-0", assignments={})
    assert sync.result.assignment == formed.assignments[formed.leader]
    assert ctx.sync(formed.member("i-1"), 1, "i-1").result.assignment == formed.assignments[formed.member("i-1")]


def test_static_restart_with_new_metadata_for_the_same_protocol_persists_it_without_rebalance(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    handle = ctx.join("", "i-1", protocols=(Protocol("range", b"new-range-subscription"), ROUNDROBIN))
    assert handle.error == Error.NONE and ctx.state() is STABLE
    stored = ctx.persisted_members()[ctx.member_of("i-1")]
    assert stored.subscription == b"new-range-subscription"


def test_static_restart_that_changes_the_selected_protocol_rebalances(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", None)
    mark = ctx.mark()
    handle = ctx.join("", "i-1", protocols=(ROUNDROBIN,))
    assert handle.parked
    assert ctx.state() is PREPARING
    assert ctx.event_types(since=mark) == ["static_member_replaced", "rebalance_started"]
    assert ctx.events("static_member_replaced")[-1]["rebalance"] is True
    assert ctx.rebalance_causes(since=mark) == ["static_replacement"]
    assert ctx.join(formed.member("i-1"), "i-1").error == Error.FENCED_INSTANCE_ID  # the old id is gone
    joins = ctx.rejoin_all(formed)  # leader and dynamic member rejoin: the phase completes
    assert all(j.error == Error.NONE for j in joins)
    assert handle.result.protocol_name == "roundrobin" and handle.result.generation_id == 2


def test_static_restart_persist_failure_reverts_to_the_old_member(ctx: Scenario) -> None:
    """Java coordinator: the old member id, protocols and timeouts come back; the join gets the append error."""
    formed = ctx.form_group("i-0", "i-1", None)
    old = formed.member("i-1")
    ctx.fail_next_writes(1)
    mark = ctx.mark()
    handle = ctx.join(
        "",
        "i-1",
        version=9,
        session_ms=SESSION_MS + 5_000,
        rebalance_ms=REBALANCE_MS + 5_000,
        protocols=(Protocol("range", b"other"), ROUNDROBIN),
    )
    assert handle.result == JoinResponse(
        Error.COORDINATOR_NOT_AVAILABLE,
        member_id="",
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader=formed.leader,
    )
    assert ctx.member_of("i-1") == old
    member = ctx.member(old)
    assert member.protocols == PROTOCOLS
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (SESSION_MS, REBALANCE_MS)
    assert member.assignment == formed.assignments[old]
    assert len(ctx.group().members) == 3 and ctx.state() is STABLE
    assert ctx.event_types(since=mark) == []  # the replacement never happened
    assert ctx.timer_deadline("heartbeat", "g", old) == ctx.now + SESSION_MS
    assert ctx.heartbeat(old, 1, "i-1").error == Error.NONE


def test_static_leader_restart_persist_failure_keeps_the_old_leader(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.fail_next_writes(1)
    handle = ctx.join("", "i-0", version=9)
    assert handle.error == Error.COORDINATOR_NOT_AVAILABLE and handle.result.leader == formed.leader
    assert ctx.group().leader_id == formed.leader == ctx.member_of("i-0")


# ------------------------------------------------------------------------------ restarts while rebalancing


def test_static_restart_while_completing_rebalance_rebalances_and_fences_the_old_parked_sync(ctx: Scenario) -> None:
    """The leader may already be assigning for the old id, so the restart starts a rebalance (Kafka)."""
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    _, old, dynamic = formed.member_ids
    old_sync = ctx.sync(old, 2, "i-1")
    dynamic_sync = ctx.sync(dynamic, 2)
    assert old_sync.parked and dynamic_sync.parked
    mark = ctx.mark()
    restart = ctx.join("", "i-1")
    assert restart.parked and ctx.state() is PREPARING
    assert old_sync.error == Error.FENCED_INSTANCE_ID
    assert dynamic_sync.error == Error.REBALANCE_IN_PROGRESS
    assert ctx.event_types(since=mark) == ["member_fenced", "static_member_replaced", "rebalance_started"]
    assert ctx.events("member_fenced")[-1]["member_id"] == old
    assert ctx.rebalance_causes(since=mark) == ["static_replacement"]


def test_static_restart_while_preparing_rebalance_fences_the_old_parked_join(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    leader, old, dynamic = formed.member_ids
    old_join = ctx.join(old, "i-1")
    assert old_join.parked
    mark = ctx.mark()
    restart = ctx.join("", "i-1")
    new = ctx.member_of("i-1")
    assert old_join.result == JoinResponse(Error.FENCED_INSTANCE_ID, member_id=old)
    assert restart.parked and ctx.state() is PREPARING
    assert ctx.event_types(since=mark) == ["member_fenced", "static_member_replaced"]
    assert ctx.events("static_member_replaced")[-1]["rebalance"] is False
    # The phase completes with the new id once the last member is in.
    ctx.join(dynamic, None)
    assert ctx.state() is COMPLETING
    assert restart.result.member_id == new and restart.result.generation_id == 2
    leader_join = ctx.last_join_of(leader)
    assert {m.member_id for m in leader_join.result.members} == {leader, new, dynamic}


def test_static_restart_of_the_last_missing_member_completes_the_join_phase(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    ctx.join(formed.member_ids[2], None)
    assert ctx.state() is PREPARING
    restart = ctx.join("", "i-1")
    assert ctx.state() is COMPLETING and restart.result.member_id == ctx.member_of("i-1")


def test_static_leader_restart_while_preparing_moves_the_leadership_to_the_new_id(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    _, follower, dynamic = formed.member_ids
    restart = ctx.join("", "i-0")
    new = ctx.member_of("i-0")
    assert ctx.group().leader_id == new
    ctx.join(follower, "i-1")
    ctx.join(dynamic, None)
    assert restart.result.leader == new and len(restart.result.members) == 3


def test_two_processes_with_one_instance_id_the_later_one_wins(ctx: Scenario) -> None:
    first = ctx.join("", "i-0")
    second = ctx.join("", "i-0")
    assert first.result == JoinResponse(Error.FENCED_INSTANCE_ID, member_id="i-0-u1")
    assert second.parked and ctx.member_of("i-0") == "i-0-u2"
    assert len(ctx.group().members) == 1


# ----------------------------------------------------------------------------- the replaced member (zombie)


ZOMBIE_REQUESTS = ["join", "sync", "heartbeat", "commit", "leave"]


@pytest.mark.parametrize("request_kind", ZOMBIE_REQUESTS)
def test_the_replaced_member_is_fenced_on_every_request(ctx: Scenario, request_kind: str) -> None:
    """Duplicate instance ids: the old process keeps using its member id and is fenced (member_fenced journaled)."""
    formed = ctx.form_group("i-0", "i-1")
    zombie = formed.member("i-1")
    ctx.join("", "i-1")
    mark = ctx.mark()
    if request_kind == "join":
        error = ctx.join(zombie, "i-1").error
    elif request_kind == "sync":
        error = ctx.sync(zombie, 1, "i-1").error
    elif request_kind == "heartbeat":
        error = ctx.heartbeat(zombie, 1, "i-1").error
    elif request_kind == "commit":
        commit = ctx.commit(zombie, 1, "i-1")
        error = commit.error
        assert [p.error for t in commit.result.topics for p in t.partitions] == [Error.FENCED_INSTANCE_ID]
        assert ctx.committed() == {}
    else:
        leave = ctx.leave((zombie, "i-1"))
        assert leave.error == Error.NONE
        (result,) = leave.result.members
        error = result.error
    assert error == Error.FENCED_INSTANCE_ID
    assert ctx.event_types(since=mark) == ["member_fenced"]
    fenced = ctx.events("member_fenced")[-1]
    assert (fenced["member_id"], fenced["group_instance_id"]) == (zombie, "i-1")
    assert ctx.state() is STABLE and len(ctx.group().members) == 2


def test_a_zombie_is_journaled_once_per_episode_not_per_request(ctx: Scenario) -> None:
    """A duplicate that keeps heartbeating with a superseded member id is journaled once, not on every heartbeat
    (each would be a durable write); a new takeover of the instance starts a new episode."""
    formed = ctx.form_group("i-0", "i-1")
    zombie = formed.member("i-1")
    ctx.join("", "i-1")
    mark = ctx.mark()
    writes = len(ctx.write_log)
    for _ in range(50):
        assert ctx.heartbeat(zombie, 1, "i-1").error == Error.FENCED_INSTANCE_ID
    assert ctx.commit(zombie, 1, "i-1").error == Error.FENCED_INSTANCE_ID
    assert ctx.event_types(since=mark) == ["member_fenced"]
    assert len(ctx.write_log) == writes + 1
    # The instance changes hands again: the next zombie heartbeat is a new episode, journaled once more.
    second = ctx.member_of("i-1")
    ctx.join("", "i-1")
    mark = ctx.mark()
    for member_id in (zombie, second, zombie, second):
        assert ctx.heartbeat(member_id, 1, "i-1").error == Error.FENCED_INSTANCE_ID
    assert [e["member_id"] for e in ctx.journal[mark:] if e["type"] == "member_fenced"] == [zombie, second]


# ------------------------------------------------------------------------------- absent static members


def test_absent_static_members_stay_at_the_rebalance_timeout_while_dynamic_ones_are_removed(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", None, session_ms=LONG_SESSION_MS)
    leader, follower, dynamic = formed.member_ids
    leader_join = ctx.join(leader, "i-0", session_ms=LONG_SESSION_MS)
    mark = ctx.mark()
    ctx.advance(REBALANCE_MS)
    assert ctx.state() is COMPLETING and ctx.group().generation_id == 2
    assert set(ctx.group().members) == {leader, follower}
    expired = ctx.events("member_expired")
    assert [(e["member_id"], e["phase"]) for e in expired] == [(dynamic, "rebalance")]
    assert {m.member_id for m in leader_join.result.members} == {leader, follower}
    assert ctx.event_types(since=mark) == ["member_expired", "rebalance_completed"]


def stuck_group(ctx: Scenario) -> None:
    """Kafka's groupStuckInRebalanceTimeoutDueToNonjoinedStaticMember: nobody rejoined, only static members remain,
    so the join phase waits another rebalance timeout instead of forming an empty generation."""
    formed = ctx.form_group("i-0", "i-1", session_ms=LONG_SESSION_MS)
    static_leader, static_follower = formed.member_ids
    dynamic_join = ctx.join("", None, version=3, session_ms=LONG_SESSION_MS)
    dynamic = ctx.group().leader_id
    ctx.advance(REBALANCE_MS)
    # The dynamic member, the only one that joined, leads generation 2; the static ones were kept.
    response = dynamic_join.result
    assert response.member_id == response.leader != static_leader
    dynamic = response.member_id
    assert len(response.members) == 3 and response.generation_id == 2 and ctx.state() is COMPLETING
    # The static follower leaves by member id only (the downgrade path): a rebalance nobody joins.
    assert ctx.leave((static_follower, None)).result.members[0].error == Error.NONE
    assert ctx.state() is PREPARING
    ctx.advance(REBALANCE_MS)
    group = ctx.group()
    assert set(group.members) == {static_leader} and group.generation_id == 2 and ctx.state() is PREPARING
    assert ctx.timer_deadline("join", "g") == ctx.now + REBALANCE_MS
    assert [e["member_id"] for e in ctx.events("member_expired")] == [dynamic]


def test_stuck_rebalance_of_only_absent_static_members_is_rescheduled(ctx: Scenario) -> None:
    stuck_group(ctx)
    ctx.advance(REBALANCE_MS - 1)
    assert ctx.state() is PREPARING and ctx.timer_deadline("join", "g") == ctx.now + 1


def test_stuck_rebalance_completes_when_the_static_member_comes_back(ctx: Scenario) -> None:
    stuck_group(ctx)
    back = ctx.join("", "i-0")
    assert back.error == Error.NONE
    assert back.result.generation_id == 3 and ctx.state() is COMPLETING
    assert back.result.leader == back.result.member_id and len(back.result.members) == 1


def test_stuck_rebalance_ends_empty_when_the_static_member_never_comes_back(ctx: Scenario) -> None:
    stuck_group(ctx)
    ctx.advance(LONG_SESSION_MS)
    group = ctx.group()
    assert ctx.state() is EMPTY and group.generation_id == 3 and not group.members
    assert ctx.events("member_expired")[-1]["phase"] == "session"
    assert ctx.event_types()[-1] == "group_emptied"


# ------------------------------------------------------------------------------------- leaving, removal


def test_static_member_leaving_by_member_id_only_drops_its_instance_mapping(ctx: Scenario) -> None:
    """KIP-345 "Switching from Static Member to Dynamic Member": the member and its static entry both go."""
    formed = ctx.form_group("i-0", "i-1")
    follower = formed.member("i-1")
    leave = ctx.leave((follower, None))
    assert leave.result.members[0].error == Error.NONE
    assert ctx.group().static_member_id("i-1") is None and follower not in ctx.group().members
    mark = ctx.mark()
    rejoin = ctx.join("", "i-1")  # comes back as a new static member: no replacement
    assert rejoin.parked and ctx.events("static_member_replaced") == []
    assert ctx.event_types(since=mark) == ["member_joined"]


def test_admin_removal_by_instance_id_with_an_empty_member_id(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", None)
    removed = formed.member("i-1")
    mark = ctx.mark()
    leave = ctx.leave(("", "i-1"))
    (result,) = leave.result.members
    assert (result.member_id, result.group_instance_id, result.error) == ("", "i-1", Error.NONE)
    assert removed not in ctx.group().members and ctx.group().static_member_id("i-1") is None
    assert ctx.event_types(since=mark) == ["member_left", "rebalance_started"]
    left = ctx.events("member_left")[-1]
    assert (left["member_id"], left["group_instance_id"], left["via"]) == (removed, "i-1", "admin")
    assert ctx.rebalance_causes(since=mark) == ["member_left"]


def test_admin_removal_of_a_member_parked_in_a_join_answers_it_unknown_member_id(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    parked = next(h for h in ctx.parked() if h.kind == "join")
    ctx.leave(("", "i-0"))
    assert parked.result == JoinResponse(Error.UNKNOWN_MEMBER_ID)


def test_static_members_of_a_reloaded_group_restart_without_rebalance(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    fresh = ctx.reload()
    mark = fresh.mark()
    restart = fresh.join("", "i-1")
    assert restart.error == Error.NONE and fresh.state() is STABLE
    assert fresh.sync(restart.result.member_id, 1, "i-1").result.assignment == formed.assignments[formed.member("i-1")]
    assert fresh.rebalance_causes(since=mark) == []
    fresh.close()


def test_a_restarted_member_session_timer_starts_with_the_replaced_members_timeout(ctx: Scenario) -> None:
    """Kafka reschedules the new id's heartbeat right after replaceStaticMember, before updateMember applies the
    request's timeouts: the first deadline uses the old session timeout, later heartbeats the new one."""
    ctx.form_group("i-0", "i-1")
    ctx.join("", "i-1", session_ms=SESSION_MS * 3)
    new = ctx.member_of("i-1")
    assert ctx.member(new).session_timeout_ms == 3 * SESSION_MS
    assert ctx.timer_deadline("heartbeat", "g", new) == ctx.now + SESSION_MS
    assert ctx.heartbeat(new, 1, "i-1").error == Error.NONE
    assert ctx.timer_deadline("heartbeat", "g", new) == ctx.now + 3 * SESSION_MS
    ctx.advance(SESSION_MS * 2)
    assert new in ctx.group().members  # the leader expired, the restarted follower did not
    assert ctx.events("member_expired")[-1]["group_instance_id"] == "i-0"
