"""The classic group's timers, as Kafka arms them: the initial rebalance delay and its extension chain
(group.initial.rebalance.delay.ms within the remaining rebalance budget), the rebalance timeout of a join
phase, session expiry, the new-member join timeout (5 min), and the sync timeout.

Time moves only through ``advance`` (docs/api.md §9).
"""

from __future__ import annotations

import pytest

from berth.coordinator.protocol import Error, JoinResponse, SyncResponse
from berth.coordinator.protocol import JoinProtocol as Protocol

from .scenario import COMPLETING, EMPTY, PREPARING, REBALANCE_MS, ROUNDROBIN, SESSION_MS, STABLE, Scenario, bring_to

DELAY_MS = 3_000  # the default group.initial.rebalance.delay.ms


# ------------------------------------------------------------------------------ initial rebalance delay


def test_a_lone_first_member_waits_out_the_initial_delay(ctx: Scenario) -> None:
    start = ctx.now
    handle = ctx.join("", "i-0")
    assert ctx.timer_deadline("join", "g") == start + DELAY_MS
    ctx.advance(DELAY_MS - 1)
    assert handle.parked and ctx.state() is PREPARING
    ctx.advance(1)
    assert handle.error == Error.NONE and handle.answered_ms == start + DELAY_MS
    assert ctx.state() is COMPLETING and handle.result.generation_id == 1


def test_every_member_that_joins_during_the_delay_extends_it_once_more(ctx: Scenario) -> None:
    start = ctx.now
    first = ctx.join("", "i-0")
    ctx.advance(1_000)
    second = ctx.join("", "i-1")  # new member added: the delay is extended when it runs out
    ctx.advance(DELAY_MS - 1_000)
    assert second.parked and ctx.timer_deadline("join", "g") == start + 2 * DELAY_MS
    ctx.advance(DELAY_MS)
    assert first.answered_ms == second.answered_ms == start + 2 * DELAY_MS
    assert len(first.result.members) == 2


def test_even_a_fully_joined_initial_rebalance_waits_for_the_delay(ctx: Scenario) -> None:
    """Kafka never completes an initial rebalance early: maybeCompleteJoinPhase skips previousState Empty."""
    ctx.join("", "i-0")
    ctx.join("", "i-1")
    assert ctx.group().has_all_members_joined() and ctx.state() is PREPARING


def test_the_extension_chain_is_bounded_by_the_rebalance_timeout(ctx: Scenario) -> None:
    """tryCompleteInitialRebalanceElseSchedule: new delay = min(delay, remaining); remaining -= the previous delay.

    With a 10 s rebalance timeout: 3 s + 3 s + 3 s + 1 s, however many members keep arriving.
    """
    start = ctx.now
    rebalance_ms = 10_000
    first = ctx.join("", "i-0", rebalance_ms=rebalance_ms)
    deadlines = [ctx.timer_deadline("join", "g")]
    for k in range(1, 20):
        ctx.advance(900)
        if first.answered:
            break
        ctx.join("", f"i-{k}", rebalance_ms=rebalance_ms)
        deadline = ctx.timer_deadline("join", "g")
        if deadline != deadlines[-1]:
            deadlines.append(deadline)
    assert [d - start for d in deadlines if d is not None] == [3_000, 6_000, 9_000, 10_000]
    assert first.answered_ms == start + rebalance_ms


def test_the_remaining_budget_uses_the_groups_largest_rebalance_timeout(ctx: Scenario) -> None:
    start = ctx.now
    ctx.join("", "i-0", rebalance_ms=4_000)
    ctx.advance(1_000)
    ctx.join("", "i-1", rebalance_ms=4_000)
    ctx.advance(2_000)  # the delay runs out: remaining = 4000 - 3000 = 1000 -> extend by 1 s
    assert ctx.timer_deadline("join", "g") == start + 4_000


@pytest.mark.parametrize("delay_ms", [0, 100])
def test_a_configured_initial_delay(delay_ms: int) -> None:
    ctx = Scenario(group_initial_rebalance_delay_ms=delay_ms)
    try:
        handle = ctx.join("", "i-0")
        ctx.advance(delay_ms)
        assert handle.error == Error.NONE
    finally:
        ctx.close()


