"""The layout variants ``python -m benchmarks.etcd_floor`` replays (``benchmarks.etcd_floor.variant``), on recorded
transactions made here: each changes only what it names, so the CPU it measures is that change's."""

from __future__ import annotations

import base64
import json
from typing import Any

from benchmarks.etcd_floor import PREFIX, SCHEMA_1, UNCOMPRESSED, variant
from berth.coordinator.store.etcd.journal import encode_chunk


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def put(key: str, value: bytes) -> dict[str, Any]:
    return {"request_put": {"key": b64((PREFIX + key).encode()), "value": b64(value)}}


def delete(key: str, range_end: str | None = None) -> dict[str, Any]:
    body = {"key": b64((PREFIX + key).encode())}
    if range_end is not None:
        body["range_end"] = b64((PREFIX + range_end).encode())
    return {"request_delete_range": body}


SLOT = "m/67/00000002/i/" + b"i-7".hex()


def member(member_id: str) -> bytes:
    return json.dumps({"member_id": member_id, "group_instance_id": "i-7"}).encode()


LINES = [(1, '{"seq":1,"type":"static_member_replaced"}'), (2, '{"seq":2,"type":"static_member_replaced"}')]
CHUNK = encode_chunk(LINES)
RECORDED = [
    {
        "success": [
            put("g/67", b"{}"),
            put(SLOT, member(f"m-{n}")),
            delete("m/67/00000001/", "m/67/000000010"),  # a whole epoch's range: a rebalance's, kept in every variant
            put(f"j/{n:020d}", CHUNK),
            put("journal", b'{"last":2}'),
        ]
    }
    for n in (1, 2)
]


def keys(ops: list[dict[str, Any]]) -> list[str]:
    return [base64.b64decode(next(iter(op.values()))["key"]).decode()[len(PREFIX) :] for op in ops]


def test_as_sent_is_the_recorded_transactions() -> None:
    assert variant(RECORDED, "as sent") == [txn["success"] for txn in RECORDED]


def test_journal_uncompressed_changes_only_the_chunk_to_its_plain_lines() -> None:
    ops = variant(RECORDED, UNCOMPRESSED)[0]
    assert keys(ops) == keys(RECORDED[0]["success"])
    changed = [(i, op) for i, op in enumerate(ops) if op != RECORDED[0]["success"][i]]
    assert [i for i, _ in changed] == [3]
    assert base64.b64decode(changed[0][1]["request_put"]["value"]).decode().split("\n") == [line for _, line in LINES]


def test_schema_1_keys_each_static_member_by_its_id_and_deletes_its_predecessors_key() -> None:
    first, second = variant(RECORDED, SCHEMA_1)
    assert keys(first) == ["g/67", "m/67/00000002/m-1", "m/67/00000001/", f"j/{1:020d}", "journal"]
    assert keys(second) == [
        "g/67",
        "m/67/00000002/m-1",
        "m/67/00000002/m-2",
        "m/67/00000001/",
        f"j/{2:020d}",
        "journal",
    ]
    assert "request_delete_range" in second[1] and base64.b64decode(second[2]["request_put"]["value"]) == member("m-2")
    assert base64.b64decode(second[4]["request_put"]["value"]).startswith(b'{"seq":1,')  # and the journal plain
