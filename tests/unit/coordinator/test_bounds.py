"""The bounds on what the coordinator keeps (docs/api.md §6, ``core.bounds`` and ``core.usage``; issue 22, points 1, 2
and 3): committed offsets per group (count and bytes), stored bytes per tenant and in total, groups per tenant.

Refusals are in-band and change nothing: an offset beyond a bound is INVALID_COMMIT_OFFSET_SIZE for its partition
(the others are committed), a join GROUP_MAX_SIZE_REACHED, a leader's assignment UNKNOWN_SERVER_ERROR and a
rebalance, a new group COORDINATOR_NOT_AVAILABLE. A change that does not grow a group is never refused. The harness
checks after every call that the ledgers are the sums of their groups (``Scenario.check_usage``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from berth.coordinator.core import CoordinatorConfig, Group
from berth.coordinator.core.usage import GROUP_BYTES, MEMBER_BYTES, offset_bytes
from berth.coordinator.protocol import (
    CommitPartition,
    CommitTopic,
    Error,
    JoinProtocol,
    JoinResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)

from .scenario import COMPLETING, RANGE, Scenario

KIB = 1024


def errors(response: OffsetCommitResponse) -> list[Error]:
    return [p.error for t in response.topics for p in t.partitions]


def partitions(n: int, topic: str = "t", start: int = 0) -> dict[tuple[str, int], int]:
    return {(topic, p): 1 for p in range(start, start + n)}


@pytest.fixture
def bounded() -> Iterator[Scenario]:
    ctx = Scenario(offsets_max_per_group=3, offsets_max_bytes_per_group=4 * KIB)
    yield ctx
    ctx.close()


# ------------------------------------------------------------------------------------------ offsets per group


def test_offsets_beyond_the_groups_count_are_invalid_commit_offset_size_the_others_committed(
    bounded: Scenario,
) -> None:
    handle = bounded.commit(offsets=partitions(5))
    assert handle.error == Error.NONE
    assert errors(handle.result) == [Error.NONE] * 3 + [Error.INVALID_COMMIT_OFFSET_SIZE] * 2
    assert set(bounded.committed()) == {("t", 0), ("t", 1), ("t", 2)}


def test_a_group_at_its_bound_still_commits_progress_on_its_partitions(bounded: Scenario) -> None:
    bounded.commit(offsets=partitions(3))
    progress = bounded.commit(offsets={("t", 0): 99, ("t", 1): 98, ("t", 3): 1})
    assert errors(progress.result) == [Error.NONE, Error.NONE, Error.INVALID_COMMIT_OFFSET_SIZE]
    assert bounded.committed()[("t", 0)] == 99


def test_offsets_beyond_the_groups_bytes_are_refused_and_smaller_metadata_is_not(bounded: Scenario) -> None:
    big = "m" * 1_500  # three of them with their topic and overhead: more than 4 KiB
    first = bounded.commit(offsets=partitions(3), metadata=big)
    assert errors(first.result) == [Error.NONE, Error.NONE, Error.INVALID_COMMIT_OFFSET_SIZE]
    assert bounded.group().usage.offset_bytes == 2 * offset_bytes("t", big)
    # Shrinking an offset's metadata frees room (never refused); growing it again is weighed like a new one.
    smaller = bounded.commit(offsets=partitions(1), metadata="s")
    assert errors(smaller.result) == [Error.NONE]
    again = bounded.commit(offsets=partitions(1, start=2), metadata=big)
    assert errors(again.result) == [Error.NONE]


def test_metadata_too_large_is_still_offset_metadata_too_large(bounded: Scenario) -> None:
    handle = bounded.commit(offsets=partitions(1), metadata="x" * 5_000)
    assert errors(handle.result) == [Error.OFFSET_METADATA_TOO_LARGE]


def test_offsets_in_flight_count_towards_the_bound() -> None:
    """Two commits accepted before either is durable cannot overshoot together: the first reserves its offsets."""
    ctx = Scenario(offsets_max_per_group=3, check=False)
    core = ctx.core
    ctx.commit(offsets=partitions(1))  # the group exists, Empty: simple commits go straight to it

    def commit(start: int) -> OffsetCommitResponse | None:
        request = OffsetCommitRequest(
            topics=(CommitTopic("t", tuple(CommitPartition(p, 1) for p in range(start, start + 2))),), api_version=9
        )
        fx = core.commit_offsets("g", request, 9, ticket=1_000 + start, now_ms=ctx.now)
        assert len(fx.writes) == 1 and not fx.replies  # answered once durable
        pending.append(fx.writes[0].token)
        return None

    pending: list[int] = []
    commit(1)  # partitions 1, 2: fits (3 in all)
    refused = core.commit_offsets(
        "g",
        OffsetCommitRequest(topics=(CommitTopic("t", (CommitPartition(3, 1),)),), api_version=9),
        9,
        ticket=2_000,
        now_ms=ctx.now,
    )
    ((_, answer),) = refused.replies
    assert isinstance(answer, OffsetCommitResponse) and errors(answer) == [Error.INVALID_COMMIT_OFFSET_SIZE]
    assert core.groups["g"].usage.reserved_offsets == 2
    core.on_write_done(pending[0], True, ctx.now)
    usage = core.groups["g"].usage
    assert (usage.offset_count, usage.reserved_offsets, usage.reserved_offset_bytes) == (3, 0, 0)
    ctx.check_usage()
    ctx.close()


def test_a_failed_commit_gives_its_reservation_back(bounded: Scenario) -> None:
    bounded.fail_next_writes(1)
    failed = bounded.commit(offsets=partitions(3))
    assert failed.error == Error.COORDINATOR_NOT_AVAILABLE
    assert bounded.core.groups == {}  # the group it would have created is gone with it
    assert errors(bounded.commit(offsets=partitions(3)).result) == [Error.NONE] * 3


# ------------------------------------------------------------------------------------------ tenants, the total


def test_a_tenants_groups_are_bounded_and_other_tenants_and_admins_are_not() -> None:
    ctx = Scenario(max_groups_per_tenant=2)
    for group in ("a-1", "a-2"):
        assert ctx.commit(group=group, tenant="a").error == Error.NONE
    assert ctx.commit(group="a-3", tenant="a").error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.join("", "i-0", group="a-4", tenant="a").error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.core.groups_refused == 2
    assert ctx.commit(group="b-1", tenant="b").error == Error.NONE
    assert ctx.commit(group="admin-1").error == Error.NONE  # an admin's (or no tokens): no tenant
    # A tenant's existing groups stay usable, and a group it deletes frees its place.
    assert ctx.commit(group="a-1", tenant="a", offsets={("t", 5): 1}).error == Error.NONE
    assert ctx.delete(group="a-2").error == Error.NONE
    assert ctx.commit(group="a-3", tenant="a").error == Error.NONE
    assert (ctx.core.tenants["a"].groups, ctx.core.tenants["b"].groups) == (2, 1)
    ctx.close()


def test_a_tenants_stored_bytes_are_bounded_and_others_keep_committing() -> None:
    budget = 3 * GROUP_BYTES + 4 * KIB
    ctx = Scenario(max_stored_bytes_per_tenant=budget)
    big = "m" * 1_000
    answers = [
        errors(ctx.commit(group=f"a-{n}", tenant="a", offsets=partitions(4), metadata=big).result) for n in range(3)
    ]
    assert answers[0] == [Error.NONE] * 4
    assert Error.INVALID_COMMIT_OFFSET_SIZE in answers[1] + answers[2]
    assert ctx.core.tenants["a"].bytes <= budget
    assert errors(ctx.commit(group="b-1", tenant="b", offsets=partitions(4), metadata=big).result) == [Error.NONE] * 4
    ctx.close()


def test_the_total_bound_refuses_joins_commits_assignments_and_new_groups_in_band() -> None:
    ctx = Scenario(max_stored_bytes=GROUP_BYTES + 2 * MEMBER_BYTES + 2 * KIB)
    formed = ctx.form_group("i-0", protocols=(RANGE,))
    total = ctx.core.usage
    # A new member whose metadata does not fit: turned away, nothing changes.
    big = ctx.join("", "i-1", protocols=(JoinProtocol("range", b"m" * 2 * KIB),))
    assert big.result == JoinResponse(Error.GROUP_MAX_SIZE_REACHED)
    assert list(ctx.group().members) == formed.member_ids
    # Offsets that do not fit, a group that does not fit.
    too_much = ctx.commit(formed.leader, formed.generation, "i-0", offsets=partitions(20), metadata="o" * 100)
    assert Error.NONE in errors(too_much.result) and Error.INVALID_COMMIT_OFFSET_SIZE in errors(too_much.result)
    assert ctx.commit(group="other").error == Error.COORDINATOR_NOT_AVAILABLE
    assert total.max_bytes is not None and total.bytes <= total.max_bytes
    # A leader's assignment that does not fit: UNKNOWN_SERVER_ERROR and a rebalance, as Kafka's record too large.
    rejoin = ctx.join(formed.leader, "i-0", protocols=(RANGE,))
    ctx.advance_until(lambda: rejoin.answered)
    assert ctx.state() is COMPLETING
    generation = ctx.group().generation_id
    sync = ctx.sync(formed.leader, generation, "i-0", assignments={formed.leader: b"a" * 4 * KIB})
    assert sync.error == Error.UNKNOWN_SERVER_ERROR
    assert ctx.rebalance_causes()[-1] == "persist_failure"
    ctx.close()


# ---------------------------------------------------------------------------------------------------- reload


def test_a_reload_restores_every_tenant_and_figure() -> None:
    ctx = Scenario(max_groups_per_tenant=5)
    ctx.commit(group="a-1", tenant="a", offsets=partitions(3), metadata="x" * 100)
    ctx.form_group("i-0", group="a-2", protocols=(RANGE,))  # an admin's join: no tenant
    joined = ctx.join("", "i-0", group="b-1", tenant="b", protocols=(RANGE,))  # a reload keeps the chosen one only
    ctx.advance_until(lambda: joined.answered)
    me = joined.result.member_id
    assert ctx.sync(me, joined.result.generation_id, "i-0", group="b-1", assignments={me: b"p-0"}).error == Error.NONE
    before = {t: (ledger.bytes, ledger.groups) for t, ledger in ctx.core.tenants.items()}
    total = (ctx.core.usage.bytes, ctx.core.usage.groups)
    reloaded = ctx.reload()
    assert {t: (ledger.bytes, ledger.groups) for t, ledger in reloaded.core.tenants.items()} == before
    assert (reloaded.core.usage.bytes, reloaded.core.usage.groups) == total
    assert reloaded.group("a-1").tenant == "a" and reloaded.group("a-2").tenant is None
    reloaded.close()


def test_a_reload_over_lowered_bounds_loads_everything_and_refuses_growth() -> None:
    ctx = Scenario()
    ctx.commit(offsets=partitions(5))
    reloaded = ctx.reload(CoordinatorConfig(offsets_max_per_group=3))
    assert len(reloaded.committed()) == 5
    assert errors(reloaded.commit(offsets=partitions(1, start=9)).result) == [Error.INVALID_COMMIT_OFFSET_SIZE]
    assert errors(reloaded.commit(offsets=partitions(1)).result) == [Error.NONE]
    reloaded.close()


def test_a_groups_own_attributes_stay_few_enough_for_shared_key_instance_dicts() -> None:
    """What the bounds count per group lives in ``Group.usage``: CPython (3.11) shares an instance dict's keys, and
    specialises the attribute reads a heartbeat makes, only up to 30 attributes. With 31 a heartbeat cost about
    1,900 more instructions (``python -m benchmarks.instructions berth``)."""
    assert len(vars(Group("g", 0))) <= 30
