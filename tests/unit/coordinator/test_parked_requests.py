"""Requests Kafka leaves unanswered, which Berth answers since an HTTP long-poll would otherwise hang (docs/api.md §11).

- a parked join superseded by a newer join from the same member -> REBALANCE_IN_PROGRESS (27);
- a parked sync superseded likewise -> 27;
- a removed member's parked sync -> UNKNOWN_MEMBER_ID (25) (its parked join is 25 in Kafka too);
- shutdown (SIGTERM) -> every parked join and sync COORDINATOR_NOT_AVAILABLE (15).
"""

from __future__ import annotations

import pytest

from berth.coordinator.protocol import Error, JoinResponse, SyncResponse

from .scenario import COMPLETING, PREPARING, ROUNDROBIN, Scenario, bring_to


@pytest.mark.parametrize("who", ["leader", "new static member", "new dynamic member"])
def test_a_parked_join_superseded_by_a_newer_one_is_rebalance_in_progress(ctx: Scenario, who: str) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    if who == "leader":
        member_id, iid = formed.leader, "i-0"
        first = ctx.last_join_of(member_id)
    elif who == "new static member":
        first = ctx.join("", "i-new")
        member_id, iid = ctx.member_of("i-new"), "i-new"
    else:
        first = ctx.join("", None, version=3)
        member_id = next(m for m in ctx.group().members if m not in formed.member_ids)
        iid = None
    second = ctx.join(member_id, iid)
    assert first.result == JoinResponse(Error.REBALANCE_IN_PROGRESS, member_id=member_id)
    assert second.parked and ctx.member(member_id).join_ticket == second.ticket
    assert ctx.group().num_awaiting_join == sum(1 for m in ctx.group().members.values() if m.is_awaiting_join)


def test_a_join_that_changes_metadata_while_parked_supersedes_the_old_one(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    first = ctx.join(formed.leader, "i-0")
    second = ctx.join(formed.leader, "i-0", protocols=(ROUNDROBIN,))
    assert first.error == Error.REBALANCE_IN_PROGRESS and second.parked
    ctx.join(formed.member("i-1"), "i-1")
    assert ctx.state() is COMPLETING and second.result.protocol_name == "roundrobin"


def test_a_removed_members_parked_sync_is_unknown_member_id(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    _, follower, dynamic = formed.member_ids
    follower_sync = ctx.sync(follower, 2, "i-1")
    dynamic_sync = ctx.sync(dynamic, 2)
    ctx.leave((dynamic, None))
    assert dynamic_sync.result == SyncResponse(Error.UNKNOWN_MEMBER_ID)
    assert follower_sync.result == SyncResponse(Error.REBALANCE_IN_PROGRESS)


def test_a_removed_members_parked_join_is_unknown_member_id(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    leader_join = ctx.parked()[0]
    ctx.leave(("", "i-0"))
    assert leader_join.result == JoinResponse(Error.UNKNOWN_MEMBER_ID)
    assert ctx.state() is PREPARING


def test_shutdown_answers_every_parked_join_and_sync_coordinator_not_available(ctx: Scenario) -> None:
    preparing = bring_to(ctx, "PreparingRebalance", group="a")
    completing = bring_to(ctx, "CompletingRebalance", group="b")
    assert preparing is not None and completing is not None
    ctx.join("", "i-new", group="a")
    syncs = [ctx.sync(m, 2, iid, group="b") for m, iid in zip(completing.member_ids[1:], ("i-1", None), strict=True)]
    parked = ctx.parked()
    assert len(parked) == 4 and {h.kind for h in parked} == {"join", "sync"}
    ctx.shutdown()
    assert ctx.parked() == []
    for handle in parked:
        assert handle.error == Error.COORDINATOR_NOT_AVAILABLE
    assert all(s.result == SyncResponse(Error.COORDINATOR_NOT_AVAILABLE) for s in syncs)
    assert all(
        not m.is_awaiting_join and not m.is_awaiting_sync for g in ctx.core.groups.values() for m in g.members.values()
    )


def test_shutdown_with_nothing_parked_answers_nothing(ctx: Scenario) -> None:
    ctx.form_group("i-0")
    answered = sum(1 for h in ctx.handles.values() if h.answered)
    ctx.shutdown()
    assert sum(1 for h in ctx.handles.values() if h.answered) == answered
