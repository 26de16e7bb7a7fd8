"""SyncGroup: Kafka's classicGroupSync / validateSyncGroup table and the leader's assignment write.

Rows: the API layer's KIP-559 check (v5+ null protocol type or name -> 23); unknown or Empty group -> 25;
validateMember (25 / 82); generation (22); protocol type/name mismatch (23); then per state: PreparingRebalance
-> 27, CompletingRebalance -> park (the leader's sync persists the assignment, then everyone is answered),
Stable -> the stored assignment at once.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import GroupRecord
from berth.coordinator.protocol import Error, SyncResponse

from .scenario import COMPLETING, PREPARING, SESSION_MS, STABLE, STATES, Formed, Scenario, as_bytes, bring_to


def members_of(formed: Formed) -> tuple[str, str, str]:
    leader, follower, dynamic = formed.member_ids
    return leader, follower, dynamic


# ------------------------------------------------------------------------------------------ error rows


@pytest.mark.parametrize("state", ["missing", "Empty"])
def test_sync_to_a_missing_or_empty_group_is_unknown_member_id(ctx: Scenario, state: str) -> None:
    bring_to(ctx, state)
    assert ctx.sync("i-0-u1", 1, "i-0").result == SyncResponse(Error.UNKNOWN_MEMBER_ID)
    assert ctx.sync("nobody", 0).result == SyncResponse(Error.UNKNOWN_MEMBER_ID)


VALIDATION_TABLE = [
    # (who, instance id, generation offset, expected)
    ("unknown", None, 0, Error.UNKNOWN_MEMBER_ID),
    ("unknown", "i-9", 0, Error.UNKNOWN_MEMBER_ID),
    ("unknown", "i-1", 0, Error.FENCED_INSTANCE_ID),
    ("dynamic", "i-1", 0, Error.FENCED_INSTANCE_ID),
    ("follower", "i-0", 0, Error.FENCED_INSTANCE_ID),
    ("follower", "i-1", -1, Error.ILLEGAL_GENERATION),
    ("follower", "i-1", +1, Error.ILLEGAL_GENERATION),
    ("dynamic", None, -1, Error.ILLEGAL_GENERATION),
    ("unknown", "i-1", -1, Error.FENCED_INSTANCE_ID),  # member validation comes before the generation
    ("unknown", None, +5, Error.UNKNOWN_MEMBER_ID),
]


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable"])
@pytest.mark.parametrize(("who", "instance_id", "offset", "error"), VALIDATION_TABLE)
def test_sync_validation(
    ctx: Scenario, state: str, who: str, instance_id: str | None, offset: int, error: Error
) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    _, follower, dynamic = members_of(formed)
    member_id = {"follower": follower, "dynamic": dynamic}.get(who, "ghost-u99")
    generation = ctx.group().generation_id + offset
    mark = ctx.mark()
    handle = ctx.sync(member_id, generation, instance_id)
    assert handle.result == SyncResponse(error)
    assert ctx.state().value == state
    assert ctx.event_types(since=mark) == (["member_fenced"] if error == Error.FENCED_INSTANCE_ID else [])


@pytest.mark.parametrize("who", ["leader", "follower", "dynamic"])
def test_sync_while_preparing_rebalance_is_rebalance_in_progress(ctx: Scenario, who: str) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    index = ["leader", "follower", "dynamic"].index(who)
    handle = ctx.sync(formed.member_ids[index], 1, formed.instance_ids[index])
    assert handle.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)


# ------------------------------------------------------------------------------- KIP-559 protocol checks

PROTOCOL_TABLE = [
    # (version, protocol type, protocol name, expected)
    (5, None, "range", Error.INCONSISTENT_GROUP_PROTOCOL),
    (5, "consumer", None, Error.INCONSISTENT_GROUP_PROTOCOL),
    (5, None, None, Error.INCONSISTENT_GROUP_PROTOCOL),
    (5, "connect", "range", Error.INCONSISTENT_GROUP_PROTOCOL),
    (5, "consumer", "roundrobin", Error.INCONSISTENT_GROUP_PROTOCOL),
    (5, "consumer", "range", Error.NONE),
    (4, None, None, Error.NONE),
    (3, None, None, Error.NONE),
    (0, None, None, Error.NONE),
]


@pytest.mark.parametrize("state", ["CompletingRebalance", "Stable"])
@pytest.mark.parametrize(("version", "protocol_type", "protocol_name", "error"), PROTOCOL_TABLE)
def test_sync_protocol_type_and_name(
    ctx: Scenario, state: str, version: int, protocol_type: str | None, protocol_name: str | None, error: Error
) -> None:
    """v5+: both required (null -> 23 at the API layer) and checked against the group's; older versions send none."""
    formed = bring_to(ctx, state)
    assert formed is not None
    leader = formed.leader
    generation = ctx.group().generation_id
    handle = ctx.sync(
        leader,
        generation,
        "i-0",
        version=version,
        assignments={leader: b"mine"},
        protocol_type=protocol_type,
        protocol_name=protocol_name,
    )
    if error == Error.NONE:
        assert handle.error == Error.NONE
        assert (handle.result.protocol_type, handle.result.protocol_name) == ("consumer", "range")
        assert ctx.state() is STABLE
    else:
        assert handle.result == SyncResponse(error)
        assert ctx.state().value == state


