"""The replicated store's pure parts, without etcd: the key layout, one transaction built from writes (member
epochs, folding, the journal chunk and index), the journal's retention, splitting under limits, the settings'
checks, and a tenure's local deadline."""

from __future__ import annotations

import time

import pytest

from berth.coordinator.core import (
    GroupDeltaRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetRecord,
    Write,
)
from berth.coordinator.protocol import GroupId, InstanceId, MemberId
from berth.coordinator.store.etcd import Limits, ReplicationConfig, Tenure, Term
from berth.coordinator.store.etcd.journal import JournalIndex, decode_chunk, encode_chunk
from berth.coordinator.store.etcd.keys import Keys, member_slot
from berth.coordinator.store.etcd.slots import GroupSlots
from berth.coordinator.store.etcd.txn import build, decode_topic_offsets, fitting
from berth.coordinator.store.segments import Retention

KEYS = Keys("/p/")
NO_RETENTION = Retention()


def ops(built_ops: list[dict[str, dict[str, bytes]]]) -> list[tuple[str, bytes, bytes]]:
    """(kind, key, value or range end) of each operation."""
    found = []
    for op in built_ops:
        ((kind, body),) = op.items()
        found.append((kind, body["key"], body.get("value", body.get("range_end", b""))))
    return found


def test_keys_round_trip_any_group_id_and_never_prefix_one_another() -> None:
    for group in ["a", "a/b", "é\x00z", "x" * 255]:
        assert KEYS.group_id_of(KEYS.group(group)) == group
        assert KEYS.member_key_parts(KEYS.member(group, 7, b"m-1/2")) == (group, 7, b"m-1/2")
        assert KEYS.topic_offsets_parts(KEYS.topic_offsets(group, "t/1")) == (group, "t/1")
        assert KEYS.expected_group_of(KEYS.expected_members(group)) == group
    assert not KEYS.member("ab", 0, b"m").startswith(KEYS.group_members("a"))
    assert not KEYS.member("a", 1, b"m").startswith(KEYS.epoch_members("a", 0))
    assert KEYS.journal_chunk(9) < KEYS.journal_chunk(10)


def member(n: int) -> MemberMetadata:
    return MemberMetadata(MemberId(f"m{n}"), None, "c", "h", 1, 1, b"s", b"a")


def test_a_whole_group_moves_its_members_to_the_next_epoch_and_a_delta_stays_in_the_current_one() -> None:
    value = GroupMetadata(protocol_type="consumer", generation=1, protocol="range", leader=MemberId("m0"))
    whole = Write(1, [GroupRecord(GroupId("g"), value, (member(0), member(1)))], [])
    built = build([whole], KEYS, {"g": 3}, JournalIndex(), NO_RETENTION, {}, {})
    assert built.epochs == {"g": 4}
    assert ("request_delete_range", KEYS.epoch_members("g", 3), KEYS.epoch_members("g", 3)[:-1] + b"0") in ops(
        built.ops
    )
    assert {key for kind, key, _ in ops(built.ops) if kind == "request_put"} == {
        KEYS.group("g"),
        KEYS.member("g", 4, b"m0"),
        KEYS.member("g", 4, b"m1"),
    }

    stored = built.slots["g"]
    assert stored is not None
    delta = Write(2, [GroupDeltaRecord(GroupId("g"), value, upserted=(member(2),), removed=(MemberId("m1"),))], [])
    built = build([delta], KEYS, {"g": 4}, JournalIndex(), NO_RETENTION, {}, {"g": stored.applied()})
    assert built.epochs == {}
    assert {(kind, key) for kind, key, _ in ops(built.ops)} == {
        ("request_put", KEYS.group("g")),
        ("request_put", KEYS.member("g", 4, b"m2")),
        ("request_delete_range", KEYS.member("g", 4, b"m1")),
    }

    gone = build(
        [Write(3, [GroupRecord(GroupId("g"), None)], [])], KEYS, {"g": 4}, JournalIndex(), NO_RETENTION, {}, {}
    )
    assert gone.epochs == {"g": None}
    assert ("request_delete_range", KEYS.group_members("g"), KEYS.group_members("g")[:-1] + b"0") in ops(gone.ops)


def static(instance: str, generation: int) -> MemberMetadata:
    return MemberMetadata(MemberId(f"{instance}-{generation:08d}-uuid"), InstanceId(instance), "c", "h", 1, 1)


VALUE = GroupMetadata(protocol_type="consumer", generation=1, protocol="range", leader=MemberId("i-0-00000001-uuid"))


def restart(old: MemberMetadata, new: MemberMetadata) -> Write:
    return Write(1, [GroupDeltaRecord(GroupId("g"), VALUE, upserted=(new,), removed=(old.member_id,))], [])


