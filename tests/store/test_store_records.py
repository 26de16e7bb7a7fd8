"""Records survive a reopen exactly, replay in the documented order, and tombstones delete."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
from store_test_data import Reports, event, expected_members, group_snapshot, loaded, member, offset, write

from berth.coordinator.core import (
    Coordinator,
    Effects,
    ExpectedMembersRecord,
    GroupDeltaRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetRecord,
    Write,
)
from berth.coordinator.protocol import Error, JoinProtocol, JoinRequest, SyncAssignment, SyncRequest
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


# --------------------------------------------------------------------------- member rows, deltas, formats


def test_a_delta_rewrites_only_the_members_it_names(data_dir: Path) -> None:
    """A static restart persists the swap of one member, not the group: two rows, whatever the group's size."""
    before = group_snapshot("orders", members=1_000)
    restarted = msgspec.structs.replace(member("orders", 7), member_id="orders-7-new-uuid")
    header = msgspec.structs.replace(before.value, leader="orders-7-new-uuid")
    delta = GroupDeltaRecord("orders", header, upserted=(restarted,), removed=("orders-7-uuid",))

    batch = prepare_batch([write(2, delta)])
    assert (len(batch.group_rows), len(batch.member_rows), batch.member_deletes) == (
        1,
        1,
        [("orders", "orders-7-uuid")],
    )
    commit(data_dir, write(1, before), write(2, delta))

    with SqliteStore(data_dir) as store:
        (record,) = loaded(store)
    assert isinstance(record, GroupRecord) and record.value == header
    by_id = {m.member_id: m for m in record.members}
    assert len(by_id) == 1_000 and "orders-7-uuid" not in by_id and by_id["orders-7-new-uuid"] == restarted


def test_a_snapshot_and_a_delta_in_one_transaction_apply_in_order(data_dir: Path) -> None:
    snapshot = group_snapshot("orders", members=3)
    moved = msgspec.structs.replace(member("orders", 1), member_id="orders-1-new-uuid")
    assert snapshot.value is not None
    delta = GroupDeltaRecord("orders", snapshot.value, upserted=(moved,), removed=("orders-1-uuid",))
    reports = Reports()
    with SqliteStore(data_dir) as store, GroupCommitWriter(store, reports) as writer:
        writer.faults.set_stalled(True)
        writer.submit(write(1, group_snapshot("orders", members=5)))
        writer.submit(write(2, snapshot))
        writer.submit(write(3, delta))
        writer.faults.set_stalled(False)
        writer.flush()
        assert len(reports.transactions) == 1
        (record,) = loaded(store)
    assert sorted(m.member_id for m in record.members) == ["orders-0-uuid", "orders-1-new-uuid", "orders-2-uuid"]


def test_records_of_a_newer_or_older_writer_are_read_with_defaults(data_dir: Path) -> None:
    """Additive versioning (docs/formats.md): unknown fields are ignored, missing optional fields defaulted."""
    commit(data_dir, write(1, group_snapshot("orders", members=1)))
    with sqlite3.connect(data_dir / "berth.db") as conn:
        conn.execute(
            "UPDATE groups SET record = ?",
            ('{"version":7,"protocol_type":"consumer","generation":4,"protocol":"range","sponsor":{"uid":"x"}}',),
        )
        conn.execute("UPDATE group_members SET record = ?", ('{"member_id":"orders-0-uuid","future":[1,2]}',))

    with SqliteStore(data_dir) as store:
        (record,) = loaded(store)
    assert record.value == GroupMetadata(version=7, protocol_type="consumer", generation=4, protocol="range")
    assert record.members == (MemberMetadata("orders-0-uuid"),)