def test_a_group_that_emptied_gets_the_initial_delay_again(ctx: Scenario) -> None:
    """Any rebalance entered from Empty is an initial one (delay and extensions)."""
    bring_to(ctx, "Empty")
    start = ctx.now
    handle = ctx.join("", "i-5")
    assert ctx.timer_deadline("join", "g") == start + DELAY_MS
    ctx.advance(DELAY_MS)
    assert handle.result.generation_id == 3


# ----------------------------------------------------------------------------------- rebalance timeout


def test_the_join_phase_ends_at_the_rebalance_timeout_without_the_laggards(ctx: Scenario) -> None:
    formed = ctx.form_group(None, None, session_ms=3 * REBALANCE_MS)
    leader, follower = formed.member_ids
    start = ctx.now
    join = ctx.join(leader, None, session_ms=3 * REBALANCE_MS)
    assert ctx.timer_deadline("join", "g") == start + REBALANCE_MS
    ctx.advance(REBALANCE_MS - 1)
    assert join.parked
    ctx.advance(1)
    assert join.result.generation_id == 2 and {m.member_id for m in join.result.members} == {leader}
    assert follower not in ctx.group().members
    expired = ctx.events("member_expired")[-1]
    assert (expired["member_id"], expired["phase"]) == (follower, "rebalance")


