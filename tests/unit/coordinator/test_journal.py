"""The membership journal the core emits (docs/api.md §8 and docs/formats.md).

Events ride on the call's write: they are journaled only if it is durable, in the order the core made them.
Covered: the field set of every type, every ``rebalance_started`` cause, ``static_member_replaced`` before the
``rebalance_started`` it causes, ``offline_ms`` from each way a member is "heard from", and ``member_fenced``
for every FENCED_INSTANCE_ID answer.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from berth.coordinator.protocol import Error

from .scenario import PREPARING, PROTOCOLS, REBALANCE_MS, ROUNDROBIN, SESSION_MS, Scenario, as_bytes, bring_to


def test_events_have_increasing_seq_and_the_coordinators_clock(ctx: Scenario) -> None:
    ctx.form_group("i-0", None)
    ctx.advance(SESSION_MS)
    seqs = [e["seq"] for e in ctx.journal]
    assert seqs == list(range(1, len(seqs) + 1))
    assert all(e["group_id"] == "g" and isinstance(e["ts_ms"], int) for e in ctx.journal)
    assert [e["ts_ms"] for e in ctx.journal] == sorted(e["ts_ms"] for e in ctx.journal)


def test_the_fields_of_each_event_type(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", None)
    leader, dynamic = formed.member_ids
    ctx.join("", "i-0")
    ctx.leave((dynamic, None))
    by_type = {e["type"]: e for e in ctx.journal}
    common = {"seq", "ts_ms", "group_id", "type", "generation_id"}
    member = common | {"member_id", "group_instance_id"}
    assert set(by_type["group_created"]) == common
    assert set(by_type["member_id_required"]) == member
    assert set(by_type["member_joined"]) == member | {"static", "client_id"}
    assert by_type["member_joined"]["client_id"] == "client"
    assert set(by_type["rebalance_started"]) == common | {"cause"}
    assert set(by_type["rebalance_completed"]) == common | {"leader", "protocol_name", "members"}
    completed = ctx.events("rebalance_completed")[0]
    assert (completed["generation_id"], completed["leader"], completed["protocol_name"]) == (1, leader, "range")
    assert completed["members"] == [
        {"member_id": leader, "group_instance_id": "i-0"},
        {"member_id": dynamic, "group_instance_id": None},
    ]
    assert set(by_type["assignment_stored"]) == common | {"member_id", "assignments"}
    assert set(by_type["static_member_replaced"]) == member | {"old_member_id", "offline_ms", "rebalance"}
    assert set(by_type["member_left"]) == member | {"via"}
    assert by_type["member_left"]["group_instance_id"] is None


def test_member_events_of_dynamic_members_carry_a_null_instance_id(ctx: Scenario) -> None:
    ctx.join("", None)
    ctx.advance(SESSION_MS)
    expired = ctx.events("member_expired")[0]
    assert expired["group_instance_id"] is None and expired["phase"] == "pending"


def scenario_new_member(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    ctx.join("", "i-2")


def scenario_leader_rejoin(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.join(formed.leader, "i-0")


def scenario_metadata_change(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.join(formed.member("i-1"), "i-1", protocols=(ROUNDROBIN,))


def scenario_member_left(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.leave((formed.member("i-1"), "i-1"))


def scenario_member_expired(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.keep_alive(SESSION_MS, (formed.leader, "i-0"))


def scenario_static_replacement(ctx: Scenario) -> None:
    bring_to(ctx, "CompletingRebalance")
    ctx.join("", "i-1")


def scenario_sync_timeout(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    ctx.sync(formed.leader, 2, "i-0")
    ctx.keep_alive(REBALANCE_MS, *zip(formed.member_ids, formed.instance_ids, strict=True))


def scenario_persist_failure(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    ctx.fail_next_writes(1)
    ctx.sync(formed.leader, 2, "i-0")


CAUSES: list[tuple[str, Callable[[Scenario], None]]] = [
    ("new_member", scenario_new_member),
    ("leader_rejoin", scenario_leader_rejoin),
    ("metadata_change", scenario_metadata_change),
    ("member_left", scenario_member_left),
    ("member_expired", scenario_member_expired),
    ("static_replacement", scenario_static_replacement),
    ("sync_timeout", scenario_sync_timeout),
    ("persist_failure", scenario_persist_failure),
]


@pytest.mark.parametrize(("cause", "scenario"), CAUSES, ids=[c for c, _ in CAUSES])
def test_rebalance_started_causes(ctx: Scenario, cause: str, scenario: Callable[[Scenario], None]) -> None:
    scenario(ctx)
    assert ctx.rebalance_causes()[-1] == cause
    assert ctx.state() is PREPARING
    assert ctx.core.rebalances_by_cause[cause] >= 1


def test_group_max_size_cause_on_reload(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    fresh = ctx.reload(group_max_size=1)
    assert fresh.rebalance_causes()[-1] == "group_max_size"
    fresh.close()


@pytest.mark.parametrize("state", ["CompletingRebalance", "Stable with a protocol change"])
def test_static_member_replaced_comes_before_the_rebalance_it_causes(ctx: Scenario, state: str) -> None:
    if state == "CompletingRebalance":
        bring_to(ctx, "CompletingRebalance")
        protocols = PROTOCOLS
    else:
        ctx.form_group("i-0", "i-1")
        protocols = (ROUNDROBIN,)
    mark = ctx.mark()
    ctx.join("", "i-1", protocols=protocols)
    types = ctx.event_types(since=mark)
    assert types == ["static_member_replaced", "rebalance_started"]
    replaced, started = ctx.journal[mark:]
    assert replaced["rebalance"] is True and started["cause"] == "static_replacement"
    assert replaced["seq"] < started["seq"]


HEARD_FROM = ["heartbeat", "commit", "stable sync", "join"]


@pytest.mark.parametrize("how", HEARD_FROM)
def test_offline_ms_counts_from_the_last_time_the_old_member_was_heard_from(ctx: Scenario, how: str) -> None:
    formed = ctx.form_group("i-0", "i-1")
    follower = formed.member("i-1")
    ctx.advance(2_000)
    if how == "heartbeat":
        assert ctx.heartbeat(follower, 1, "i-1").error == Error.NONE
    elif how == "commit":
        assert ctx.commit(follower, 1, "i-1").error == Error.NONE
    elif how == "stable sync":
        assert ctx.sync(follower, 1, "i-1").error == Error.NONE
    else:
        assert ctx.join(follower, "i-1").error == Error.NONE
    ctx.advance(1_234)
    ctx.join("", "i-1")
    replaced = ctx.events("static_member_replaced")[-1]
    assert replaced["offline_ms"] == 1_234 and replaced["old_member_id"] == follower


def test_offline_ms_after_a_reload_counts_from_the_load(ctx: Scenario) -> None:
    ctx.form_group("i-0", "i-1")
    ctx.advance(5_000)
    fresh = ctx.reload()
    fresh.advance(700)
    fresh.join("", "i-1")
    assert fresh.events("static_member_replaced")[-1]["offline_ms"] == 700
    fresh.close()


def test_rebalance_completed_and_assignment_stored_for_every_generation(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0", "i-1")
    ctx.join(formed.leader, "i-0")
    ctx.join(formed.member("i-1"), "i-1")
    ctx.sync(formed.leader, 2, "i-0", assignments={formed.leader: b"\x00\x01"})
    completed = ctx.events("rebalance_completed")
    stored = ctx.events("assignment_stored")
    assert [e["generation_id"] for e in completed] == [1, 2] and [e["generation_id"] for e in stored] == [1, 2]
    first = stored[-1]["assignments"][0]
    assert (first["member_id"], first["group_instance_id"]) == (formed.leader, "i-0")
    assert as_bytes(first["assignment"]) == b"\x00\x01"


def test_group_emptied_and_group_deleted(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    ctx.leave((formed.leader, "i-0"))
    ctx.delete()
    assert ctx.event_types()[-4:] == ["member_left", "rebalance_started", "group_emptied", "group_deleted"]
    assert ctx.events("group_emptied")[-1]["generation_id"] == 2


def test_failed_writes_journal_nothing(ctx: Scenario) -> None:
    ctx.fail_next_writes(1)
    ctx.join("", "i-0")
    assert ctx.journal == [] and len(ctx.failed_writes) == 1
    assert [e["type"] for e in ctx.failed_writes[0].events] == ["group_created", "member_joined", "rebalance_started"]
