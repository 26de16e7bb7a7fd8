"""Replay and reload (Kafka's GroupMetadataManager.replay and onLoaded; docs/api.md §10).

A group record rebuilds the group as Kafka does: Stable with its members (only the selected protocol's
subscription) or Empty; nothing parked, no timers until ``on_loaded``, which arms every member's session and
starts no rebalance (except over a lowered group max size, see test_group_max_size). A rebalance in progress
when the coordinator stopped is lost: the last durable record wins.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core import Coordinator, RecordFormatError
from berth.coordinator.core.records import (
    ExpectedMembersRecord,
    GroupDeltaRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    new_group_record,
)
from berth.coordinator.protocol import Error, MemberId

from .scenario import EMPTY, PREPARING, RANGE, SESSION_MS, STABLE, Scenario, bring_to


def test_a_stable_group_reloads_as_it_was(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1", None)
    live = ctx.group()
    fresh = ctx.reload()
    group = fresh.group()
    assert (group.state, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id) == (
        STABLE,
        1,
        "consumer",
        "range",
        formed.leader,
    )
    assert group.static_members == live.static_members
    for member_id, member in live.members.items():
        loaded = group.members[member_id]
        assert loaded.group_instance_id == member.group_instance_id
        assert loaded.assignment == member.assignment == formed.assignments[member_id]
        assert loaded.protocols == (RANGE,)  # only the selected protocol's subscription is persisted
        assert (loaded.session_timeout_ms, loaded.rebalance_timeout_ms) == (
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
        )
    assert fresh.parked() == []
    fresh.close()


def test_reload_arms_sessions_from_the_load_and_starts_no_rebalance(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.advance(SESSION_MS - 1)  # the sessions would have run out a moment after the stop
    mark = ctx.mark()
    fresh = ctx.reload()
    assert fresh.event_types(since=mark) == []
    for member_id in formed.member_ids:
        assert fresh.timer_deadline("heartbeat", "g", member_id) == fresh.now + SESSION_MS
    fresh.keep_alive(3 * SESSION_MS, *zip(formed.member_ids, formed.instance_ids, strict=True))
    assert fresh.state() is STABLE
    fresh.close()


def test_members_that_never_come_back_after_a_reload_expire(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    fresh = ctx.reload()
    fresh.advance(SESSION_MS)
    assert fresh.state() is EMPTY and fresh.group().generation_id == 2
    fresh.close()


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance"])
def test_a_rebalance_in_progress_is_lost_on_reload(ctx: Scenario, state: str) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    fresh = ctx.reload()
    assert fresh.state() is STABLE and fresh.group().generation_id == 1
    assert set(fresh.group().members) == set(formed.member_ids)
    fresh.close()


def test_an_empty_group_reloads_empty_with_its_generation(ctx: Scenario) -> None:
    bring_to(ctx, "Empty")
    fresh = ctx.reload()
    assert fresh.state() is EMPTY and fresh.group().generation_id == 2 and fresh.describe().leader is None
    fresh.close()


def test_a_tombstone_removes_the_group(ctx: Scenario) -> None:
    bring_to(ctx, "Empty")
    ctx.delete()
    fresh = ctx.reload()
    assert fresh.core.groups == {}
    fresh.close()


def test_a_reloaded_group_takes_new_members(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    fresh = ctx.reload()
    newcomer = fresh.join("", "i-2")
    assert fresh.state() is PREPARING
    for member_id, iid in zip(formed.member_ids, formed.instance_ids, strict=True):
        fresh.join(member_id, iid)
    assert newcomer.error == Error.NONE and newcomer.result.generation_id == 2
    fresh.close()


def test_replay_keeps_the_expected_members_across_a_newer_group_record() -> None:
    core = Coordinator()

    def expected() -> tuple[str, ...]:
        return core.groups["g"].expected_instance_ids

    core.replay(ExpectedMembersRecord("g", ("a", "b")))
    core.replay(new_group_record(core.groups["g"]))
    assert expected() == ("a", "b")
    core.replay(ExpectedMembersRecord("g", ()))
    assert expected() == ()
    core.replay(ExpectedMembersRecord("other", ()))
    assert "other" not in core.groups


def test_replay_reads_a_newer_record_version_and_refuses_a_malformed_one() -> None:
    """Additive versioning: a newer writer's version is no reason to refuse; a record that cannot be is."""
    core = Coordinator()
    core.replay(GroupRecord("g", GroupMetadata(version=99, protocol_type="consumer", generation=3)))
    assert core.groups["g"].generation_id == 3
    with pytest.raises(RecordFormatError):  # a member, but no selected protocol to hold its subscription
        core.replay(GroupRecord("h", GroupMetadata(protocol=None), (MemberMetadata(MemberId("m")),)))
    with pytest.raises(RecordFormatError):  # a delta for a group no record created
        core.replay(GroupDeltaRecord("nowhere", GroupMetadata()))
