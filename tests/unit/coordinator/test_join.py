"""JoinGroup: Kafka's classicGroupJoinToClassicGroup decision table, row by row, in every group state.

Rows follow GroupMetadataManager: validation (group id, session timeout), group lookup/creation, KIP-389's
acceptJoiningMember, then new member (dynamic v4+ -> MEMBER_ID_REQUIRED, dynamic v0-3 and static -> added)
or existing member (pending id -> added; validateMember; then per state: PreparingRebalance -> update and
wait, CompletingRebalance -> same metadata gets the current generation again / changed metadata rebalances,
Stable -> the leader or a changed follower rebalances, an unchanged follower gets the current generation).
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import GroupRecord
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
    STATES,
    Formed,
    Scenario,
    bring_to,
)

STATE_AFTER_NEW_MEMBER = {
    "missing": PREPARING,
    "Empty": PREPARING,
    "PreparingRebalance": PREPARING,
    "CompletingRebalance": PREPARING,
    "Stable": PREPARING,
}


def assert_error_response(response: JoinResponse, error: Error, member_id: str) -> None:
    """Kafka's join error shape: no generation, protocol type/name null (v7+), no leader, no members."""
    assert response == JoinResponse(error, member_id=member_id)
    assert response.protocol_type is None and response.protocol_name is None
    assert response.generation_id == -1 and response.leader == "" and response.members == ()


# ------------------------------------------------------------------------------------- validation


def test_session_timeout_outside_the_bounds_is_invalid_session_timeout(ctx: Scenario) -> None:
    too_short = ctx.join("", "i-0", session_ms=ctx.config.group_min_session_timeout_ms - 1)
    too_long = ctx.join("", "i-0", session_ms=ctx.config.group_max_session_timeout_ms + 1)
    assert_error_response(too_short.result, Error.INVALID_SESSION_TIMEOUT, "")
    assert_error_response(too_long.result, Error.INVALID_SESSION_TIMEOUT, "")
    at_bounds = [
        ctx.join("", "i-1", session_ms=ctx.config.group_min_session_timeout_ms),
        ctx.join("", "i-2", session_ms=ctx.config.group_max_session_timeout_ms),
    ]
    assert all(h.parked for h in at_bounds)


def test_a_group_id_over_255_bytes_is_invalid_group_id_and_creates_nothing(ctx: Scenario) -> None:
    group = "é" * 128  # 256 bytes of UTF-8
    handle = ctx.join("", "i-0", group=group)
    assert_error_response(handle.result, Error.INVALID_GROUP_ID, "")
    assert ctx.core.groups == {} and ctx.records == [] and ctx.journal == []
    assert ctx.join("", "i-0", group="é" * 127).parked  # 254 bytes: fine


# ------------------------------------------------------------------------------- new members, per state


@pytest.mark.parametrize("version", [4, 5, 9])
@pytest.mark.parametrize("state", STATES)
def test_new_dynamic_member_at_v4_plus_gets_member_id_required_in_every_state(
    ctx: Scenario, state: str, version: int
) -> None:
    """KIP-394: a dynamic join with an empty member id is answered at once with a pending id; nothing else moves."""
    bring_to(ctx, state)
    before = None if state == "missing" else (ctx.state(), ctx.group().generation_id, set(ctx.group().members))
    handle = ctx.join("", None, version=version, client_id="orders-client")
    pending = handle.result.member_id
    assert handle.result == JoinResponse(Error.MEMBER_ID_REQUIRED, member_id=pending)
    assert pending.startswith("orders-client-")
    group = ctx.group()
    assert group.is_pending(pending) and pending not in group.members
    if before is None:
        assert (group.state, group.generation_id, set(group.members)) == (EMPTY, 0, set())
    else:
        assert (group.state, group.generation_id, set(group.members)) == before
    assert ctx.timer_deadline("heartbeat", "g", pending) == ctx.now + SESSION_MS
    assert ctx.events("member_id_required")[-1]["member_id"] == pending


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("state", STATES)
def test_new_dynamic_member_below_v4_is_admitted_at_once(ctx: Scenario, state: str, version: int) -> None:
    """Before KIP-394 a dynamic join is added straight away and waits for the (re)balance it causes."""
    formed = bring_to(ctx, state)
    mark = ctx.mark()
    handle = ctx.join("", None, version=version)
    assert handle.parked
    group = ctx.group()
    assert group.state is STATE_AFTER_NEW_MEMBER[state]
    new_ids = set(group.members) - set(formed.member_ids if formed else ())
    assert len(new_ids) == 1
    new = group.members[new_ids.pop()]
    assert new.is_new and new.is_awaiting_join and not group.pending_join_members
    # A new member's join is bounded by the new-member join timeout, not its session (Kafka).
    assert ctx.timer_deadline("heartbeat", "g", new.member_id) == ctx.now + ctx.config.new_member_join_timeout_ms
    started = state in ("missing", "Empty", "CompletingRebalance", "Stable")
    assert ctx.rebalance_causes(since=mark) == (["new_member"] if started else [])


