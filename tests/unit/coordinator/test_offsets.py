"""OffsetCommit / OffsetFetch for classic groups (Kafka's OffsetMetadataManager and ClassicGroup.validateOffsetCommit).

Commit rows: a missing group is created by a simple commit (generation < 0) and otherwise answered
GROUP_ID_NOT_FOUND (v9+) or ILLEGAL_GENERATION (v0-8); generation -1 on an Empty group is accepted as is; a
member id, instance id or generation >= 0 is validated (25 / 82 / 22); an anonymous commit to a non-empty group
is 25; CompletingRebalance is 27. Group-level errors are set on every partition and at the top (docs/api.md §11).
Per partition: metadata over the limit -> OFFSET_METADATA_TOO_LARGE. Commits in Stable/PreparingRebalance keep
the session alive. Offsets become visible once durable.
"""

from __future__ import annotations

import pytest

from berth.coordinator.core.records import GroupRecord, OffsetRecord
from berth.coordinator.protocol import (
    Error,
    FetchedPartition,
    FetchedTopic,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionResult,
    TopicResults,
    fetch_cursor,
)

from .scenario import COMPLETING, EMPTY, PREPARING, SESSION_MS, STABLE, Scenario, bring_to

OFFSETS = {("orders", 0): 10, ("orders", 1): 11, ("audit", 0): 5}


def partition_errors(response: OffsetCommitResponse) -> dict[tuple[str, int], Error]:
    return {(t.name, p.partition_index): p.error for t in response.topics for p in t.partitions}


def assert_group_error(response: OffsetCommitResponse, error: Error) -> None:
    assert response.error == error
    assert set(partition_errors(response).values()) == {error}


# ------------------------------------------------------------------------------------------ missing group


def test_a_simple_commit_creates_the_group(ctx: Scenario) -> None:
    handle = ctx.commit(offsets=OFFSETS)
    assert handle.error == Error.NONE and set(partition_errors(handle.result).values()) == {Error.NONE}
    assert ctx.state() is EMPTY and ctx.group().protocol_type is None
    assert ctx.committed() == OFFSETS
    assert ctx.event_types() == ["group_created"]
    # The group is persisted with its offsets (a restart then knows the token that created it, docs/api.md §6).
    group_record, *offset_records = ctx.records
    assert isinstance(group_record, GroupRecord) and group_record.value is not None and not group_record.members
    assert all(isinstance(r, OffsetRecord) for r in offset_records) and len(offset_records) == 3


@pytest.mark.parametrize(
    ("version", "error"), [(9, Error.GROUP_ID_NOT_FOUND), (8, Error.ILLEGAL_GENERATION), (1, Error.ILLEGAL_GENERATION)]
)
@pytest.mark.parametrize("generation", [0, 1, 7])
def test_a_generation_commit_to_a_missing_group(ctx: Scenario, version: int, error: Error, generation: int) -> None:
    handle = ctx.commit("m-1", generation, version=version, offsets=OFFSETS)
    assert_group_error(handle.result, error)
    assert ctx.core.groups == {} and ctx.records == [] and ctx.committed() == {}


def test_a_simple_commit_persist_failure_forgets_the_group_it_created(ctx: Scenario) -> None:
    ctx.fail_next_writes(1)
    handle = ctx.commit(offsets=OFFSETS)
    assert_group_error(handle.result, Error.COORDINATOR_NOT_AVAILABLE)
    assert ctx.core.groups == {} and ctx.committed() == {} and ctx.journal == []


# --------------------------------------------------------------------------------------- existing group

