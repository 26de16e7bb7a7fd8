"""Berth's pre-registration of expected instance ids (docs/api.md §7).

While an expected instance id is not yet a member, a join phase does not complete early (the usual timers still
bound it); once every expected id and every current member is awaiting the join, any join phase — the initial
one included — completes at once, as long as no KIP-394 pending id is outstanding. PUT/DELETE re-evaluate a
waiting join phase. DELETE (or PUT []) is plain Kafka behaviour again.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import ExpectedMembersRecord, GroupRecord
from berth.coordinator.protocol import Error, ExpectedMembersResponse, JoinResponse

from .scenario import COMPLETING, EMPTY, PREPARING, REBALANCE_MS, STABLE, Formed, Handle, Scenario

FLEET = ("f-0", "f-1", "f-2")
DELAY_MS = 3_000


# ------------------------------------------------------------------------------------------ the routes


def test_put_creates_the_group_and_persists_the_list(ctx: Scenario) -> None:
    handle = ctx.put_expected("f-0", "f-1", "f-0")
    assert handle.result == ExpectedMembersResponse(Error.NONE, ("f-0", "f-1"))
    assert ctx.state() is EMPTY
    assert ctx.get_expected() == ExpectedMembersResponse(Error.NONE, ("f-0", "f-1"))
    assert [type(r) for r in ctx.records] == [GroupRecord, ExpectedMembersRecord]
    assert ctx.records[-1] == ExpectedMembersRecord("g", ("f-0", "f-1"))
    assert ctx.event_types() == ["group_created", "expected_members_changed"]
    (changed,) = ctx.events("expected_members_changed")
    assert (changed["count"], changed["added"], changed["removed"]) == (2, ["f-0", "f-1"], [])


def test_every_change_of_the_list_is_journaled_with_what_came_and_went_bounded(ctx: Scenario) -> None:
    """The audit trail of pre-registration (issue 12, item 17): each change says which ids came and went; a huge
    change names the first 100 of each and counts them all, so one PUT cannot write a megabyte event."""
    ctx.put_expected(*FLEET)
    ctx.put_expected("f-0", "f-1", "f-3")
    ctx.delete_expected()
    big = [f"f-{i}" for i in range(5_000)]
    ctx.put_expected(*big)
    events = ctx.events("expected_members_changed")
    assert [(e["count"], e["added"], e["removed"]) for e in events[:3]] == [
        (3, list(FLEET), []),
        (3, ["f-3"], ["f-2"]),
        (0, [], ["f-0", "f-1", "f-3"]),
    ]
    assert (events[3]["count"], events[3]["added_count"], len(events[3]["added"])) == (5_000, 5_000, 100)
    assert ctx.put_expected(*big).result.group_instance_ids == tuple(big)
    assert len(ctx.events("expected_members_changed")) == 4  # the same list again changes nothing


def test_get_of_a_missing_group_answers_an_empty_list_and_creates_nothing(ctx: Scenario) -> None:
    assert ctx.get_expected("nope") == ExpectedMembersResponse(Error.NONE, ())
    assert ctx.core.groups == {} and ctx.records == []


def test_delete_of_a_missing_group_creates_nothing(ctx: Scenario) -> None:
    assert ctx.delete_expected("nope").result == ExpectedMembersResponse(Error.NONE, ())
    assert ctx.put_expected(group="nope").result == ExpectedMembersResponse(Error.NONE, ())
    assert ctx.core.groups == {} and ctx.records == []


def test_put_of_the_same_list_writes_nothing(ctx: Scenario) -> None:
    ctx.put_expected(*FLEET)
    records = len(ctx.records)
    assert ctx.put_expected(*FLEET).result.group_instance_ids == FLEET
    assert len(ctx.records) == records


@pytest.mark.parametrize("clear", ["delete", "put []"])
def test_clearing_the_list(ctx: Scenario, clear: str) -> None:
    ctx.put_expected(*FLEET)
    handle = ctx.delete_expected() if clear == "delete" else ctx.put_expected()
    assert handle.result == ExpectedMembersResponse(Error.NONE, ())
    assert ctx.get_expected().group_instance_ids == ()
    assert ctx.records[-1] == ExpectedMembersRecord("g", ())
    assert ctx.state() is EMPTY  # the group stays


def test_the_list_survives_a_reload_and_deleting_the_group_deletes_it(ctx: Scenario) -> None:
    ctx.put_expected(*FLEET)
    fresh = ctx.reload()
    assert fresh.get_expected().group_instance_ids == FLEET
    assert fresh.delete().error == Error.NONE
    assert fresh.get_expected().group_instance_ids == ()
    again = fresh.reload()
    assert again.get_expected().group_instance_ids == () and again.core.groups == {}
    again.close()


def test_put_persist_failure_keeps_the_old_list(ctx: Scenario) -> None:
    ctx.put_expected("f-0")
    ctx.fail_next_writes(1)
    assert ctx.put_expected(*FLEET).error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.get_expected().group_instance_ids == ("f-0",)


def test_put_persist_failure_on_a_new_group_forgets_the_group(ctx: Scenario) -> None:
    ctx.fail_next_writes(1)
    assert ctx.put_expected(*FLEET).error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.core.groups == {}


# ------------------------------------------------------------------------------------- initial forming


def join_fleet(ctx: Scenario, ids: tuple[str, ...], gap_ms: int) -> list[Handle[JoinResponse]]:
    joins = []
    for k, iid in enumerate(ids):
        if k:
            ctx.advance(gap_ms)
        joins.append(ctx.join("", iid))
    return joins


@pytest.mark.parametrize("registered", [True, False])
def test_a_fleet_of_n_forms_as_soon_as_its_nth_member_joins(ctx: Scenario, registered: bool) -> None:
    if registered:
        ctx.put_expected(*FLEET)
    start = ctx.now
    joins = join_fleet(ctx, FLEET, gap_ms=700)
    if registered:
        assert all(j.answered_ms == start + 1_400 for j in joins)  # no initial delay
    else:
        assert all(j.parked for j in joins)
        ctx.advance_until(lambda: joins[0].answered)
        assert joins[0].answered_ms == start + 2 * DELAY_MS  # Kafka: the delay, extended once
    assert ctx.state() is COMPLETING and ctx.group().generation_id == 1


def test_a_slow_expected_member_is_waited_for_beyond_the_initial_delay(ctx: Scenario) -> None:
    """A StatefulSet starts pods one at a time; the fleet still forms once, when its last pod joins."""
    ctx.put_expected(*FLEET)
    start = ctx.now
    joins = join_fleet(ctx, FLEET[:2], gap_ms=1_000)
    ctx.advance(5 * DELAY_MS)
    assert all(j.parked for j in joins) and ctx.state() is PREPARING
    last = ctx.join("", FLEET[2])
    assert all(j.answered_ms == start + 1_000 + 5 * DELAY_MS for j in [*joins, last])
    assert ctx.state() is COMPLETING and ctx.group().generation_id == 1
    assert ctx.event_types().count("rebalance_started") == 1


def test_a_missing_expected_member_holds_the_initial_rebalance_for_the_rebalance_timeout_at_most(
    ctx: Scenario,
) -> None:
    ctx.put_expected(*FLEET)
    start = ctx.now
    joins = join_fleet(ctx, FLEET[:2], gap_ms=1_000)
    ctx.advance_until(lambda: joins[0].answered)
    # The delay chain runs out, then the rest of the rebalance timeout: it ends a rebalance timeout after it began.
    assert joins[0].answered_ms == start + REBALANCE_MS
    assert len(ctx.group().members) == 2 and ctx.group().generation_id == 1


def test_clearing_the_list_during_an_initial_rebalance_falls_back_to_the_delay(ctx: Scenario) -> None:
    """DELETE re-evaluates at once, and plain Kafka never completes an initial rebalance early."""
    ctx.put_expected(*FLEET)
    start = ctx.now
    joins = join_fleet(ctx, FLEET[:2], gap_ms=1_000)
    ctx.delete_expected()
    assert ctx.state() is PREPARING
    ctx.advance_until(lambda: joins[0].answered)
    assert joins[0].answered_ms == start + 2 * DELAY_MS


def test_shrinking_the_list_to_the_members_present_completes_the_initial_rebalance(ctx: Scenario) -> None:
    ctx.put_expected(*FLEET)
    joins = join_fleet(ctx, FLEET[:2], gap_ms=1_000)
    ctx.put_expected(*FLEET[:2])
    assert all(j.error == Error.NONE for j in joins) and ctx.state() is COMPLETING


def test_a_pending_member_blocks_the_list_driven_completion(ctx: Scenario) -> None:
    """Like Kafka's hasAllMembersJoined, a list-driven completion also needs no pending (KIP-394) member."""
    ctx.put_expected(*FLEET[:2])
    pending = ctx.join("", None).result.member_id
    joins = join_fleet(ctx, FLEET[:2], gap_ms=500)
    assert all(j.parked for j in joins) and ctx.state() is PREPARING
    last = ctx.join(pending, None)
    assert last.error == Error.NONE and all(j.error == Error.NONE for j in joins)
    assert len(last.result.members) == 0 and len(joins[0].result.members) == 3