@pytest.mark.parametrize("version", [5, 9])
@pytest.mark.parametrize("state", STATES)
def test_new_static_member_is_added_and_rebalances(ctx: Scenario, state: str, version: int) -> None:
    """KIP-345: an unknown instance id with an empty member id is a new static member (never MEMBER_ID_REQUIRED)."""
    bring_to(ctx, state)
    mark = ctx.mark()
    handle = ctx.join("", "i-new", version=version)
    assert handle.parked
    member_id = ctx.member_of("i-new")
    assert member_id.startswith("i-new-")
    assert ctx.state() is STATE_AFTER_NEW_MEMBER[state]
    started = state in ("missing", "Empty", "CompletingRebalance", "Stable")
    assert ctx.rebalance_causes(since=mark) == (["new_member"] if started else [])
    joined = ctx.events("member_joined")[-1]
    assert (joined["member_id"], joined["group_instance_id"], joined["static"]) == (member_id, "i-new", True)


def test_member_ids_are_prefixed_by_instance_id_then_client_id_then_member(ctx: Scenario) -> None:
    """docs/api.md §11: ``<prefix>-<uuid4>``; an empty client id counts as absent."""
    static = ctx.join("", "inst", client_id="cli")
    dynamic = ctx.join("", None, client_id="cli")
    anonymous = ctx.join("", None, client_id="")
    assert ctx.member_of("inst") == "inst-u1"
    assert static.parked
    assert dynamic.result.member_id == "cli-u2"
    assert anonymous.result.member_id == "member-u3"


# ------------------------------------------------------------------------------------ existing members


def _member(formed: Formed, who: str) -> tuple[str, str | None]:
    index = {"leader": 0, "static follower": 1, "dynamic follower": 2}[who]
    return formed.member_ids[index], formed.instance_ids[index]


CHANGED = (Protocol("range", b"new-subscription"), ROUNDROBIN)

# (state, who, protocols changed?) -> (answered at once?, rebalance cause or None)
EXISTING_MEMBER_TABLE = [
    ("Stable", "leader", False, False, "leader_rejoin"),
    ("Stable", "leader", True, False, "leader_rejoin"),
    ("Stable", "static follower", False, True, None),
    ("Stable", "dynamic follower", False, True, None),
    ("Stable", "static follower", True, False, "metadata_change"),
    ("Stable", "dynamic follower", True, False, "metadata_change"),
    ("CompletingRebalance", "leader", False, True, None),
    ("CompletingRebalance", "static follower", False, True, None),
    ("CompletingRebalance", "dynamic follower", False, True, None),
    ("CompletingRebalance", "leader", True, False, "metadata_change"),
    ("CompletingRebalance", "static follower", True, False, "metadata_change"),
    ("CompletingRebalance", "dynamic follower", True, False, "metadata_change"),
    ("PreparingRebalance", "static follower", False, False, None),
    ("PreparingRebalance", "dynamic follower", True, False, None),
]


