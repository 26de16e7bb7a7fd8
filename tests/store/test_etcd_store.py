"""The replicated store against a real three-member etcd cluster: it keeps what the SQLite store keeps, its writes
are fenced on the term, a transaction sent again applies once, large runs are split and an oversized write is
refused alone, the journal pages and retains as on SQLite, and the election hands over."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from support.net import free_port

from berth.coordinator.core import (
    ExpectedMembersRecord,
    GroupDeltaRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetRecord,
    Record,
    Write,
)
from berth.coordinator.protocol import GroupId, InstanceId, MemberId
from berth.coordinator.store import GroupCommitWriter, SqliteStore, StoreConfig, StoreError
from berth.coordinator.store.etcd import EtcdClient, EtcdElection, EtcdStore, EtcdWriter, Fenced, Limits, Tenure, Term
from berth.coordinator.store.etcd.client import EtcdUnavailable, b64
from berth.coordinator.store.etcd.copy import copy_sqlite_to_etcd, wait_for_etcd
from berth.coordinator.store.etcd.journal import JournalIndex
from berth.coordinator.store.etcd.keys import Keys
from berth.coordinator.store.etcd.txn import Built, build
from berth.coordinator.store.segments import Retention
from berth.operator.local.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(120)]


@pytest.fixture
def client(etcd_cluster: EtcdCluster) -> Iterator[EtcdClient]:
    client = EtcdClient(etcd_cluster.endpoints, timeout_s=3)
    yield client
    client.close()


def take_term(client: EtcdClient, store: EtcdStore, name: str = "test", ttl_s: int = 30) -> Term:
    """Become the leader by hand (what the election does), and make the prefix a store."""
    lease, _ = client.lease_grant(ttl_s)
    keys = store.keys
    answer = client.txn([], [{"request_put": {"key": b64(keys.leader), "value": b64(name.encode()), "lease": lease}}])
    term = Term(lease, int(answer["header"]["revision"]), name)
    store.begin(term)
    return term


def built_for(store: EtcdStore, writes: list[Write]) -> Built:
    return build(writes, store.keys, store.epochs, store.index, store.retention, store.topic_offsets, store.slots)


def member(group: str, n: int, generation: int = 1) -> MemberMetadata:
    return MemberMetadata(
        member_id=MemberId(f"{group}-{n}-{generation}"),
        group_instance_id=InstanceId(f"{group}-{n}"),
        client_id="c",
        client_host="10.0.0.1",
        rebalance_timeout_ms=300_000,
        session_timeout_ms=45_000,
        subscription=b"sub",
        assignment=bytes([n, generation % 256]),
    )


def random_writes(rng: random.Random, count: int) -> list[Write]:
    """Whole groups, member deltas, deletions, offsets and expected members, in a random order."""
    writes: list[Write] = []
    members: dict[str, list[MemberMetadata]] = {}
    for token in range(1, count + 1):
        group = f"g/{rng.randrange(4)}é"  # a '/' and non-ASCII: ids are any UTF-8
        kind = rng.random()
        records: list[Record]
        if kind < 0.25 or group not in members:
            generation = rng.randrange(1, 100)
            new = [member(group, n, generation) for n in range(rng.randrange(0, 6))]
            members[group] = new
            value = GroupMetadata(
                protocol_type="consumer",
                generation=generation,
                protocol="range" if new else None,
                leader=new[0].member_id if new else None,
            )
            records = [GroupRecord(GroupId(group), value, tuple(new))]
        elif kind < 0.45 and members[group]:
            old = rng.choice(members[group])
            replacement = member(group, int(old.group_instance_id.split("-")[-1]), rng.randrange(100, 200))  # type: ignore[union-attr]
            members[group] = [replacement if m is old else m for m in members[group]]
            leader = members[group][0].member_id
            records = [
                GroupDeltaRecord(
                    GroupId(group),
                    GroupMetadata(protocol_type="consumer", generation=7, protocol="range", leader=leader),
                    upserted=(replacement,),
                    removed=(old.member_id,),
                )
            ]
        elif kind < 0.5:
            members.pop(group)
            records = [GroupRecord(GroupId(group), None)]
        elif kind < 0.85:
            value = None if rng.random() < 0.1 else OffsetAndMetadata(rng.randrange(10**12), "m€ta", 3, token)
            records = [OffsetRecord(GroupId(group), f"topic/{rng.randrange(3)}", rng.randrange(5), value)]
        else:
            ids = tuple(InstanceId(f"{group}-{n}") for n in range(rng.randrange(0, 4)))
            records = [ExpectedMembersRecord(GroupId(group), ids)]
        event = {"ts_ms": 1_700_000_000_000 + token, "group_id": group, "type": "test", "n": token}
        writes.append(Write(token, records, [event]))
    return writes


def same(records: list[Record]) -> list[str]:
    """Records in an order both stores agree on (SQLite loads offsets and expected members in row order)."""
    return sorted(repr(record) for record in records)


def sqlite_records(data_dir: Path, writes: list[Write]) -> tuple[list[Record], list[str]]:
    with SqliteStore(data_dir) as store:
        with GroupCommitWriter(store, lambda outcomes: None) as writer:
            for write in writes:
                writer.submit(write)
            writer.flush()
        return list(store.load()), store.journal_lines(0, 100_000)


def test_the_etcd_store_loads_what_the_sqlite_store_loads_for_the_same_writes(
    client: EtcdClient, etcd_prefix: str, tmp_path: Path
) -> None:
    writes = random_writes(random.Random(20), 300)
    expected_records, expected_journal = sqlite_records(tmp_path / "sqlite", writes)

    store = EtcdStore(client, etcd_prefix)
    store.check()
    term = take_term(client, store)
    list(store.load())
    outcomes: list[tuple[int, bool]] = []
    tenure = Tenure(term, time.monotonic() + 30)
    writer = EtcdWriter(store, tenure, outcomes.extend, max_batch_writes=7)  # many transactions, some with several
    for write in writes:
        writer.submit(write)
    writer.flush()
    writer.close()
    assert outcomes == [(w.token, True) for w in writes]
    stats = writer.stats
    assert stats.writes == len(writes) and sum(stats.counts) == store.transactions >= len(writes) / 7
    assert stats.seconds > 0 and stats.preparing_seconds > 0

    reloaded = EtcdStore(client, etcd_prefix)
    assert same(list(reloaded.load())) == same(expected_records)
    assert [line for _, line in reloaded.journal_lines_after(0)] == expected_journal
    assert reloaded.last_seq() == len(writes)


def test_a_schema_1_prefix_is_read_marked_schema_2_and_its_static_members_move_to_their_slots(
    client: EtcdClient, etcd_prefix: str
) -> None:
    keys = Keys(etcd_prefix)
    first, other = member("g", 0), member("g", 1)
    value = GroupMetadata(protocol_type="consumer", generation=1, protocol="range", leader=first.member_id)
    old_layout = [(keys.meta, b'{"schema": 1}'), (keys.group("g"), msgspec.json.encode(value))]
    old_layout += [(keys.member("g", 0, m.member_id.encode()), msgspec.json.encode(m)) for m in (first, other)]
    plain = '{"seq":1,"ts_ms":1,"group_id":"g","type":"member_joined"}'  # schema 1's journal chunks were plain text
    old_layout += [(keys.journal_chunk(1), plain.encode())]
    old_layout += [(keys.journal_index, JournalIndex().appended([(1, plain)], Retention())[0].encode())]
    client.txn([], [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in old_layout])

    store = EtcdStore(client, etcd_prefix)
    store.check()
    term = take_term(client, store)
    assert json.loads(client.range(keys.meta)[0][0].value) == {"schema": 2}
    assert same(list(store.load())) == same([GroupRecord(GroupId("g"), value, (first, other))])

    replacement = member("g", 0, 2)
    restart = GroupDeltaRecord(GroupId("g"), value, upserted=(replacement,), removed=(first.member_id,))
    event = {"ts_ms": 2, "group_id": "g", "type": "static_member_replaced"}
    store.commit(built_for(store, [Write(1, [restart], [event])]), term, "t-1")
    assert [seq for seq, _ in store.journal_lines_after(0)] == [1, 2]  # the plain chunk and a compressed one
    stored = {kv.key for kv in client.range(keys.group_members("g"), keys.group_members("g")[:-1] + b"0")[0]}
    assert stored == {keys.member("g", 0, b"i/" + b"g-0".hex().encode()), keys.member("g", 0, other.member_id.encode())}
    reloaded = [r for r in EtcdStore(client, etcd_prefix).load() if isinstance(r, GroupRecord)]
    assert {m.member_id for m in reloaded[0].members} == {replacement.member_id, other.member_id}

    # A Berth that knows only schema 2 refuses a prefix a newer one marked, at start and when it takes a term.
    client.txn([], [{"request_put": {"key": b64(keys.meta), "value": b64(b'{"schema": 3}')}}])
    with pytest.raises(StoreError, match="schema 3, newer than this Berth supports"):
        EtcdStore(client, etcd_prefix).check()
    with pytest.raises(StoreError, match="schema 3, newer than this Berth supports"):
        store.begin(term)


def test_a_write_of_another_term_is_refused_by_etcd_and_changes_nothing(client: EtcdClient, etcd_prefix: str) -> None:
    store = EtcdStore(client, etcd_prefix)
    old = take_term(client, store, "old")
    list(store.load())
    first = random_writes(random.Random(1), 1)
    store.commit(built_for(store, first), old, "old-1")

    client.lease_revoke(old.lease)  # the old leader's lease expires ...
    new = take_term(client, EtcdStore(client, etcd_prefix), "new")  # ... and another replica leads
    assert new.revision > old.revision

    later = [Write(2, [OffsetRecord(GroupId("g"), "t", 0, OffsetAndMetadata(99, "", -1, 1))], [])]
    with pytest.raises(Fenced):
        store.commit(built_for(store, later), old, "old-2")
    offsets = [r for r in EtcdStore(client, etcd_prefix).load() if isinstance(r, OffsetRecord) and r.group_id == "g"]
    assert offsets == []


def test_a_transaction_sent_again_after_a_lost_answer_applies_once(client: EtcdClient, etcd_prefix: str) -> None:
    store = EtcdStore(client, etcd_prefix)
    term = take_term(client, store)
    list(store.load())
    writes = [Write(1, [], [{"ts_ms": 1, "group_id": "g", "type": "test"}])]
    built = built_for(store, writes)
    before = store.progress_revision
    store.commit(built, term, "t-1")
    # The answer was "lost": the writer still believes the old progress revision and sends the same transaction.
    store.progress_revision = before
    store.commit(built, term, "t-1")
    again = EtcdStore(client, etcd_prefix)
    list(again.load())
    assert [line for _, line in again.journal_lines_after(0)] == [built.lines[0][1]]

    # Another transaction id at the old revision is someone else's write: refused.
    store.progress_revision = before
    with pytest.raises(Fenced):
        store.commit(built_for(store, [Write(2, [], [])]), term, "t-2")


def test_runs_over_the_limits_are_split_and_an_oversized_write_is_refused_alone(
    client: EtcdClient, etcd_prefix: str
) -> None:
    store = EtcdStore(client, etcd_prefix, limits=Limits(max_txn_ops=64, max_request_bytes=256 * 1024))
    term = take_term(client, store)
    list(store.load())

    def whole(token: int, group: str, members: int) -> Write:
        value = GroupMetadata(
            protocol_type="consumer", generation=token, protocol="range", leader=MemberId(f"{group}-0-{token}")
        )
        return Write(
            token, [GroupRecord(GroupId(group), value, tuple(member(group, n, token) for n in range(members)))], []
        )

    small = [whole(t, f"g{t}", 10) for t in range(1, 21)]  # 12 operations each
    huge = whole(99, "huge", 200)
    outcomes: list[tuple[int, bool]] = []
    stalled = EtcdWriter(store, Tenure(term, time.monotonic() + 30), outcomes.extend)
    stalled.faults.set_stalled(True)  # everything below is queued first, then goes in as few transactions as fit
    stalled.submit(small[0])
    time.sleep(0.2)
    for write in [*small[1:10], huge, *small[10:]]:
        stalled.submit(write)
    stalled.faults.set_stalled(False)
    stalled.flush()
    stalled.close()
    assert dict(outcomes) == {**{w.token: True for w in small}, 99: False}
    assert 5 <= store.transactions < 12  # at most 4 of them in the 56 operations the writer may use
    loaded = {r.group_id: r for r in EtcdStore(client, etcd_prefix).load() if isinstance(r, GroupRecord)}
    assert set(loaded) == {f"g{t}" for t in range(1, 21)}
    assert all(len(r.members) == 10 for r in loaded.values())


def test_journal_pages_and_retention_match_the_sqlite_store(client: EtcdClient, etcd_prefix: str) -> None:
    config = StoreConfig(journal_retention_bytes=20_000, segment_max_events=50)
    store = EtcdStore(client, etcd_prefix, config)
    term = take_term(client, store)
    list(store.load())
    writer = EtcdWriter(store, Tenure(term, time.monotonic() + 30), lambda outcomes: None, max_batch_writes=3)
    for token in range(1, 401):
        writer.submit(Write(token, [], [{"ts_ms": token, "group_id": "g", "type": "test", "pad": "x" * 100}]))
    writer.flush()
    writer.close()
    reader = EtcdStore(client, etcd_prefix, config)
    list(reader.load())
    assert reader.last_seq() == 400
    assert 1 < reader.first_seq() < 400  # the oldest segments were dropped, never the newest
    assert reader.journal_size().bytes <= 20_000 + 50 * 200
    page = reader.journal_window(0, 10)
    assert (page.first, page.last) == (reader.first_seq(), 400)
    seqs = [int(line[7 : line.index(",")]) for line in page.lines]
    assert seqs == list(range(reader.first_seq(), reader.first_seq() + 10))
    middle = reader.journal_window(350, 1000, max_bytes=1_000)
    assert middle.lines[0].startswith('{"seq":351,')
    assert 1 <= len(middle.lines) < 10
    assert reader.journal_window(400, 10).lines == []


#: A lease TTL long enough that a takeover "at once" and one "after the TTL" are far apart on a busy machine.
TAKEOVER_TTL_S = 10


def test_a_standby_takes_over_when_the_leader_steps_down_and_a_lost_lease_ends_the_term(
    client: EtcdClient, etcd_prefix: str
) -> None:
    store = EtcdStore(client, etcd_prefix)
    won: dict[str, Tenure] = {}
    elected = {name: threading.Event() for name in ("a", "b")}

    def election(name: str) -> EtcdElection:
        def on_elected(tenure: Tenure) -> None:
            won[name] = tenure
            elected[name].set()

        return EtcdElection(client, store.keys, name=name, ttl_s=TAKEOVER_TTL_S, on_elected=on_elected).start()

    a = election("a")
    assert elected["a"].wait(10)
    b = election("b")
    assert not elected["b"].wait(1)  # a leads, b stands by
    started = time.monotonic()
    a.resign()
    assert elected["b"].wait(5)
    assert time.monotonic() - started < TAKEOVER_TTL_S / 2  # at once, not after the TTL
    assert won["a"].ended and won["b"].acting()

    client.lease_revoke(won["b"].term.lease)  # b's lease is gone (as if etcd expired it)
    assert won["b"].wait_ended(5)
    assert not won["b"].acting()
    b.resign()


def test_copy_to_etcd_moves_everything_and_refuses_a_used_prefix(
    client: EtcdClient, etcd_prefix: str, tmp_path: Path
) -> None:
    writes = random_writes(random.Random(7), 200)
    expected_records, expected_journal = sqlite_records(tmp_path / "data", writes)
    with SqliteStore(tmp_path / "data") as source:
        target = EtcdStore(client, etcd_prefix)
        copied = copy_sqlite_to_etcd(source, target, say=lambda line: None)
    assert copied.last_seq == 200
    loaded = EtcdStore(client, etcd_prefix)
    loaded.check()
    assert same(list(loaded.load())) == same(expected_records)
    assert [line for _, line in loaded.journal_lines_after(0)] == expected_journal

    with SqliteStore(tmp_path / "data") as source, pytest.raises(StoreError, match="not empty"):
        copy_sqlite_to_etcd(source, EtcdStore(client, etcd_prefix), say=lambda line: None)


def test_the_copy_waits_for_etcd_to_answer_and_gives_up_after_its_wait(
    etcd_cluster: EtcdCluster, etcd_prefix: str
) -> None:
    """A copy started with etcd (the chart's Job) waits for it: here the first endpoint answers nothing (a member
    whose name does not resolve yet) and the next one does; with no member answering, the last error after the wait."""
    said: list[str] = []
    nowhere = f"http://127.0.0.1:{free_port()}"
    starting = EtcdClient([nowhere, *etcd_cluster.endpoints_flag.split(",")], timeout_s=1)
    wait_for_etcd(starting, etcd_prefix.encode(), 30, say=said.append)
    assert len(said) == 1 and said[0].startswith("waiting up to 30 s for etcd to answer: etcd http://127.0.0.1:")

    started = time.monotonic()
    with pytest.raises(EtcdUnavailable):
        wait_for_etcd(EtcdClient([nowhere], timeout_s=1), etcd_prefix.encode(), 1.5, say=said.append)
    assert 1.5 <= time.monotonic() - started < 10


def test_a_prefix_with_an_interrupted_copy_or_foreign_keys_is_refused(client: EtcdClient, etcd_prefix: str) -> None:
    store = EtcdStore(client, etcd_prefix)
    client.txn([], [{"request_put": {"key": b64(store.keys.migrating), "value": b64(b"copy-to-etcd")}}])
    with pytest.raises(StoreError, match="interrupted copy-to-etcd"):
        store.check()
    other = EtcdStore(client, etcd_prefix + "x/")
    client.txn([], [{"request_put": {"key": b64(other.keys.prefix + b"something"), "value": b64(b"1")}}])
    with pytest.raises(StoreError, match="not a Berth store"):
        other.check()


def test_a_replica_that_checks_the_prefix_while_another_claims_it_starts(
    etcd_cluster: EtcdCluster, client: EtcdClient, etcd_prefix: str
) -> None:
    """Issue 28 R3: three replicas started together on an empty prefix; one of them read "no meta key", then the
    winner created the leader and meta keys, then it counted the prefix's keys: "holds keys but no Berth meta key",
    exit 1. Here the winner's two keys land right after the checking replica's first read: the check reads one
    snapshot, so it starts."""

    class WinnerInBetween(EtcdClient):
        reads = 0

        def call(self, path: str, body: dict, *, timeout_s: float | None = None) -> dict:  # type: ignore[override]
            answer = super().call(path, body, timeout_s=timeout_s)
            self.reads += 1
            if self.reads == 1:  # another replica's campaign and first term land here
                keys = Keys(etcd_prefix)
                client.txn([], [{"request_put": {"key": b64(keys.leader), "value": b64(b"{}")}}])
                client.txn([], [{"request_put": {"key": b64(keys.meta), "value": b64(b'{"schema": 1}')}}])
            return answer

    EtcdStore(WinnerInBetween(etcd_cluster.endpoints), etcd_prefix).check()
