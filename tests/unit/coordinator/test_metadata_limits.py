"""A group's metadata is bounded (docs/api.md §6): a join that would take every member's protocol metadata and
assignment beyond ``group_metadata_max_bytes`` is GROUP_MAX_SIZE_REACHED and changes nothing; a leader's assignment
beyond it is answered as Kafka answers a group record too large to append — UNKNOWN_SERVER_ERROR to every member,
then a rebalance — and nothing is stored."""

from __future__ import annotations

from berth.coordinator.protocol import Error, JoinProtocol

from .scenario import Scenario

LIMIT = 10_000


def offering(size: int) -> tuple[JoinProtocol, ...]:
    return (JoinProtocol("range", b"s" * size),)


def test_a_join_that_would_take_the_group_over_its_metadata_bound_is_turned_away() -> None:
    ctx = Scenario(group_metadata_max_bytes=LIMIT)
    formed = ctx.form_group("i-0", "i-1", protocols=offering(4_000))
    writes_before = len(ctx.write_log)

    turned_away = ctx.join("", "i-2", protocols=offering(4_000))

    assert turned_away.error == Error.GROUP_MAX_SIZE_REACHED
    assert sorted(ctx.group().static_members) == ["i-0", "i-1"]
    assert ctx.state().value == "Stable"
    assert len(ctx.write_log) == writes_before  # nothing persisted, nothing journaled
    assert ctx.join("", "i-2", protocols=offering(1_000)).parked  # a smaller one fits (and starts a rebalance)
    assert formed.generation == 1


def test_a_new_group_whose_first_member_is_over_the_bound_is_not_created() -> None:
    ctx = Scenario(group_metadata_max_bytes=LIMIT)

    assert ctx.join("", "i-0", protocols=offering(LIMIT + 1)).error == Error.GROUP_MAX_SIZE_REACHED
    assert ctx.core.groups == {}


def test_a_member_growing_its_metadata_beyond_the_bound_keeps_what_it_had() -> None:
    ctx = Scenario(group_metadata_max_bytes=LIMIT)
    formed = ctx.form_group("i-0", "i-1", protocols=offering(4_000))
    member = formed.member_ids[0]

    assert ctx.join(member, "i-0", protocols=offering(7_000)).error == Error.GROUP_MAX_SIZE_REACHED
    assert ctx.join("", "i-0", protocols=offering(7_000)).error == Error.GROUP_MAX_SIZE_REACHED  # a restart too
    assert ctx.group().members[member].protocols == offering(4_000)
    assert ctx.heartbeat(member, formed.generation, "i-0").error == Error.NONE


def test_an_assignment_over_the_bound_is_refused_as_kafka_refuses_a_record_too_large() -> None:
    ctx = Scenario(group_metadata_max_bytes=LIMIT)
    joins = [ctx.join("", iid, protocols=offering(1_000)) for iid in ("i-0", "i-1")]
    ctx.advance_until(lambda: all(j.answered for j in joins))
    leader = next(j.result for j in joins if j.result.leader == j.result.member_id)
    follower = next(j.result for j in joins if j.result is not leader)
    follower_sync = ctx.sync(follower.member_id, follower.generation_id, "i-1" if leader is joins[0].result else "i-0")
    stored_before = len(ctx.records)

    leader_sync = ctx.sync(
        leader.member_id,
        leader.generation_id,
        "i-0" if leader is joins[0].result else "i-1",
        assignments={leader.member_id: b"a" * 5_000, follower.member_id: b"b" * 5_000},
    )

    assert leader_sync.error == Error.UNKNOWN_SERVER_ERROR
    assert follower_sync.error == Error.UNKNOWN_SERVER_ERROR
    assert ctx.state().value == "PreparingRebalance"
    assert ctx.rebalance_causes()[-1] == "persist_failure"
    assert len(ctx.records) == stored_before
    assert "assignment_stored" not in ctx.event_types()