@pytest.mark.parametrize(("state", "who", "changed", "at_once", "cause"), EXISTING_MEMBER_TABLE)
def test_existing_member_join(ctx: Scenario, state: str, who: str, changed: bool, at_once: bool, cause: str) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    member_id, instance_id = _member(formed, who)
    generation = ctx.group().generation_id
    leader = ctx.group().leader_id
    mark = ctx.mark()
    handle = ctx.join(member_id, instance_id, protocols=CHANGED if changed else PROTOCOLS)
    assert ctx.rebalance_causes(since=mark) == ([cause] if cause else [])
    if at_once:
        # The member lost its join response (or has nothing new): the current generation again, the
        # member list only for the leader, and the group does not move.
        response = handle.result
        is_leader = member_id == leader
        assert response.error == Error.NONE
        assert (response.member_id, response.generation_id, response.leader) == (member_id, generation, leader)
        assert (response.protocol_type, response.protocol_name) == ("consumer", "range")
        assert not response.skip_assignment
        assert bool(response.members) == is_leader
        if is_leader:
            assert {m.member_id for m in response.members} == set(formed.member_ids)
        assert ctx.state().value == state
        assert not ctx.member(member_id).is_awaiting_join
    else:
        assert handle.parked
        assert ctx.state() is PREPARING
        assert ctx.member(member_id).protocols == (CHANGED if changed else PROTOCOLS)


def test_the_last_member_to_rejoin_completes_the_join_phase(ctx: Scenario) -> None:
    formed = bring_to(ctx, "PreparingRebalance")
    assert formed is not None
    leader, follower, dynamic = formed.member_ids
    mark = ctx.mark()
    follower_join = ctx.join(follower, "i-1")
    assert follower_join.parked
    dynamic_join = ctx.join(dynamic, None)
    assert ctx.state() is COMPLETING
    leader_join = ctx.last_join_of(leader)
    members = leader_join.result.members
    assert {(m.member_id, m.group_instance_id) for m in members} == {
        (leader, "i-0"),
        (follower, "i-1"),
        (dynamic, None),
    }
    assert all(m.metadata == RANGE.metadata for m in members)
    for h in (follower_join, dynamic_join):
        assert h.result.members == () and h.result.leader == leader and h.result.generation_id == 2
    assert ctx.event_types(since=mark) == ["rebalance_completed"]


@pytest.mark.parametrize("state", STATES)
def test_unknown_member_id_is_unknown_member_id_in_every_state(ctx: Scenario, state: str) -> None:
    """KIP-345 case 2/5: a member id the group does not know (or no group at all) -> UNKNOWN_MEMBER_ID."""
    bring_to(ctx, state)
    records = len(ctx.records)
    for instance_id in (None, "i-unknown"):
        handle = ctx.join("nobody-u99", instance_id)
        assert_error_response(handle.result, Error.UNKNOWN_MEMBER_ID, "nobody-u99")
    assert len(ctx.records) == records
    assert ("g" in ctx.core.groups) == (state != "missing")


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable"])
def test_a_member_id_that_does_not_own_the_instance_id_is_fenced(ctx: Scenario, state: str) -> None:
    """validateMember: an instance id mapped to another member id -> FENCED_INSTANCE_ID, journaled."""
    formed = bring_to(ctx, state)
    assert formed is not None
    _, follower, dynamic = formed.member_ids
    for member_id in (follower, dynamic, "stale-u99"):
        handle = ctx.join(member_id, "i-0")
        assert_error_response(handle.result, Error.FENCED_INSTANCE_ID, member_id)
        fenced = ctx.events("member_fenced")[-1]
        assert (fenced["member_id"], fenced["group_instance_id"]) == (member_id, "i-0")
    assert ctx.state().value == state


def test_an_existing_member_in_an_empty_group_is_unknown(ctx: Scenario) -> None:
    """Kafka's last branch: a known member id in an unexpected state -> UNKNOWN_MEMBER_ID.

    A member cannot exist in an Empty group through the protocol, so we plant one to reach the branch.
    """
    bring_to(ctx, "Empty")
    group = ctx.group()
    ctx.join("", "i-0")  # enter PreparingRebalance with a member to copy
    member = group.members[ctx.member_of("i-0")]
    ctx.shutdown()  # answer the parked join so nothing is left hanging
    ctx.check = False  # the planted state breaks the harness's own "Empty has no members" invariant
    group.state = EMPTY
    handle = ctx.join(member.member_id, "i-0")
    assert_error_response(handle.result, Error.UNKNOWN_MEMBER_ID, member.member_id)