COMMIT_TABLE = [
    # (state, who, instance id, generation ("cur" / int), expected group-level error or None for success)
    ("Empty", "anonymous", None, -1, None),
    ("Empty", "ghost", "i-7", -1, None),  # generation < 0 on an Empty group: accepted before any member check
    ("Empty", "anonymous", None, 2, Error.UNKNOWN_MEMBER_ID),
    ("Stable", "anonymous", None, -1, Error.UNKNOWN_MEMBER_ID),
    ("Stable", "follower", "i-1", "cur", None),
    ("Stable", "dynamic", None, "cur", None),
    ("Stable", "follower", "i-1", -1, Error.ILLEGAL_GENERATION),
    ("Stable", "follower", "i-1", 0, Error.ILLEGAL_GENERATION),
    ("Stable", "follower", None, "cur", None),
    ("Stable", "ghost", None, "cur", Error.UNKNOWN_MEMBER_ID),
    ("Stable", "ghost", "i-1", "cur", Error.FENCED_INSTANCE_ID),
    ("Stable", "follower", "i-0", "cur", Error.FENCED_INSTANCE_ID),
    ("Stable", "follower", "i-9", "cur", Error.UNKNOWN_MEMBER_ID),
    ("Stable", "anonymous", "i-1", -1, Error.FENCED_INSTANCE_ID),
    ("PreparingRebalance", "anonymous", None, -1, Error.UNKNOWN_MEMBER_ID),
    ("PreparingRebalance", "follower", "i-1", "cur", None),
    ("PreparingRebalance", "follower", "i-1", 2, Error.ILLEGAL_GENERATION),
    ("CompletingRebalance", "anonymous", None, -1, Error.UNKNOWN_MEMBER_ID),
    ("CompletingRebalance", "follower", "i-1", "cur", Error.REBALANCE_IN_PROGRESS),
    ("CompletingRebalance", "follower", "i-1", 1, Error.ILLEGAL_GENERATION),
    ("CompletingRebalance", "ghost", "i-1", "cur", Error.FENCED_INSTANCE_ID),
]


@pytest.mark.parametrize(("state", "who", "instance_id", "generation", "error"), COMMIT_TABLE)
def test_commit_validation(
    ctx: Scenario, state: str, who: str, instance_id: str | None, generation: int | str, error: Error | None
) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    member_id = {"anonymous": "", "follower": formed.member_ids[1], "dynamic": formed.member_ids[2]}.get(
        who, "ghost-u99"
    )
    gen = ctx.group().generation_id if generation == "cur" else int(generation)
    mark = ctx.mark()
    handle = ctx.commit(member_id, gen, instance_id, offsets=OFFSETS)
    if error is None:
        assert handle.error == Error.NONE and ctx.committed() == OFFSETS
    else:
        assert_group_error(handle.result, error)
        assert ctx.committed() == {}
    assert ctx.state().value == state
    assert ctx.event_types(since=mark) == (["member_fenced"] if error == Error.FENCED_INSTANCE_ID else [])


@pytest.mark.parametrize("version", [7, 9])
def test_a_static_member_commits_with_its_instance_id(ctx: Scenario, version: int) -> None:
    formed = ctx.form_group("i-0", "i-1")
    assert ctx.commit(formed.member("i-1"), 1, "i-1", version=version).error == Error.NONE


# -------------------------------------------------------------------------------------------- sessions


@pytest.mark.parametrize(
    ("state", "keeps"), [("Stable", True), ("PreparingRebalance", True), ("CompletingRebalance", False)]
)
def test_a_commit_keeps_the_session_alive_in_stable_and_preparing(ctx: Scenario, state: str, keeps: bool) -> None:
    formed = bring_to(ctx, state)
    assert formed is not None
    follower = formed.member_ids[1]
    before = ctx.timer_deadline("heartbeat", "g", follower)
    ctx.advance(1_000)
    ctx.commit(follower, ctx.group().generation_id, "i-1")
    after = ctx.timer_deadline("heartbeat", "g", follower)
    assert (after == ctx.now + SESSION_MS) if keeps else (after == before)