# ----------------------------------------------------------------------------------------- scaling up


def scale_up(ctx: Scenario, formed: Formed) -> tuple[list[Handle[JoinResponse]], Handle[JoinResponse]]:
    """f-3 joins a Stable group of f-0..f-2, the old members rejoin at once; returns (their joins, f-3's)."""
    newcomer = ctx.join("", "f-3")
    rejoins = ctx.rejoin_all(formed)
    return rejoins, newcomer


@pytest.mark.parametrize(("registered", "rebalances"), [(True, 1), (False, 2)])
def test_scaling_a_stable_fleet_from_3_to_5_costs_one_rebalance(
    ctx: Scenario, registered: bool, rebalances: int
) -> None:
    formed = ctx.form_group(*FLEET)
    if registered:
        ctx.put_expected(*FLEET, "f-3", "f-4")
    mark = ctx.mark()
    rejoins, newcomer = scale_up(ctx, formed)
    assert ctx.state() is (PREPARING if registered else COMPLETING)
    if registered:
        ctx.advance(20_000)  # f-4 takes its time to start; everyone waits parked in the join
    else:
        # Generation 2 forms without f-4; its members sync and heartbeat while f-4 starts.
        members = [(m.member_id, m.group_instance_id) for m in ctx.group().members.values()]
        for member_id, iid in sorted(members, key=lambda m: m[0] != ctx.group().leader_id):
            assert ctx.sync(member_id, 2, iid).error == Error.NONE
        ctx.keep_alive(20_000, *members)
    late = ctx.join("", "f-4")
    if registered:
        assert late.error == Error.NONE and newcomer.answered
        assert ctx.state() is COMPLETING and ctx.group().generation_id == 2
        assert len(late.result.members) == 0 and len(ctx.group().members) == 5
    else:
        assert late.parked and ctx.state() is PREPARING
    assert ctx.rebalance_causes(since=mark) == ["new_member"] * rebalances
    assert all(r.answered for r in rejoins)