# ------------------------------------------------------------------------------------------- protocols

INCONSISTENT_PROTOCOL_TABLE = [
    # (group state, protocol type, protocols, member kind)
    ("missing", "", PROTOCOLS, "new"),
    ("missing", "consumer", (), "new"),
    ("Empty", "", PROTOCOLS, "new"),
    ("Empty", "consumer", (), "new"),
    ("Stable", "connect", PROTOCOLS, "new"),
    ("Stable", "consumer", (Protocol("sticky", b""),), "new"),
    ("Stable", "connect", PROTOCOLS, "existing"),
    ("Stable", "consumer", (Protocol("sticky", b""),), "existing"),
    ("PreparingRebalance", "consumer", (Protocol("sticky", b""),), "new"),
    ("CompletingRebalance", "consumer", (Protocol("sticky", b""),), "existing"),
]


@pytest.mark.parametrize(("state", "protocol_type", "protocols", "kind"), INCONSISTENT_PROTOCOL_TABLE)
def test_inconsistent_group_protocol(
    ctx: Scenario, state: str, protocol_type: str, protocols: tuple[Protocol, ...], kind: str
) -> None:
    """supportsProtocols: an Empty group needs a type and a protocol; otherwise the group's type and a protocol
    every member supports. A new member is answered with an empty member id, an existing one with its own."""
    formed = bring_to(ctx, state)
    member_id, instance_id = ("", None) if kind == "new" else (formed.member_ids[1], "i-1") if formed else ("", None)
    version = 3 if kind == "new" else 9  # a v3 dynamic join skips MEMBER_ID_REQUIRED
    handle = ctx.join(member_id, instance_id, version=version, protocol_type=protocol_type, protocols=protocols)
    assert_error_response(handle.result, Error.INCONSISTENT_GROUP_PROTOCOL, member_id)
    if state != "missing":
        assert ctx.state().value == state


