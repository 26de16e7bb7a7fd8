"""The layout variants ``python -m benchmarks.etcd_floor`` replays (``benchmarks.etcd_floor.variant``), on a recorded
transaction made here: each changes only what it names, so the CPU it measures is that change's."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from benchmarks.etcd_floor import PREFIX, variant


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def put(key: str, value: bytes) -> dict[str, Any]:
    return {"request_put": {"key": b64((PREFIX + key).encode()), "value": b64(value)}}


def delete(key: str, range_end: str | None = None) -> dict[str, Any]:
    body = {"key": b64((PREFIX + key).encode())}
    if range_end is not None:
        body["range_end"] = b64((PREFIX + range_end).encode())
    return {"request_delete_range": body}


MEMBER = json.dumps({"member_id": "m-new", "group_instance_id": "i-7"}).encode()
CHUNK = b'{"seq":1,"type":"static_member_replaced"}\n{"seq":2,"type":"static_member_replaced"}'
RECORDED = {
    "compare": [{"key": b64(b"leader"), "target": "CREATE"}],
    "success": [
        put("g/67", b"{}"),
        delete("m/67/00000002/m-old"),
        put("m/67/00000002/m-new", MEMBER),
        delete("m/67/00000001/", "m/67/000000010"),  # a whole epoch's range: a rebalance's, kept in every variant
        put("j/00000000000000000001", CHUNK),
        put("journal", b'{"last":2}'),
    ],
}


def keys(ops: list[dict[str, Any]]) -> list[str]:
    return [base64.b64decode(next(iter(op.values()))["key"]).decode()[len(PREFIX) :] for op in ops]


def test_as_sent_is_the_recorded_transaction() -> None:
    assert variant(RECORDED, "as sent") == RECORDED["success"]


def test_journal_compressed_changes_only_the_chunk_and_it_decompresses_to_the_recorded_lines() -> None:
    ops = variant(RECORDED, "journal compressed")
    assert keys(ops) == keys(RECORDED["success"])
    changed = [(i, op) for i, op in enumerate(ops) if op != RECORDED["success"][i]]
    assert [i for i, _ in changed] == [4]
    assert zlib.decompress(base64.b64decode(changed[0][1]["request_put"]["value"])) == CHUNK


def test_slot_keys_drop_a_replaced_members_delete_and_key_its_successor_by_instance() -> None:
    ops = variant(RECORDED, "slot keys, journal compressed")
    assert keys(ops) == ["g/67", "m/67/i-7", "m/67/00000001/", "j/00000000000000000001", "journal"]
    assert base64.b64decode(ops[1]["request_put"]["value"]) == MEMBER