def member_ops(built_ops: list[dict[str, dict[str, bytes]]]) -> list[tuple[str, bytes]]:
    return [(kind, key) for kind, key, _ in ops(built_ops) if key.startswith(KEYS.members)]


def test_a_static_restart_overwrites_its_instances_key_and_deletes_nothing() -> None:
    first, second = static("i-0", 1), static("i-0", 2)
    stored = GroupSlots()
    stored.place(first.member_id, member_slot(first.member_id, first.group_instance_id))
    built = build([restart(first, second)], KEYS, {"g": 4}, JournalIndex(), NO_RETENTION, {}, {"g": stored})
    slot = b"i/" + b"i-0".hex().encode()
    assert member_ops(built.ops) == [("request_put", KEYS.member("g", 4, slot))]
    changes = built.slots["g"]
    assert changes is not None
    after = changes.applied()
    assert after.by_member == {second.member_id: slot} and after.by_slot == {slot: second.member_id}


def test_a_member_stored_under_its_member_id_by_schema_1_moves_to_its_slot_when_replaced() -> None:
    first, second = static("i-0", 1), static("i-0", 2)
    stored = GroupSlots()
    stored.place(first.member_id, first.member_id.encode())  # as schema 1 keyed every member
    built = build([restart(first, second)], KEYS, {"g": 4}, JournalIndex(), NO_RETENTION, {}, {"g": stored})
    assert member_ops(built.ops) == [
        ("request_put", KEYS.member("g", 4, member_slot(second.member_id, "i-0"))),
        ("request_delete_range", KEYS.member("g", 4, first.member_id.encode())),
    ]


def test_a_slot_held_by_another_stored_member_is_never_overwritten() -> None:
    holder, intruder = static("i-0", 1), static("i-0", 2)
    stored = GroupSlots()
    stored.place(holder.member_id, member_slot(holder.member_id, "i-0"))
    upsert = Write(1, [GroupDeltaRecord(GroupId("g"), VALUE, upserted=(intruder,))], [])
    built = build([upsert], KEYS, {"g": 4}, JournalIndex(), NO_RETENTION, {}, {"g": stored})
    assert member_ops(built.ops) == [("request_put", KEYS.member("g", 4, intruder.member_id.encode()))]


def test_a_member_that_joined_and_left_within_one_transaction_costs_no_key() -> None:
    first, second, third = static("i-0", 1), static("i-0", 2), static("i-0", 3)
    stored = GroupSlots()
    stored.place(first.member_id, member_slot(first.member_id, "i-0"))
    writes = [restart(first, second), restart(second, third)]
    built = build(writes, KEYS, {"g": 4}, JournalIndex(), NO_RETENTION, {}, {"g": stored})
    assert member_ops(built.ops) == [("request_put", KEYS.member("g", 4, member_slot(third.member_id, "i-0")))]
    changes = built.slots["g"]
    assert changes is not None and changes.applied().by_member == {third.member_id: member_slot("", "i-0")}


def test_writes_fold_so_no_key_appears_twice_and_events_become_one_numbered_chunk() -> None:
    writes = [
        Write(
            t,
            [OffsetRecord(GroupId("g"), "t", 0, OffsetAndMetadata(t, "", -1, t))],
            [{"ts_ms": t, "group_id": "g", "type": "x"}],
        )
        for t in range(1, 4)
    ]
    built = build(writes, KEYS, {}, JournalIndex((), 41), NO_RETENTION, {}, {})
    keys = [key for _, key, _ in ops(built.ops)]
    assert len(keys) == len(set(keys))
    assert [seq for seq, _ in built.lines] == [42, 43, 44]
    chunk = {key: value for _, key, value in ops(built.ops)}[KEYS.journal_chunk(42)]
    assert decode_chunk(chunk) == [line for _, line in built.lines]
    assert chunk[:1] != b"{" and len(chunk) < sum(len(line) for _, line in built.lines)  # compressed
    assert built.index is not None and (built.index.first, built.index.last) == (42, 44)


def test_a_chunk_is_read_compressed_as_schema_2_writes_it_or_plain_as_schema_1_did() -> None:
    lines = [(1, '{"seq":1,"type":"a"}'), (2, '{"seq":2,"type":"b"}')]
    assert decode_chunk(encode_chunk(lines)) == [line for _, line in lines]
    assert decode_chunk(b'{"seq":1,"type":"a"}\n{"seq":2,"type":"b"}') == [line for _, line in lines]
    with pytest.raises(ValueError, match="not one"):
        decode_chunk(b"\x00garbage")