def test_a_new_member_must_support_a_protocol_every_member_supports(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1", protocols=(ROUNDROBIN,))
    ok = ctx.join("", "i-2", protocols=(RANGE, ROUNDROBIN))
    assert ok.parked


VOTE_TABLE = [
    # each member's protocols in preference order -> selected protocol
    ([("range", "roundrobin"), ("range", "roundrobin"), ("roundrobin", "range")], "range"),
    ([("roundrobin", "range"), ("roundrobin", "range"), ("range", "roundrobin")], "roundrobin"),
    ([("range", "roundrobin"), ("roundrobin",)], "roundrobin"),  # only common protocols are candidates
    ([("sticky", "range", "roundrobin"), ("range", "sticky"), ("roundrobin", "sticky")], "sticky"),
    ([("range", "roundrobin"), ("roundrobin", "range")], "range"),  # Berth: a tie goes to the smaller name
]


@pytest.mark.parametrize(("preferences", "selected"), VOTE_TABLE)
def test_protocol_selection_by_vote(ctx: Scenario, preferences: list[tuple[str, ...]], selected: str) -> None:
    """ClassicGroup.selectProtocol: each member votes for its first candidate; most votes wins.

    Kafka breaks ties by HashMap order (unspecified); Berth picks the smallest name so the choice is stable.
    """
    for k, names in enumerate(preferences):
        ctx.join("", f"i-{k}", protocols=tuple(Protocol(n, n.encode()) for n in names))
    ctx.advance_until(lambda: ctx.state() is COMPLETING)
    assert ctx.group().protocol_name == selected
    leader_join = ctx.handles[1].result
    assert leader_join.protocol_name == selected
    assert {m.metadata for m in leader_join.members} == {selected.encode()}


# ----------------------------------------------------------------------------------------- group creation


def test_first_join_creates_and_persists_the_group_before_answering(ctx: Scenario) -> None:
    """Java coordinator: a new group is written at creation (an empty group record)."""
    handle = ctx.join("", None)  # v9: MEMBER_ID_REQUIRED, answered only once the creation is durable
    assert handle.error == Error.MEMBER_ID_REQUIRED
    (record,) = ctx.records
    assert isinstance(record, GroupRecord) and record.group_id == "g"
    assert record.value is not None and record.members == () and record.value.generation == 0
    assert ctx.event_types() == ["group_created", "member_id_required"]


@pytest.mark.parametrize("static", [True, False])
def test_group_creation_write_failure_answers_coordinator_not_available_and_forgets_the_group(
    ctx: Scenario, static: bool
) -> None:
    ctx.fail_next_writes(1)
    handle = ctx.join("", "i-0" if static else None)
    assert handle.error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.core.groups == {} and ctx.records == [] and ctx.journal == []
    assert len(ctx.core.timers) == 0
    # The group can be created again afterwards.
    again = ctx.join("", "i-0")
    assert again.parked and ctx.state() is PREPARING


def test_join_of_a_known_member_in_a_completing_group_does_not_touch_its_session(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    follower = formed.member_ids[1]
    deadline = ctx.timer_deadline("heartbeat", "g", follower)
    ctx.advance(1_000)
    assert ctx.join(follower, "i-1").error == Error.NONE
    assert ctx.timer_deadline("heartbeat", "g", follower) == deadline


def test_join_members_carry_instance_ids_and_the_selected_protocol_metadata(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", None, protocols=(Protocol("range", b"sub-0"), ROUNDROBIN))
    leader_members = formed.joins[0].result.members
    dynamic = formed.member_ids[1]
    assert set(leader_members) == {
        JoinMember(formed.member_ids[0], "i-0", b"sub-0"),
        JoinMember(dynamic, None, b"sub-0"),
    }
    assert ctx.member(dynamic).rebalance_timeout_ms == REBALANCE_MS


def test_a_group_lifecycle_goes_through_kafkas_transitions(ctx: Scenario) -> None:
    """Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance -> ... -> Empty."""
    formed = ctx.form_group("i-0", "i-1")
    ctx.join("", "i-2")  # Stable -> PreparingRebalance
    joins = ctx.rejoin_all(formed)  # -> CompletingRebalance
    assert all(j.error == Error.NONE for j in joins)
    ctx.join("", "i-3")  # CompletingRebalance -> PreparingRebalance
    ctx.advance(REBALANCE_MS)  # laggards are static: kept; -> CompletingRebalance
    ctx.advance(REBALANCE_MS)  # nobody syncs: sync timeout -> PreparingRebalance, and on to Empty eventually
    ctx.advance_until(lambda: ctx.state() is EMPTY)
    states = [(before.value, after.value) for _, before, after in ctx.transitions]
    assert states[:6] == [
        ("Empty", "PreparingRebalance"),
        ("PreparingRebalance", "CompletingRebalance"),
        ("CompletingRebalance", "Stable"),
        ("Stable", "PreparingRebalance"),
        ("PreparingRebalance", "CompletingRebalance"),
        ("CompletingRebalance", "PreparingRebalance"),
    ]
    assert states[-1] == ("PreparingRebalance", "Empty")
    assert all(before != after for before, after in states)


@pytest.mark.parametrize("route", ["join", "sync", "heartbeat", "leave", "commit", "delete", "put_expected"])
def test_a_too_long_group_id_is_invalid_group_id_on_every_route(ctx: Scenario, route: str) -> None:
    group = "x" * 256
    if route == "join":
        error = ctx.join("", "i-0", group=group).error
    elif route == "sync":
        error = ctx.sync("m", 1, group=group).error
    elif route == "heartbeat":
        error = ctx.heartbeat("m", 1, group=group).error
    elif route == "leave":
        error = ctx.leave(("m", None), group=group).error
    elif route == "commit":
        commit = ctx.commit("m", 1, group=group)
        error = commit.error
        assert [p.error for t in commit.result.topics for p in t.partitions] == [Error.INVALID_GROUP_ID]
    elif route == "delete":
        error = ctx.delete(group).error
    else:
        error = ctx.put_expected("i-0", group=group).error
    assert error == Error.INVALID_GROUP_ID
    assert ctx.core.groups == {} and ctx.records == [] and ctx.journal == []
    assert ctx.get_expected(group).error == Error.INVALID_GROUP_ID
