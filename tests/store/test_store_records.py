"""Records survive a reopen exactly, replay in the documented order, and tombstones delete."""

from __future__ import annotations

from pathlib import Path

from store_test_data import Reports, event, expected_members, group_snapshot, loaded, offset, write

from berth.coordinator.core import Coordinator, ExpectedMembersRecord, GroupRecord, OffsetRecord, Write
from berth.coordinator.store import GroupCommitWriter, SqliteStore
from berth.coordinator.store.batch import prepare_batch


def commit(data_dir: Path, *writes: Write) -> Reports:
    """Open the store, submit the writes, wait for them, close: the next open sees only what is on disk."""
    reports = Reports()
    with SqliteStore(data_dir) as store, GroupCommitWriter(store, reports) as writer:
        for w in writes:
            writer.submit(w)
    return reports


def test_every_record_kind_round_trips_through_a_reopen(data_dir: Path) -> None:
    orders = group_snapshot("orders", generation=4, members=5)
    commits = [offset("orders", "payments", 0, 42, metadata="ckpt-1"), offset("orders", "payments", 1, 7)]
    expected = expected_members("orders", "orders-0", "orders-1")

    reports = commit(data_dir, write(1, orders, *commits, expected))

    assert reports.outcomes == [(1, True)]
    with SqliteStore(data_dir) as store:
        assert sorted(loaded(store), key=repr) == sorted([orders, *commits, expected], key=repr)


def test_load_replays_group_records_then_offsets_then_expected_members(data_dir: Path) -> None:
    # Written interleaved and across groups; replay must still see every group before any offset.
    commit(
        data_dir,
        write(1, expected_members("b", "b-0"), offset("b", "t", 0, 1), group_snapshot("b")),
        write(2, offset("a", "t", 0, 1), group_snapshot("a"), expected_members("a", "a-0")),
    )

    with SqliteStore(data_dir) as store:
        kinds = [type(record) for record in store.load()]

    assert kinds == [GroupRecord] * 2 + [OffsetRecord] * 2 + [ExpectedMembersRecord] * 2


def test_tombstones_delete_the_group_its_offsets_and_its_expected_members(data_dir: Path) -> None:
    commit(
        data_dir,
        write(1, group_snapshot("gone"), offset("gone", "t", 0, 5), expected_members("gone", "gone-0")),
        write(2, group_snapshot("kept"), offset("kept", "t", 0, 9)),
        write(
            3,
            GroupRecord("gone", None),
            OffsetRecord("gone", "t", 0, None),
            ExpectedMembersRecord("gone", ()),
            events=[event("gone", "group_deleted")],
        ),
    )

    with SqliteStore(data_dir) as store:
        assert loaded(store) == [group_snapshot("kept"), offset("kept", "t", 0, 9)]


def test_group_records_of_one_group_in_one_transaction_collapse_to_the_last(data_dir: Path) -> None:
    reports = Reports()
    with SqliteStore(data_dir) as store, GroupCommitWriter(store, reports) as writer:
        writer.faults.set_stalled(True)
        writer.submit(write(1, group_snapshot("orders", generation=1)))
        writer.submit(write(2, group_snapshot("orders", generation=2)))
        writer.submit(write(3, GroupRecord("orders", None)))  # deleted...
        writer.submit(write(4, group_snapshot("orders", generation=3)))  # ...and created again
        writer.submit(write(5, group_snapshot("other", generation=1)))
        writer.submit(write(6, GroupRecord("other", None)))
        writer.faults.set_stalled(False)
        writer.flush()

        assert reports.transactions == [[(1, True), (2, True), (3, True), (4, True), (5, True), (6, True)]]
        assert loaded(store) == [group_snapshot("orders", generation=3)]


def test_a_batch_encodes_only_the_last_snapshot_of_each_group() -> None:
    batch = prepare_batch(
        [
            write(1, group_snapshot("orders", generation=1), group_snapshot("payments")),
            write(2, group_snapshot("orders", generation=2)),
            write(3, group_snapshot("orders", generation=3)),
        ]
    )

    assert [group_id for group_id, _ in batch.group_rows] == ["orders", "payments"]
    assert '"generation":3' in batch.group_rows[0][1]


def test_offsets_and_expected_members_in_one_transaction_keep_the_last_value() -> None:
    batch = prepare_batch(
        [
            write(1, offset("g", "t", 0, 1), expected_members("g", "g-0")),
            write(2, offset("g", "t", 0, 2), OffsetRecord("g", "t", 1, None)),
            write(3, expected_members("g"), offset("g", "t", 1, 3)),
        ]
    )

    assert [row[:4] for row in batch.offset_rows] == [("g", "t", 0, 2), ("g", "t", 1, 3)]
    assert batch.offset_deletes == []
    assert batch.expected_rows == []
    assert batch.expected_deletes == [("g",)]


def test_replaying_what_the_core_persisted_restores_its_groups(data_dir: Path) -> None:
    core = Coordinator()
    writes = core.put_expected_members("orders", ["orders-0", "orders-1"], ticket=1, now_ms=1_000).writes
    writes += core.put_expected_members("payments", ["payments-0"], ticket=2, now_ms=1_000).writes
    writes += core.delete_group("payments", ticket=3, now_ms=2_000).writes
    commit(data_dir, *writes)

    restored = Coordinator()
    with SqliteStore(data_dir) as store:
        restored.load(store.load(), now_ms=3_000)

    assert restored.get_expected_members("orders").group_instance_ids == ("orders-0", "orders-1")
    assert restored.describe("payments").group_state == "Dead"