def test_a_member_committing_instead_of_heartbeating_is_not_expired(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    for _ in range(6):
        ctx.advance(SESSION_MS // 2)
        assert ctx.commit(formed.leader, 1, "i-0").error == Error.NONE
    assert ctx.state() is STABLE


# ------------------------------------------------------------------------------------- per partition


def test_metadata_over_the_limit_is_refused_per_partition() -> None:
    ctx = Scenario(offset_metadata_max_bytes=8)
    try:
        formed = ctx.form_group("i-0")
        ok = ctx.commit(formed.leader, 1, "i-0", offsets={("t", 0): 1}, metadata="12345678")
        assert ok.error == Error.NONE
        big = ctx.commit(formed.leader, 1, "i-0", offsets={("t", 0): 2, ("t", 1): 3}, metadata="é" * 5)
        assert big.result == OffsetCommitResponse(
            Error.NONE,
            (
                TopicResults(
                    "t",
                    (
                        PartitionResult(0, Error.OFFSET_METADATA_TOO_LARGE),
                        PartitionResult(1, Error.OFFSET_METADATA_TOO_LARGE),
                    ),
                ),
            ),
        )
        assert ctx.committed() == {("t", 0): 1}
    finally:
        ctx.close()


def test_a_commit_persist_failure_is_coordinator_not_available_and_invisible(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    ctx.commit(formed.leader, 1, "i-0", offsets={("t", 0): 1})
    ctx.fail_next_writes(1)
    failed = ctx.commit(formed.leader, 1, "i-0", offsets={("t", 0): 2, ("t", 1): 9})
    assert_group_error(failed.result, Error.COORDINATOR_NOT_AVAILABLE)
    assert ctx.committed() == {("t", 0): 1}


def test_commits_record_offset_epoch_metadata_and_time(ctx: Scenario) -> None:
    ctx.commit(offsets={("t", 3): 42}, metadata="hello")
    (record,) = [r for r in ctx.records if isinstance(r, OffsetRecord)]
    assert isinstance(record, OffsetRecord) and record.value is not None
    assert (record.topic, record.partition, record.value.offset) == ("t", 3, 42)
    assert (record.value.metadata, record.value.commit_timestamp_ms, record.value.leader_epoch) == (
        "hello",
        ctx.now,
        -1,
    )


# ------------------------------------------------------------------------------------------------ fetch


def test_fetch_every_committed_topic_sorted(ctx: Scenario) -> None:
    ctx.commit(offsets=OFFSETS, metadata="m")
    assert ctx.fetch() == OffsetFetchResponse(
        Error.NONE,
        (
            FetchedTopic("audit", (FetchedPartition(0, 5, -1, "m"),)),
            FetchedTopic("orders", (FetchedPartition(0, 10, -1, "m"), FetchedPartition(1, 11, -1, "m"))),
        ),
    )


def test_fetch_named_topics_including_unknown_ones(ctx: Scenario) -> None:
    ctx.commit(offsets=OFFSETS)
    response = ctx.fetch(topics=["orders", "nothing", "orders"])
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("orders", 2), ("nothing", 0)]


def test_fetch_of_an_unknown_group_is_empty_and_creates_nothing(ctx: Scenario) -> None:
    assert ctx.fetch("nope") == OffsetFetchResponse(Error.NONE, ())
    assert ctx.fetch("nope", ["t"]) == OffsetFetchResponse(Error.NONE, (FetchedTopic("t", ()),))
    assert ctx.core.groups == {}


def test_fetch_of_a_too_long_group_id(ctx: Scenario) -> None:
    response = ctx.fetch("x" * 256, ["t"])
    assert response.error == Error.INVALID_GROUP_ID


def every_page(ctx: Scenario, topics: list[str] | None = None, limit: int = 10_000) -> list[OffsetFetchResponse]:
    pages = [ctx.fetch(topics=topics, limit=limit)]
    while pages[-1].next is not None:
        assert len(pages) < 1_000, "the pages never end"
        pages.append(ctx.fetch(topics=topics, after=pages[-1].next, limit=limit))
    return pages


def test_a_fetch_is_answered_in_pages_of_at_most_the_limit(ctx: Scenario) -> None:
    committed = {("a", p): p for p in range(5)} | {("b", p): p for p in range(4)}
    ctx.commit(offsets=committed)
    pages = every_page(ctx, limit=3)
    assert [sum(len(t.partitions) for t in page.topics) for page in pages] == [3, 3, 3]
    assert [t.name for t in pages[1].topics] == ["a", "b"]  # a topic split across two pages
    merged = pages[0].followed_by(pages[1]).followed_by(pages[2])
    assert merged.next is None and merged == ctx.fetch()
    assert {k: v.committed_offset for k, v in merged.by_partition().items()} == committed


def test_a_page_ends_before_its_byte_bound_but_holds_one_offset() -> None:
    ctx = Scenario(offset_fetch_page_max_bytes=2_000)
    ctx.commit(offsets={("t", p): p for p in range(6)}, metadata="m" * 700)
    pages = every_page(ctx)
    assert [len(page.topics[0].partitions) for page in pages] == [2, 2, 2]
    tiny = Scenario(offset_fetch_page_max_bytes=1)
    tiny.commit(offsets={("t", 0): 1, ("t", 1): 2})
    assert [len(page.topics[0].partitions) for page in every_page(tiny)] == [1, 1]
    ctx.close()
    tiny.close()


def test_named_topics_page_in_the_order_asked_each_once(ctx: Scenario) -> None:
    ctx.commit(offsets={("z", 0): 1, ("z", 1): 2, ("a", 0): 3})
    pages = every_page(ctx, topics=["z", "none", "a"], limit=2)
    names = [t.name for page in pages for t in page.topics]
    assert names == ["z", "none", "a"]
    assert [sum(len(t.partitions) for t in page.topics) for page in pages] == [2, 1]


def test_pages_see_commits_made_between_them_and_a_cursor_of_a_gone_topic_goes_on(ctx: Scenario) -> None:
    ctx.commit(offsets={("a", 0): 1, ("b", 0): 2, ("c", 0): 3})
    first = ctx.fetch(limit=2)
    assert [t.name for t in first.topics] == ["a", "b"] and first.next is not None
    ctx.commit(offsets={("d", 0): 4})
    rest = ctx.fetch(after=first.next)
    assert [t.name for t in rest.topics] == ["c", "d"] and rest.next is None
    after_gone = ctx.fetch(after=fetch_cursor("bb", 7))  # no topic "bb" (any more): on with "c"
    assert [t.name for t in after_gone.topics] == ["c", "d"]


def test_later_commits_overwrite_earlier_ones(ctx: Scenario) -> None:
    ctx.commit(offsets={("t", 0): 1})
    ctx.commit(offsets={("t", 0): 7, ("t", 1): 2})
    assert ctx.committed() == {("t", 0): 7, ("t", 1): 2}


def test_offsets_survive_a_reload_with_the_group(ctx: Scenario) -> None:
    formed = ctx.form_group("i-0")
    ctx.commit(formed.leader, 1, "i-0", offsets=OFFSETS)
    fresh = ctx.reload()
    assert fresh.committed() == OFFSETS and fresh.state() is STABLE
    fresh.close()


def test_a_simple_group_reloads_from_its_offsets_alone(ctx: Scenario) -> None:
    """As an older Berth wrote it: no group record, only its offsets."""
    ctx.commit(group="simple", offsets=OFFSETS)
    ctx.records = [r for r in ctx.records if isinstance(r, OffsetRecord)]
    fresh = ctx.reload()
    assert fresh.committed("simple") == OFFSETS and fresh.state("simple") is EMPTY
    fresh.close()


def test_commit_in_completing_rebalance_then_after_the_leader_sync(ctx: Scenario) -> None:
    formed = bring_to(ctx, "CompletingRebalance")
    assert formed is not None
    assert ctx.commit(formed.leader, 2, "i-0").error == Error.REBALANCE_IN_PROGRESS
    ctx.sync(formed.leader, 2, "i-0")
    assert ctx.state() is STABLE
    assert ctx.commit(formed.leader, 2, "i-0").error == Error.NONE
    assert ctx.state() is not COMPLETING and ctx.state() is not PREPARING
