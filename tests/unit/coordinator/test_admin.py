"""DescribeGroups, ListGroups and DeleteGroups for classic groups (Java coordinator; docs/api.md §2, §3, §11).

Describe: an unknown group is Dead with generation -1 and no leader; Empty shows its generation and no leader;
Stable shows the protocol and each member's subscription and assignment; other states show no protocol, no
subscriptions, but the stored assignments. Pending (KIP-394) ids are never listed.
Delete: unknown -> 69; any state but Empty -> 68; Empty -> tombstones for the group, its offsets and its
expected members.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import ExpectedMembersRecord, GroupRecord, OffsetRecord
from berth.coordinator.protocol import DeleteResponse, DescribedMember, Error, ListedGroup

from .scenario import EMPTY, RANGE, REBALANCE_MS, SESSION_MS, STATES, Scenario, bring_to

# ------------------------------------------------------------------------------------------- describe


def test_describe_of_an_unknown_group_is_dead_and_creates_nothing(ctx: Scenario) -> None:
    response = ctx.describe("nope")
    assert (response.error, response.group_state, response.generation_id, response.leader) == (
        Error.NONE,
        "Dead",
        -1,
        None,
    )
    assert response.members == () and response.protocol_type == "" and response.protocol_data == ""
    assert ctx.core.groups == {}


@pytest.mark.parametrize("state", STATES)
def test_describe_in_every_state(ctx: Scenario, state: str) -> None:
    formed = bring_to(ctx, state)
    response = ctx.describe()
    if formed is None:
        assert response.group_state == "Dead"
        return
    assert response.group_state == state
    group = ctx.group()
    assert response.generation_id == group.generation_id
    if state == "Empty":
        assert response.leader is None and response.members == ()
        assert response.protocol_type == "consumer" and response.protocol_data == ""
        return
    assert response.leader == formed.leader and response.protocol_type == "consumer"
    stable = state == "Stable"
    assert response.protocol_data == ("range" if stable else "")
    described = {m.member_id: m for m in response.members}
    assert set(described) == set(formed.member_ids)
    for member_id, iid in zip(formed.member_ids, formed.instance_ids, strict=True):
        m = described[member_id]
        assert m == DescribedMember(
            member_id,
            iid,
            "client",
            "127.0.0.1",
            SESSION_MS,
            REBALANCE_MS,
            RANGE.metadata if stable else b"",
            group.members[member_id].assignment,
        )
    if state in ("Stable", "PreparingRebalance"):
        # Outside Stable the stored assignment still shows (Java coordinator); it is reset only when a
        # CompletingRebalance group is sent back to rebalance.
        assert {m.member_id: m.member_assignment for m in response.members} == formed.assignments


def test_describe_never_lists_pending_ids(ctx: Scenario) -> None:
    ctx.form_group("i-0")
    pending = ctx.join("", None).result.member_id
    assert pending not in {m.member_id for m in ctx.describe().members}


def test_describe_of_a_too_long_group_id(ctx: Scenario) -> None:
    assert ctx.describe("g" * 256).error == Error.INVALID_GROUP_ID


# ----------------------------------------------------------------------------------------------- list


def test_list_groups_with_and_without_a_state_filter(ctx: Scenario) -> None:
    bring_to(ctx, "Empty", group="a-empty")
    ctx.commit(group="c-simple")
    bring_to(ctx, "PreparingRebalance", group="d-preparing")
    bring_to(ctx, "Stable", group="b-stable")  # last: forming a group takes the initial delay
    assert ctx.list_groups().groups == (
        ListedGroup("a-empty", "consumer", "Empty"),
        ListedGroup("b-stable", "consumer", "Stable"),
        ListedGroup("c-simple", "", "Empty"),
        ListedGroup("d-preparing", "consumer", "PreparingRebalance"),
    )
    assert [g.group_id for g in ctx.list_groups("Empty").groups] == ["a-empty", "c-simple"]
    assert [g.group_id for g in ctx.list_groups("stable", "PREPARINGREBALANCE").groups] == [
        "b-stable",
        "d-preparing",
    ]
    assert ctx.list_groups("Dead").groups == ()


# --------------------------------------------------------------------------------------------- delete


@pytest.mark.parametrize(
    ("state", "error"),
    [
        ("missing", Error.GROUP_ID_NOT_FOUND),
        ("PreparingRebalance", Error.NON_EMPTY_GROUP),
        ("CompletingRebalance", Error.NON_EMPTY_GROUP),
        ("Stable", Error.NON_EMPTY_GROUP),
        ("Empty", Error.NONE),
    ],
)
def test_delete_group_per_state(ctx: Scenario, state: str, error: Error) -> None:
    bring_to(ctx, state)
    records = len(ctx.records)
    handle = ctx.delete()
    assert handle.result == DeleteResponse(error)
    if error == Error.NONE:
        assert "g" not in ctx.core.groups
        assert ctx.describe().group_state == "Dead"
        assert ctx.events()[-1]["type"] == "group_deleted"
    else:
        assert len(ctx.records) == records
        assert ("g" in ctx.core.groups) == (state != "missing")


def test_delete_removes_offsets_expected_members_and_pending_ids(ctx: Scenario) -> None:
    ctx.commit(offsets={("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    ctx.put_expected("i-0", "i-1")
    pending = ctx.join("", None).result.member_id
    before = len(ctx.records)
    assert ctx.delete().error == Error.NONE
    tail = ctx.records[before:]
    assert sorted((r.topic, r.partition) for r in tail if isinstance(r, OffsetRecord) and r.value is None) == [
        ("t", 0),
        ("t", 1),
        ("u", 0),
    ]
    assert GroupRecord("g", None) in tail and ExpectedMembersRecord("g", ()) in tail
    assert ctx.committed() == {} and ctx.get_expected().group_instance_ids == ()
    assert ctx.timer_deadline("heartbeat", "g", pending) is None
    fresh = ctx.reload()
    assert fresh.core.groups == {} and fresh.committed() == {} and fresh.get_expected().group_instance_ids == ()
    fresh.close()


def test_delete_persist_failure_restores_the_group(ctx: Scenario) -> None:
    ctx.commit(offsets={("t", 0): 1})
    ctx.fail_next_writes(1)
    assert ctx.delete().error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.state() is EMPTY and ctx.committed() == {("t", 0): 1}


def test_a_deleted_group_can_be_created_again_from_scratch(ctx: Scenario) -> None:
    bring_to(ctx, "Empty")
    ctx.delete()
    ctx.join("", "i-0")
    ctx.advance_until(lambda: ctx.state().value == "CompletingRebalance")
    assert ctx.group().generation_id == 1


def test_delete_of_a_too_long_group_id(ctx: Scenario) -> None:
    assert ctx.delete("g" * 256).error == Error.INVALID_GROUP_ID