def test_a_schema_1_database_is_migrated_with_its_members_in_their_own_rows(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    v1_group = {
        "version": 1,
        "protocol_type": "consumer",
        "generation": 3,
        "protocol": "range",
        "leader": "m-0",
        "current_state_timestamp": 1_700_000_000_000,
        "members": [
            {
                "member_id": f"m-{i}",
                "group_instance_id": f"i-{i}",
                "client_id": "c",
                "client_host": "10.0.0.1",
                "rebalance_timeout_ms": 300_000,
                "session_timeout_ms": 45_000,
                "subscription": "c3Vi",
                "assignment": "YXNz",
            }
            for i in range(2)
        ],
    }
    with sqlite3.connect(data_dir / "berth.db") as conn:
        conn.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE groups (group_id TEXT PRIMARY KEY, record TEXT NOT NULL);"
            "CREATE TABLE offsets (group_id TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,"
            " committed_offset INTEGER NOT NULL, leader_epoch INTEGER NOT NULL, metadata TEXT NOT NULL,"
            " commit_timestamp_ms INTEGER NOT NULL, PRIMARY KEY (group_id, topic, partition)) WITHOUT ROWID;"
            "CREATE TABLE expected_members (group_id TEXT PRIMARY KEY, group_instance_ids TEXT NOT NULL);"
            "CREATE TABLE journal (seq INTEGER PRIMARY KEY, event TEXT NOT NULL);"
            "INSERT INTO meta VALUES ('schema_version', '1');"
        )
        conn.execute("INSERT INTO groups VALUES ('g', ?)", (json.dumps(v1_group),))

    with SqliteStore(data_dir) as store:
        (record,) = loaded(store)
    assert record.value == GroupMetadata(1, "consumer", 3, "range", "m-0", 1_700_000_000_000)
    assert [(m.member_id, m.subscription, m.assignment) for m in record.members] == [
        ("m-0", b"sub", b"ass"),
        ("m-1", b"sub", b"ass"),
    ]
    core = Coordinator()
    core.load([record], now_ms=1_700_000_001_000)
    assert core.describe("g").group_state == "Stable" and core.describe("g").leader == "m-0"


def test_a_static_restart_persisted_as_a_delta_reloads_as_the_live_group(data_dir: Path) -> None:
    """Through the real store: form a group, restart a static member (a two-row delta), reload; the reloaded
    group is the live one (members, leader, generation, assignments)."""
    core = Coordinator(new_uuid=iter(f"u{i}" for i in range(100)).__next__)
    now = 1_700_000_000_000
    writes: list[Write] = []

    def settle(fx: Effects) -> list[tuple[int, Any]]:
        replies = list(fx.replies)
        for w in fx.writes:
            writes.append(w)
            replies += settle(core.on_write_done(w.token, True, now))
        return replies

    settle(core.put_expected_members("g", ["i-0", "i-1", "i-2"], 1, now))
    joins = [
        settle(
            core.join(
                "g",
                JoinRequest(
                    member_id="",
                    session_timeout_ms=60_000,
                    protocol_type="consumer",
                    protocols=(JoinProtocol("range", f"sub-{i}".encode()),),
                    group_instance_id=f"i-{i}",
                ),
                9,
                10 + i,
                now,
            )
        )
        for i in range(3)
    ]
    answers = [r for replies in joins for _, r in replies]
    leader = next(a for a in answers if a.is_leader)
    assignment = {a.member_id: f"part-of-{a.member_id}".encode() for a in answers}
    sync = SyncRequest(
        generation_id=1,
        member_id=leader.member_id,
        assignments=tuple(SyncAssignment(m, data) for m, data in assignment.items()),
        group_instance_id=leader.member_id.rsplit("-", 1)[0],  # member ids are <instance id>-<uuid>
        protocol_type="consumer",
        protocol_name="range",
    )
    assert all(error is Error.NONE for _, reply in settle(core.sync("g", sync, 5, 20, now)) for error in [reply.error])
    assert core.describe("g").group_state == "Stable"
    restart = JoinRequest(
        member_id="",
        session_timeout_ms=60_000,
        protocol_type="consumer",
        protocols=(JoinProtocol("range", b"sub-restarted"),),
        group_instance_id="i-2",
    )
    settle(core.join("g", restart, 9, 30, now + 1_000))
    assert isinstance(writes[-1].records[-1], GroupDeltaRecord)

    commit(data_dir, *writes)
    reloaded = Coordinator()
    with SqliteStore(data_dir) as store:
        reloaded.load(store.load(), now_ms=now + 2_000)
    live, again = core.describe("g"), reloaded.describe("g")
    assert (again.group_state, again.generation_id, again.leader) == (live.group_state, live.generation_id, live.leader)
    assert set(again.members) == set(live.members)