def test_the_rebalance_timeout_still_bounds_the_wait_for_an_expected_member(ctx: Scenario) -> None:
    formed = ctx.form_group(*FLEET)
    ctx.put_expected(*FLEET, "f-3", "f-4")
    started = ctx.now
    _rejoins, newcomer = scale_up(ctx, formed)
    ctx.advance(REBALANCE_MS - 1)
    assert ctx.state() is PREPARING
    ctx.advance(1)
    assert ctx.state() is COMPLETING and newcomer.answered_ms == started + REBALANCE_MS
    assert len(ctx.group().members) == 4 and ctx.group().missing_expected_instance_ids() == ["f-4"]


@pytest.mark.parametrize("change", ["delete", "put []", "put without f-4"])
def test_changing_the_list_re_evaluates_a_waiting_join_phase(ctx: Scenario, change: str) -> None:
    formed = ctx.form_group(*FLEET)
    ctx.put_expected(*FLEET, "f-3", "f-4")
    rejoins, newcomer = scale_up(ctx, formed)
    ctx.advance(10_000)
    assert ctx.state() is PREPARING
    if change == "delete":
        ctx.delete_expected()
    elif change == "put []":
        ctx.put_expected()
    else:
        ctx.put_expected(*FLEET, "f-3")
    assert ctx.state() is COMPLETING and newcomer.error == Error.NONE
    assert all(r.error == Error.NONE for r in rejoins)


def test_widening_the_list_during_a_join_phase_makes_it_wait(ctx: Scenario) -> None:
    formed = ctx.form_group(*FLEET)
    newcomer = ctx.join("", "f-3")
    ctx.put_expected(*FLEET, "f-3", "f-4")
    rejoins = ctx.rejoin_all(formed)
    assert ctx.state() is PREPARING and newcomer.parked and all(r.parked for r in rejoins)
    ctx.join("", "f-4")
    assert ctx.state() is COMPLETING


def test_an_expected_member_that_restarts_in_a_stable_group_causes_no_rebalance(ctx: Scenario) -> None:
    ctx.put_expected(*FLEET)
    joins = join_fleet(ctx, FLEET, gap_ms=0)
    leader = joins[0].result.member_id
    ctx.sync(leader, 1, "f-0")
    mark = ctx.mark()
    assert ctx.join("", "f-1").error == Error.NONE
    assert ctx.state() is STABLE and ctx.rebalance_causes(since=mark) == []


def test_a_leaving_expected_member_is_waited_for_by_the_next_rebalance(ctx: Scenario) -> None:
    """The list says f-2 belongs: after it leaves, the next rebalance waits for it (bounded by the timeout)."""
    ctx.put_expected(*FLEET)
    formed = ctx.form_group(*FLEET)
    ctx.leave(("", "f-2"))
    rejoins = ctx.rejoin_all(formed)
    assert ctx.state() is PREPARING and all(r.parked for r in rejoins)
    ctx.join("", "f-2")
    assert ctx.state() is COMPLETING