def test_the_rebalance_timeout_is_the_largest_of_the_members(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", session_ms=10 * REBALANCE_MS)
    ctx.join(formed.leader, "i-0", rebalance_ms=2 * REBALANCE_MS, session_ms=10 * REBALANCE_MS)
    assert ctx.timer_deadline("join", "g") == ctx.now + 2 * REBALANCE_MS


def test_a_new_leader_is_elected_among_the_joined_when_the_leader_does_not_rejoin(ctx: Scenario) -> None:
    formed = ctx.form_group(None, None, session_ms=3 * REBALANCE_MS)
    leader, follower = formed.member_ids
    changed = (Protocol("range", b"changed"), ROUNDROBIN)
    follower_join = ctx.join(follower, None, session_ms=3 * REBALANCE_MS, protocols=changed)
    assert follower_join.parked and ctx.rebalance_causes()[-1] == "metadata_change"
    ctx.advance(REBALANCE_MS)
    assert follower_join.result.leader == follower and ctx.group().leader_id == follower
    assert leader not in ctx.group().members


# ------------------------------------------------------------------------------------------- sessions


def test_a_member_that_stops_heartbeating_is_removed_at_its_session_timeout(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    leader, follower = formed.member_ids
    mark = ctx.mark()
    ctx.advance(SESSION_MS // 2)
    assert ctx.heartbeat(leader, 1, "i-0").error == Error.NONE
    ctx.advance(SESSION_MS // 2)
    assert follower not in ctx.group().members and ctx.state() is PREPARING
    assert ctx.heartbeat(leader, 1, "i-0").error == Error.REBALANCE_IN_PROGRESS
    assert ctx.event_types(since=mark) == ["member_expired", "rebalance_started"]
    expired = ctx.events("member_expired")[-1]
    assert (expired["member_id"], expired["group_instance_id"], expired["phase"]) == (follower, "i-1", "session")
    assert ctx.rebalance_causes(since=mark) == ["member_expired"]


def test_session_expiry_fires_at_the_last_heartbeat_plus_the_session_timeout(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    ctx.advance(4_000)
    ctx.heartbeat(formed.leader, 1, "i-0")
    last = ctx.now
    ctx.advance(SESSION_MS - 1)
    assert formed.leader in ctx.group().members
    ctx.advance(1)
    expired = ctx.events("member_expired")[-1]
    assert ctx.state() is EMPTY and expired["ts_ms"] == last + SESSION_MS
    # How long it was silent: the operator tells a restart's expiry from a stalled client's by it.
    assert expired["offline_ms"] == SESSION_MS


def test_an_expirys_offline_time_runs_from_the_members_last_commit(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    ctx.advance(4_000)
    ctx.commit(formed.leader, 1, "i-0")
    ctx.advance(SESSION_MS)
    assert ctx.events("member_expired")[-1]["offline_ms"] == SESSION_MS


def test_the_last_member_expiring_empties_the_group(ctx: Scenario) -> None:
    ctx.form_group("i-0")
    mark = ctx.mark()
    ctx.advance(SESSION_MS)
    assert ctx.state() is EMPTY and ctx.group().generation_id == 2
    assert ctx.event_types(since=mark) == ["member_expired", "rebalance_started", "group_emptied"]


def test_a_member_parked_in_a_join_is_not_expired(ctx: Scenario) -> None:
    """hasSatisfiedHeartbeat: an existing member awaiting a join (or sync) satisfies its heartbeats; the
    ignored expiry arms nothing (Kafka), completing the join re-arms it."""
    formed = ctx.form_group("i-0", "i-1")
    follower = formed.member("i-1")
    leader_join = ctx.join(formed.leader, "i-0")
    for _ in range(4):
        ctx.advance(SESSION_MS // 2)
        assert ctx.heartbeat(follower, 1, "i-1").error == Error.REBALANCE_IN_PROGRESS
    assert formed.leader in ctx.group().members and leader_join.parked
    assert ctx.timer_deadline("heartbeat", "g", formed.leader) is None
    ctx.join(follower, "i-1")
    assert leader_join.error == Error.NONE
    assert ctx.timer_deadline("heartbeat", "g", formed.leader) == ctx.now + SESSION_MS


def test_an_expiry_ignored_while_parked_is_rearmed_when_the_sync_is_answered(ctx: Scenario) -> None:
    """propagateAssignment reschedules the session of every member it answers (Kafka)."""
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = formed.member_ids
    follower_sync = ctx.sync(follower, 2, "i-1")
    dynamic_sync = ctx.sync(dynamic, 2)
    ctx.advance(SESSION_MS // 2)
    ctx.heartbeat(leader, 2, "i-0")
    ctx.advance(SESSION_MS // 2)  # the parked members' sessions run out: ignored, nothing re-armed
    assert follower in ctx.group().members and dynamic in ctx.group().members
    assert ctx.timer_deadline("heartbeat", "g", follower) is None
    ctx.sync(leader, 2, "i-0", assignments={follower: b"f", dynamic: b"d"})
    assert follower_sync.result.assignment == b"f" and dynamic_sync.result.assignment == b"d"
    assert ctx.timer_deadline("heartbeat", "g", follower) == ctx.now + SESSION_MS


# ------------------------------------------------------------------------------ new-member join timeout


def test_a_new_members_parked_join_times_out_after_five_minutes(ctx: Scenario) -> None:
    """The session timeout does not apply to a new member parked in its first join: the 5 min join timeout does."""
    long_rebalance = 20 * 60_000
    formed = ctx.form_group("i-0", "i-1", session_ms=30 * 60_000, rebalance_ms=long_rebalance)
    start = ctx.now
    new = ctx.join("", "i-new", session_ms=SESSION_MS, rebalance_ms=long_rebalance)
    new_id = ctx.member_of("i-new")
    assert ctx.timer_deadline("heartbeat", "g", new_id) == start + 300_000
    ctx.advance(SESSION_MS + 1)
    assert new.parked  # its session is not what bounds it
    ctx.advance(300_000 - SESSION_MS - 1)
    assert new.result == JoinResponse(Error.UNKNOWN_MEMBER_ID)
    expired = ctx.events("member_expired")[-1]
    assert (expired["member_id"], expired["phase"]) == (new_id, "new_member_join")
    assert ctx.state() is PREPARING and set(ctx.group().members) == set(formed.member_ids)


def test_the_new_member_join_timeout_is_configurable(ctx: Scenario) -> None:
    short = Scenario(new_member_join_timeout_ms=60_000)
    try:
        short.form_group("i-0", session_ms=30 * 60_000, rebalance_ms=30 * 60_000)
        new = short.join("", "i-new", rebalance_ms=30 * 60_000)
        short.advance(60_000)
        assert new.error == Error.UNKNOWN_MEMBER_ID
    finally:
        short.close()


def test_a_new_member_joined_in_time_gets_its_session_after_the_join(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    new = ctx.join("", "i-2")
    ctx.rejoin_all(formed)
    assert new.error == Error.NONE
    assert ctx.timer_deadline("heartbeat", "g", ctx.member_of("i-2")) == ctx.now + SESSION_MS
    assert not ctx.member(ctx.member_of("i-2")).is_new


# ---------------------------------------------------------------------------------------- sync timeout


def test_members_that_never_sync_are_removed_and_a_rebalance_starts(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = formed.member_ids
    completed = ctx.now
    leader_sync = ctx.sync(leader, 2, "i-0", assignments={leader: b"x", follower: b"y", dynamic: b"z"})
    assert leader_sync.result.assignment == b"x" and ctx.state() is STABLE
    # The follower and the dynamic member keep heartbeating but never sync.
    mark = ctx.mark()
    ctx.keep_alive(completed + REBALANCE_MS - ctx.now, (leader, "i-0"), (follower, "i-1"), (dynamic, None))
    assert set(ctx.group().members) == {leader} and ctx.state() is PREPARING
    phases = {(e["member_id"], e["phase"]) for e in ctx.events("member_expired")}
    assert phases == {(follower, "sync"), (dynamic, "sync")}
    assert ctx.rebalance_causes(since=mark) == ["sync_timeout"]


def test_a_leader_that_never_syncs_is_removed_and_parked_followers_told_to_rejoin(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = formed.member_ids
    follower_sync = ctx.sync(follower, 2, "i-1")
    dynamic_sync = ctx.sync(dynamic, 2)
    mark = ctx.mark()
    ctx.keep_alive(REBALANCE_MS, (leader, "i-0"))  # the leader heartbeats but never syncs
    assert ctx.rebalance_causes(since=mark) == ["sync_timeout"]
    assert leader not in ctx.group().members
    assert follower_sync.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)
    assert dynamic_sync.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)
    assert ctx.state() is PREPARING and set(ctx.group().members) == {follower, dynamic}


def test_everyone_synced_cancels_the_sync_timeout(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1", None)
    assert ctx.timer_deadline("sync", "g") is None


def test_a_new_rebalance_cancels_the_sync_timeout(ctx: Scenario) -> None:
    bring_to(ctx, "CompletingRebalance")
    assert ctx.timer_deadline("sync", "g") == ctx.now + REBALANCE_MS
    ctx.join("", "i-3")
    assert ctx.timer_deadline("sync", "g") is None
    assert ctx.state() is PREPARING


def test_a_static_member_restarted_before_it_synced_still_counts_as_missing_at_the_sync_timeout(
    ctx: Scenario,
) -> None:
    """Kafka's replaceStaticMember leaves the old id in pendingSyncMembers: even if the new id syncs, the sync
    timeout finds the old id missing and starts a rebalance (nobody is removed: the old id is gone already)."""
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = formed.member_ids
    completed = ctx.now
    ctx.sync(leader, 2, "i-0", assignments={follower: b"F"})
    ctx.sync(dynamic, 2)
    restart = ctx.join("", "i-1")  # Stable: no rebalance
    new = ctx.member_of("i-1")
    assert restart.error == Error.NONE and ctx.sync(new, 2, "i-1").result.assignment == b"F"
    mark = ctx.mark()
    members = [(leader, "i-0"), (new, "i-1"), (dynamic, None)]
    ctx.keep_alive(completed + REBALANCE_MS - ctx.now, *members)
    assert ctx.rebalance_causes(since=mark) == ["sync_timeout"]
    assert ctx.events("member_expired", group="g") == [] and len(ctx.group().members) == 3


@pytest.mark.parametrize("how", ["heartbeat", "commit"])
def test_a_new_member_heartbeating_while_parked_trades_its_join_timeout_for_its_session(
    ctx: Scenario, how: str
) -> None:
    """Kafka reschedules the session on a heartbeat (and a commit) in PreparingRebalance, replacing a new
    member's join timeout with its session timeout."""
    formed = ctx.form_group("i-0", "i-1", session_ms=30 * 60_000, rebalance_ms=20 * 60_000)
    ctx.join("", "i-new", rebalance_ms=20 * 60_000)
    new = ctx.member_of("i-new")
    assert ctx.timer_deadline("heartbeat", "g", new) == ctx.now + 300_000
    if how == "heartbeat":
        assert ctx.heartbeat(new, formed.generation - 1, "i-new").error == Error.ILLEGAL_GENERATION
        assert ctx.timer_deadline("heartbeat", "g", new) == ctx.now + 300_000  # a refused heartbeat: no change
        assert ctx.heartbeat(new, formed.generation, "i-new").error == Error.REBALANCE_IN_PROGRESS
    else:
        assert ctx.commit(new, 1, "i-new").error == Error.NONE
    assert ctx.timer_deadline("heartbeat", "g", new) == ctx.now + SESSION_MS
