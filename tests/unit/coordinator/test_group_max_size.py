"""KIP-389 group.max.size, as Kafka's acceptJoiningMember applies it, and the reload of an oversized group.

Empty: always accepted. PreparingRebalance: a member already awaiting the join is accepted, others while fewer
than max are awaiting (so the last to rejoin are turned away). CompletingRebalance / Stable: existing members
are accepted, new ones while the group is smaller than max. A turned-away member is removed and answered
GROUP_MAX_SIZE_REACHED with an empty member id. After a reload over a lowered max, on_loaded starts a rebalance
(cause ``group_max_size``) so the surplus members are turned away as they rejoin.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from berth.coordinator.protocol import Error, JoinResponse

from .scenario import COMPLETING, PREPARING, REBALANCE_MS, STABLE, Scenario, bring_to


@pytest.fixture
def small() -> Iterator[Scenario]:
    scenario = Scenario(group_max_size=3)
    yield scenario
    scenario.close()


TURNED_AWAY = JoinResponse(Error.GROUP_MAX_SIZE_REACHED)


@pytest.mark.parametrize("state", ["Stable", "CompletingRebalance"])
@pytest.mark.parametrize("kind", ["static", "dynamic v9", "dynamic v3"])
def test_a_full_group_turns_new_members_away(small: Scenario, state: str, kind: str) -> None:
    formed = bring_to(small, state)
    assert formed is not None and len(small.group().members) == 3
    mark = small.mark()
    if kind == "static":
        handle = small.join("", "i-new")
    else:
        handle = small.join("", None, version=9 if kind == "dynamic v9" else 3)
    assert handle.result == TURNED_AWAY  # even before MEMBER_ID_REQUIRED: the size check comes first
    assert len(small.group().members) == 3 and not small.group().pending_join_members
    assert small.state().value == state and small.event_types(since=mark) == []


@pytest.mark.parametrize("state", ["Stable", "CompletingRebalance"])
def test_a_full_group_accepts_its_members_but_not_a_static_restart(small: Scenario, state: str) -> None:
    """Kafka checks acceptJoiningMember with the request's member id: a static restart (empty member id) into a
    group at its max size is turned away like a newcomer, until the old member's session expires. Kept as in
    Kafka (docs/api.md defers to it); worth knowing when sizing ``--group-max-size`` to a fleet."""
    formed = bring_to(small, state)
    assert formed is not None
    assert small.join(formed.member_ids[1], "i-1").error == Error.NONE
    assert small.join("", "i-1").result == TURNED_AWAY
    assert small.member_of("i-1") == formed.member_ids[1]


def test_an_empty_group_accepts_any_join(ctx: Scenario) -> None:
    one = Scenario(group_max_size=1)
    try:
        first = one.join("", "i-0")
        assert first.parked and one.state() is PREPARING
        second = one.join("", "i-1")
        assert second.result == TURNED_AWAY  # PreparingRebalance: one member is already awaiting
    finally:
        one.close()


def test_while_preparing_the_last_to_rejoin_are_turned_away(small: Scenario) -> None:
    """Kafka counts members awaiting the join, not the group size: the newcomers fill the seats of laggards."""
    formed = small.form_group("i-0", "i-1")
    leader, follower = formed.member_ids
    small.join(leader, "i-0")
    for iid in ("i-2", "i-3"):
        assert small.join("", iid).parked
    assert len(small.group().members) == 4 and small.group().num_awaiting_join == 3
    mark = small.mark()
    late = small.join(follower, "i-1")
    assert late.result == TURNED_AWAY
    assert follower not in small.group().members and small.group().static_member_id("i-1") is None
    assert small.event_types(since=mark) == ["member_left"]
    left = small.events("member_left")[-1]
    assert (left["member_id"], left["group_instance_id"], left["via"]) == (follower, "i-1", "group_max_size")
    assert small.timer_deadline("heartbeat", "g", follower) is None


def test_a_member_already_awaiting_is_accepted_when_the_group_is_full(small: Scenario) -> None:
    formed = small.form_group("i-0", "i-1", "i-2")
    joins = [small.join(m, iid) for m, iid in zip(formed.member_ids[:2], formed.instance_ids[:2], strict=True)]
    again = small.join(formed.member_ids[0], "i-0")  # superseding its own parked join
    assert again.parked and joins[0].error == Error.REBALANCE_IN_PROGRESS


def test_reload_over_a_lowered_max_rebalances_and_turns_the_surplus_away(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", "i-2", None)
    assert ctx.state() is STABLE
    mark = ctx.mark()
    fresh = ctx.reload(group_max_size=2)
    assert fresh.state() is PREPARING
    assert fresh.event_types(since=mark) == ["rebalance_started"]
    assert fresh.rebalance_causes(since=mark) == ["group_max_size"]
    loaded = fresh.now
    # The members learn of the rebalance from their heartbeats and rejoin; the last two are turned away.
    results = []
    for member_id, iid in zip(formed.member_ids, formed.instance_ids, strict=True):
        assert fresh.heartbeat(member_id, 1, iid).error == Error.REBALANCE_IN_PROGRESS
        results.append(fresh.join(member_id, iid))
    assert [r.parked for r in results] == [True, True, False, False]
    assert [r.result for r in results[2:]] == [TURNED_AWAY, TURNED_AWAY]
    assert set(fresh.group().members) == set(formed.member_ids[:2])
    assert [e["via"] for e in fresh.events("member_left")] == ["group_max_size", "group_max_size"]
    # Kafka does not re-check the join phase after turning members away: the rebalance timeout ends it.
    fresh.advance_to(loaded + REBALANCE_MS)
    assert fresh.state() is COMPLETING and fresh.group().generation_id == 2
    assert {m.member_id for m in results[0].result.members} == set(formed.member_ids[:2])
    fresh.close()


def test_reload_within_the_max_starts_no_rebalance(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    fresh = ctx.reload(group_max_size=2)
    mark = fresh.mark()
    assert fresh.state() is STABLE and fresh.event_types(since=mark) == []
    fresh.close()