def test_a_v5_protocol_check_happens_even_for_unknown_groups(ctx: Scenario) -> None:
    """The null check is Kafka's API layer, before any group lookup."""
    assert ctx.sync("x", 1, protocol_type=None, protocol_name="range").error == Error.INCONSISTENT_GROUP_PROTOCOL


# ------------------------------------------------------------------------------------ completing, stable


def test_followers_wait_for_the_leader_and_all_get_their_own_assignment(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = members_of(formed)
    follower_sync = ctx.sync(follower, 2, "i-1")
    dynamic_sync = ctx.sync(dynamic, 2)
    assert follower_sync.parked and dynamic_sync.parked and ctx.state() is COMPLETING
    mark = ctx.mark()
    leader_sync = ctx.sync(leader, 2, "i-0", assignments={leader: b"L", follower: b"F", dynamic: b"D"})
    assert leader_sync.result == SyncResponse(Error.NONE, "consumer", "range", b"L")
    assert follower_sync.result == SyncResponse(Error.NONE, "consumer", "range", b"F")
    assert dynamic_sync.result == SyncResponse(Error.NONE, "consumer", "range", b"D")
    assert ctx.state() is STABLE
    assert ctx.event_types(since=mark) == ["assignment_stored"]
    stored = ctx.events("assignment_stored")[-1]
    assert stored["member_id"] == leader and stored["generation_id"] == 2
    assert {a["member_id"]: as_bytes(a["assignment"]) for a in stored["assignments"]} == {
        leader: b"L",
        follower: b"F",
        dynamic: b"D",
    }
    record = ctx.records[-1]
    assert isinstance(record, GroupRecord) and record.value is not None
    assert record.value.generation == 2 and record.value.leader == leader


def test_members_the_leader_left_out_get_an_empty_assignment(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = members_of(formed)
    ctx.sync(leader, 2, "i-0", assignments={leader: b"L", "not-a-member": b"?"})
    assert ctx.sync(follower, 2, "i-1").result.assignment == b""
    assert ctx.member(dynamic).assignment == b""


def test_a_stable_sync_returns_the_stored_assignment_at_once(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", None)
    for member_id, iid in zip(formed.member_ids, formed.instance_ids, strict=True):
        handle = ctx.sync(member_id, 1, iid)
        assert handle.result == SyncResponse(Error.NONE, "consumer", "range", formed.assignments[member_id])


def test_a_stable_sync_does_not_refresh_the_session(ctx: Scenario) -> None:
    """docs/api.md §11 (Java coordinator): only heartbeats (and commits, joins) move the session deadline in Stable."""
    formed = ctx.form_group("i-0", "i-1")
    follower = formed.member("i-1")
    deadline = ctx.timer_deadline("heartbeat", "g", follower)
    ctx.advance(1_000)
    ctx.sync(follower, 1, "i-1")
    assert ctx.timer_deadline("heartbeat", "g", follower) == deadline


def test_the_leader_sync_after_a_new_member_arrived_is_rebalance_in_progress(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    follower_sync = ctx.sync(formed.member_ids[1], 2, "i-1")
    ctx.join("", "i-new")
    assert follower_sync.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)
    assert ctx.sync(formed.leader, 2, "i-0").result == SyncResponse(Error.REBALANCE_IN_PROGRESS)
    assert all(m.assignment == b"" for m in ctx.group().members.values())


# ---------------------------------------------------------------------------------- persist failure


def test_leader_sync_persist_failure_answers_everyone_and_rebalances(ctx: Scenario) -> None:
    """Java coordinator: the append error (COORDINATOR_NOT_AVAILABLE) goes to every parked sync, the assignment
    is reset, and the group rebalances (cause ``persist_failure``)."""
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    leader, follower, dynamic = members_of(formed)
    follower_sync = ctx.sync(follower, 2, "i-1")
    ctx.fail_next_writes(1)
    mark = ctx.mark()
    leader_sync = ctx.sync(leader, 2, "i-0", assignments={leader: b"L", follower: b"F", dynamic: b"D"})
    assert leader_sync.result == SyncResponse(Error.COORDINATOR_NOT_AVAILABLE)
    assert follower_sync.result == SyncResponse(Error.COORDINATOR_NOT_AVAILABLE)
    assert ctx.state() is PREPARING
    assert all(m.assignment == b"" for m in ctx.group().members.values())
    assert ctx.event_types(since=mark) == ["rebalance_started"]  # assignment_stored was in the failed write
    assert ctx.rebalance_causes(since=mark) == ["persist_failure"]
    # The members' sessions were reset when their syncs were answered.
    assert ctx.timer_deadline("heartbeat", "g", follower) == ctx.now + SESSION_MS
    # The dynamic member (which never synced) is the only one the next join phase waits for besides the others.
    joins = ctx.rejoin_all(formed)
    assert all(j.error == Error.NONE for j in joins) and ctx.group().generation_id == 3


def test_a_failed_leader_sync_of_the_last_generation_member_alone(ctx: Scenario) -> None:
    ctx.join("", "solo")
    ctx.advance_until(lambda: ctx.state() is COMPLETING)
    solo = ctx.member_of("solo")
    ctx.fail_next_writes(1)
    assert ctx.sync(solo, 1, "solo").error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.state() is PREPARING
    rejoin = ctx.join(solo, "solo")
    assert rejoin.result.generation_id == 2  # everyone rejoined: the phase completes at once (not initial)


# --------------------------------------------------------------------------------------- parked syncs


def test_a_parked_sync_superseded_by_a_newer_one_is_rebalance_in_progress(ctx: Scenario) -> None:
    """docs/api.md §11: Kafka overwrites the future and leaves the old request hanging; Berth answers it 27."""
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    follower = formed.member_ids[1]
    first = ctx.sync(follower, 2, "i-1")
    second = ctx.sync(follower, 2, "i-1")
    assert first.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)
    assert second.parked
    ctx.sync(formed.leader, 2, "i-0", assignments={follower: b"F"})
    assert second.result.assignment == b"F"


@pytest.mark.parametrize("state", STATES)
def test_sync_table_summary(ctx: Scenario, state: str) -> None:
    """One valid member syncing with the current generation, per state."""
    formed = bring_to(ctx, state)
    if formed is None or state == "Empty":
        assert ctx.sync("x", 1).error == Error.UNKNOWN_MEMBER_ID
        return
    follower = formed.member_ids[1]
    handle = ctx.sync(follower, ctx.group().generation_id, "i-1")
    expected = {
        "PreparingRebalance": Error.REBALANCE_IN_PROGRESS,
        "CompletingRebalance": None,  # parked until the leader's sync
        "Stable": Error.NONE,
    }[state]
    if expected is None:
        assert handle.parked
    else:
        assert handle.error == expected