def test_journal_retention_drops_whole_segments_never_the_newest() -> None:
    retention = Retention(max_bytes=1_000, segment_max_events=5, segment_max_bytes=10**9)
    index = JournalIndex()
    dropped = []
    for seq in range(1, 101):
        line = f'{{"seq":{seq},"ts_ms":{seq},"pad":"{"x" * 50}"}}'
        index, first_kept = index.appended([(seq, line)], retention)
        if first_kept is not None:
            dropped.append(first_kept)
    assert index.last == 100 and index.segments[-1].last == 100
    assert index.size <= 1_000 + 5 * 80
    assert dropped == sorted(dropped) and index.first == dropped[-1]
    assert JournalIndex.decode(index.encode()) == index
    with pytest.raises(ValueError, match="not readable"):
        JournalIndex.decode(b'{"last": 1}')


def test_a_run_that_does_not_fit_is_halved_until_it_does() -> None:
    value = GroupMetadata(protocol_type="consumer", generation=1, protocol="range", leader=MemberId("m0"))
    writes = [
        Write(t, [GroupRecord(GroupId(f"g{t}"), value, tuple(member(n) for n in range(20)))], []) for t in range(8)
    ]
    limits = Limits(max_txn_ops=64, max_request_bytes=10**6)

    def make(run: list[Write]) -> object:
        return build(run, KEYS, {}, JournalIndex(), NO_RETENTION, {}, {})

    take, built = fitting(writes, make, limits)  # type: ignore[arg-type]
    assert take == 2 and len(built.ops) == 44  # 22 each: the group, its old epoch's range, 20 members


def test_a_commit_rewrites_its_topics_offsets_key_whole() -> None:
    def offset(partition: int, value: int | None) -> OffsetRecord:
        return OffsetRecord(
            GroupId("g"), "t", partition, None if value is None else OffsetAndMetadata(value, "m", 1, 9)
        )

    first = build([Write(1, [offset(0, 5), offset(1, 6)], [])], KEYS, {}, JournalIndex(), NO_RETENTION, {}, {})
    assert [(kind, key) for kind, key, _ in ops(first.ops)] == [("request_put", KEYS.topic_offsets("g", "t"))]
    stored = first.topics[("g", "t")]
    assert stored is not None
    second = build(
        [Write(2, [offset(1, None), offset(2, 7)], [])],
        KEYS,
        {},
        JournalIndex(),
        NO_RETENTION,
        {("g", "t"): stored},
        {},
    )
    assert decode_topic_offsets(ops(second.ops)[0][2]) == {0: (5, 1, "m", 9), 2: (7, 1, "m", 9)}
    gone = build(
        [Write(3, [offset(0, None)], [])],
        KEYS,
        {},
        JournalIndex(),
        NO_RETENTION,
        {("g", "t"): b'{"0":[5,1,"m",9]}'},
        {},
    )
    assert [(kind, key) for kind, key, _ in ops(gone.ops)] == [("request_delete_range", KEYS.topic_offsets("g", "t"))]
    assert gone.topics == {("g", "t"): None}


def test_settings_that_cannot_work_are_named() -> None:
    fine = ReplicationConfig(("http://e:2379",))
    assert fine.problems(8 * 2**20) == []
    assert any("--group-metadata-max-bytes (unlimited)" in p for p in fine.problems(None))
    small = ReplicationConfig(("http://e:2379",), limits=Limits(128, 1_572_864))
    assert any("at most" in p for p in small.problems(8 * 2**20))
    assert any(
        "below --etcd-lease-ttl-s" in p for p in ReplicationConfig(("e",), lease_ttl_s=2, timeout_s=3).problems(1)
    )
    assert any("end with '/'" in p for p in ReplicationConfig(("e",), prefix="/x").problems(1))


def test_a_tenure_past_its_deadline_ends_and_is_never_extended_again() -> None:
    ended: list[str] = []
    tenure = Tenure(Term(1, 2, "r"), time.monotonic() + 5)
    tenure.on_end(lambda t: ended.append(t.reason))
    assert tenure.acting()
    assert tenure.extend(time.monotonic(), 30)
    assert 20 < tenure.remaining_s() <= 30  # the keep-alive's TTL from when it was sent, less the margin
    assert tenure.acting()
    tenure2 = Tenure(Term(1, 3, "r"), time.monotonic() - 0.01)  # e.g. frozen past it
    assert not tenure2.acting()
    assert not tenure2.extend(time.monotonic(), 10)  # a late renewal does not bring it back
    assert tenure2.ended and not tenure2.acting()
    tenure.end("stepping down")
    assert ended == ["stepping down"] and not tenure.acting()
