"""``EtcdClient``'s KV calls over gRPC (messages encoded by hand in ``kv_wire``) against a real etcd: every field the
store sends reaches etcd as meant, and every answer reads as the JSON gateway's answer to the same request reads.
Each request is made both ways, over gRPC (``txn``, ``range``) and through the gateway (``call``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from berth.coordinator.store.etcd.client import EtcdClient, EtcdRefused, KeyValue, b64, num, prefix_end
from berth.coordinator.store.etcd.kv_wire import _fields, decode_txn, encode_txn
from berth.operator.local.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(120)]

PREFIX = b"/wire/"


@pytest.fixture
def client(etcd_cluster: EtcdCluster) -> Iterator[EtcdClient]:
    client = EtcdClient(etcd_cluster.endpoints, timeout_s=3)
    client.txn([], [{"request_delete_range": {"key": PREFIX, "range_end": prefix_end(PREFIX)}}])
    yield client
    client.close()


def kvs(answer: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue.of(kv) for kv in answer.get("kvs", ())]


def put(key: bytes, value: bytes, **more: Any) -> dict[str, Any]:
    return {"request_put": {"key": key, "value": value, **more}}


def test_a_transaction_puts_deletes_and_reads_as_the_gateways_does(client: EtcdClient) -> None:
    answer = client.txn([], [put(PREFIX + b"a", b"1"), put(PREFIX + b"b", b"\x00\xff binary"), put(PREFIX + b"c", b"")])
    assert answer["succeeded"] is True
    revision = num(answer["header"]["revision"])
    assert revision > 0
    ranged = client.txn(
        [],
        [
            {"request_range": {"key": PREFIX, "range_end": prefix_end(PREFIX)}},
            {"request_delete_range": {"key": PREFIX + b"c"}},
        ],
    )
    found = kvs(ranged["responses"][0]["response_range"])
    assert [(kv.key, kv.value) for kv in found] == [
        (PREFIX + b"a", b"1"),
        (PREFIX + b"b", b"\x00\xff binary"),
        (PREFIX + b"c", b""),
    ]
    assert all(kv.mod_revision == revision == kv.create_revision for kv in found)
    assert num(ranged["responses"][1]["response_delete_range"]["deleted"]) == 1
    gateway = client.call("/v3/kv/range", {"key": b64(PREFIX), "range_end": b64(prefix_end(PREFIX))})
    assert [(kv.key, kv.value, kv.mod_revision) for kv in kvs(gateway)] == [
        (kv.key, kv.value, kv.mod_revision) for kv in client.range(PREFIX, prefix_end(PREFIX))[0]
    ]


def test_compares_on_create_mod_version_value_and_lease_decide_as_etcd_says(client: EtcdClient) -> None:
    lease = client.lease_grant(30)[0]
    first = num(client.txn([], [put(PREFIX + b"k", b"v", lease=lease)])["header"]["revision"])
    key = PREFIX + b"k"
    holds = [
        {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": first},
        {"key": key, "target": "MOD", "result": "EQUAL", "mod_revision": first},
        {"key": key, "target": "VERSION", "result": "EQUAL", "version": 1},
        {"key": key, "target": "VALUE", "result": "EQUAL", "value": b"v"},
        {"key": key, "target": "LEASE", "result": "EQUAL", "lease": lease},
        {"key": key, "target": "MOD", "result": "GREATER", "mod_revision": first - 1},
        {"key": key, "target": "MOD", "result": "LESS", "mod_revision": first + 1},
        {"key": key, "target": "VALUE", "result": "NOT_EQUAL", "value": b"w"},
        {"key": PREFIX + b"absent", "target": "CREATE", "result": "EQUAL", "create_revision": 0},
    ]
    fails = [
        {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": 0},
        {"key": key, "target": "VALUE", "result": "EQUAL", "value": b"w"},
        {"key": key, "target": "VERSION", "result": "GREATER", "version": 1},
        {"key": key, "target": "LEASE", "result": "EQUAL", "lease": lease + 1},
    ]
    failure = [{"request_range": {"key": key}}]
    for compare in holds:
        assert client.txn([compare], [], failure)["succeeded"] is True, compare
    for compare in fails:
        answer = client.txn([compare], [], failure)
        assert answer.get("succeeded", False) is False, compare
        held = kvs(answer["responses"][0]["response_range"])
        assert [(kv.key, kv.value, kv.lease) for kv in held] == [(key, b"v", lease)]
    # base64 text, as the store's older call sites write compares, means the same
    assert client.txn([{"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(b"v")}], [])["succeeded"]


def test_a_range_pages_counts_and_reads_at_a_revision(client: EtcdClient) -> None:
    revisions = [num(client.txn([], [put(PREFIX + b"p/%d" % i, b"%d" % i)])["header"]["revision"]) for i in range(5)]
    start, end = PREFIX + b"p/", prefix_end(PREFIX + b"p/")
    found, revision, more, count = client.range(start, end, limit=2)
    assert [kv.key for kv in found] == [PREFIX + b"p/0", PREFIX + b"p/1"] and more and count == 5
    assert revision == revisions[-1]
    found, _, more, _ = client.range(start, end, descending=True, limit=1)
    assert [kv.key for kv in found] == [PREFIX + b"p/4"] and more
    assert client.range(start, end, count_only=True)[0] == [] and client.range(start, end, count_only=True)[3] == 5
    assert [kv.value for kv in client.range(start, end, keys_only=True)[0]] == [b""] * 5
    found, _, _, count = client.range(start, end, revision=revisions[1])
    assert count == 2 and [kv.key for kv in found] == [PREFIX + b"p/0", PREFIX + b"p/1"]


def test_etcd_refusals_keep_their_grpc_status(client: EtcdClient) -> None:
    with pytest.raises(EtcdRefused) as refused:
        client.txn([], [put(PREFIX + b"same", b"1"), put(PREFIX + b"same", b"2")])  # a key twice in one txn
    assert refused.value.code == 3  # INVALID_ARGUMENT, as the gateway says it
    revision = client.range(b"\0")[1]
    client.call("/v3/kv/compaction", {"revision": revision})
    with pytest.raises(EtcdRefused) as compacted:
        client.range(PREFIX, prefix_end(PREFIX), revision=revision - 1)
    assert compacted.value.code == 11  # OUT_OF_RANGE: "required revision has been compacted"


def test_a_transaction_is_encoded_once_per_field_and_skips_what_is_zero() -> None:
    encoded = encode_txn({"compare": [], "success": [put(b"k", b"")], "failure": None})
    assert _fields(encoded) == [(2, b"\x12\x03\x0a\x01k")]  # success: RequestOp{request_put: PutRequest{key}}


def test_an_answer_skips_fields_it_does_not_know_and_a_truncated_one_is_an_error() -> None:
    header = b"\x18\x07"  # ResponseHeader{revision: 7}
    unknown = b"\xa0\x06\x01" + b"\xaa\x06\x02hi"  # fields 100 (varint) and 101 (bytes) of a newer etcd
    answer = decode_txn(b"\x0a" + bytes([len(header)]) + header + b"\x10\x01" + unknown)
    assert answer == {"header": {"revision": 7}, "succeeded": True}
    with pytest.raises(ValueError, match="truncated"):
        decode_txn(b"\x0a\x05\x18")
