"""etcd's KV messages (``etcdserverpb``: ``TxnRequest``, ``RangeRequest`` and their answers) in protobuf, by hand.

``EtcdClient`` sends transactions and ranges over gRPC (``/etcdserverpb.KV/Txn``, ``/etcdserverpb.KV/Range``),
where etcd's JSON gateway costs etcd 1.6 times the CPU per write (docs/high-availability.md, "Throughput"). The
requests and answers keep the gateway's JSON shapes, so callers are the same on either path:

- a request is the gateway's dict (``{"compare": [...], "success": [...], "failure": [...]}``, a range's
  ``{"key": ..., "range_end": ..., "limit": ...}``); keys and values may be ``bytes`` or the gateway's base64
  text, integers ``int`` or decimal text, enums their names (``"CREATE"``, ``"EQUAL"``, ``"DESCEND"``);
- an answer is the gateway's dict too, with the 64-bit integers as ``int`` and keys and values as ``bytes``
  (``client.unb64`` takes either). Fields at their zero value are absent, as the gateway leaves them.

Only the fields the store uses are written; unknown fields in answers are skipped, so a newer etcd's additions
change nothing. Field numbers are those of etcd's ``api/etcdserverpb/rpc.proto`` and ``api/mvccpb/kv.proto``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

Message = dict[str, Any]

_COMPARE_RESULT = {"EQUAL": 0, "GREATER": 1, "LESS": 2, "NOT_EQUAL": 3}
_COMPARE_TARGET = {"VERSION": 0, "CREATE": 1, "MOD": 2, "VALUE": 3, "LEASE": 4}
#: Compare's target_union: which field carries the operand, by target.
_COMPARE_OPERAND = {"version": 4, "create_revision": 5, "mod_revision": 6, "value": 7, "lease": 8}
_SORT_ORDER = {"NONE": 0, "ASCEND": 1, "DESCEND": 2}
_SORT_TARGET = {"KEY": 0, "VERSION": 1, "CREATE": 2, "MOD": 3, "VALUE": 4}

# ----------------------------------------------------------------------------------------------- encoding


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        value += 1 << 64  # int64 on the wire: two's complement in ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _bytes_of(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else base64.b64decode(value)


def _len_field(number: int, data: bytes) -> bytes:
    return b"".join((_varint(number << 3 | 2), _varint(len(data)), data))


def _int_field(number: int, value: int | str | bool) -> bytes:
    value = int(value)
    return _varint(number << 3) + _varint(value) if value else b""


def _enum(names: Mapping[str, int], value: int | str) -> int:
    return value if isinstance(value, int) else names[value]


def encode_range(body: Message) -> bytes:
    """A ``RangeRequest``."""
    parts = [_len_field(1, _bytes_of(body["key"]))]
    if body.get("range_end") is not None:
        parts.append(_len_field(2, _bytes_of(body["range_end"])))
    parts += (
        _int_field(3, body.get("limit", 0)),
        _int_field(4, body.get("revision", 0)),
        _int_field(5, _enum(_SORT_ORDER, body.get("sort_order", 0))),
        _int_field(6, _enum(_SORT_TARGET, body.get("sort_target", 0))),
        _int_field(7, body.get("serializable", False)),
        _int_field(8, body.get("keys_only", False)),
        _int_field(9, body.get("count_only", False)),
    )
    return b"".join(parts)


def _put(body: Message) -> bytes:
    key, value = _bytes_of(body["key"]), body.get("value")
    parts = [b"\x0a", _varint(len(key)), key]
    if value:
        value = _bytes_of(value)
        parts += (b"\x12", _varint(len(value)), value)
    if body.get("lease"):
        parts.append(_int_field(3, body["lease"]))
    if body.get("prev_kv"):
        parts.append(_int_field(4, True))
    return b"".join(parts)


def _delete(body: Message) -> bytes:
    parts = [_len_field(1, _bytes_of(body["key"]))]
    if body.get("range_end") is not None:
        parts.append(_len_field(2, _bytes_of(body["range_end"])))
    if body.get("prev_kv"):
        parts.append(_int_field(3, True))
    return b"".join(parts)


def _request_op(op: Message) -> tuple[bytes, bytes]:
    """A ``RequestOp``: (its tag and length, its one field's message), left apart so the message is copied once."""
    if (put := op.get("request_put")) is not None:
        inner, tag = _put(put), b"\x12"
    elif (delete := op.get("request_delete_range")) is not None:
        inner, tag = _delete(delete), b"\x1a"
    elif (ranged := op.get("request_range")) is not None:
        inner, tag = encode_range(ranged), b"\x0a"
    else:
        raise ValueError(f"an etcd transaction operation of no known kind: {sorted(op)}")
    return tag + _varint(len(inner)), inner


def _compare(compare: Message) -> bytes:
    parts = [
        _int_field(1, _enum(_COMPARE_RESULT, compare.get("result", 0))),
        _int_field(2, _enum(_COMPARE_TARGET, compare.get("target", 0))),
        _len_field(3, _bytes_of(compare["key"])),
    ]
    for name, number in _COMPARE_OPERAND.items():
        if name == "value" and "value" in compare:
            parts.append(_len_field(number, _bytes_of(compare["value"])))
        elif name in compare:  # written even when zero: it says which operand the compare has
            parts.append(_varint(number << 3) + _varint(int(compare[name])))
    if compare.get("range_end") is not None:
        parts.append(_len_field(64, _bytes_of(compare["range_end"])))
    return b"".join(parts)


def encode_txn(body: Message) -> bytes:
    """A ``TxnRequest``."""
    parts = [_len_field(1, _compare(c)) for c in body.get("compare") or ()]
    for tag, ops in ((b"\x12", body.get("success")), (b"\x1a", body.get("failure"))):
        for op in ops or ():
            head, inner = _request_op(op)
            parts += (tag, _varint(len(head) + len(inner)), head, inner)
    return b"".join(parts)


# ----------------------------------------------------------------------------------------------- decoding


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """A message's fields in order: (number, value): ints for varints, bytes for length-delimited ones."""
    fields: list[tuple[int, int | bytes]] = []
    at, end = 0, len(data)
    while at < end:
        key, at = _read_varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, at = _read_varint(data, at)
            fields.append((number, value))
        elif kind == 2:
            length, at = _read_varint(data, at)
            if at + length > end:
                raise ValueError("truncated protobuf field")
            fields.append((number, data[at : at + length]))
            at += length
        elif kind == 1:
            at += 8  # fixed64: none in these messages; skipped
        elif kind == 5:
            at += 4  # fixed32: likewise
        else:
            raise ValueError(f"unsupported protobuf wire type {kind}")
    return fields


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated protobuf varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _decoder(names: Mapping[int, str], nested: Mapping[int, Callable[[bytes], Any]]) -> Callable[[bytes], Message]:
    """A decoder of one message kind: fields by ``names``, those in ``nested`` decoded as messages (a list of them
    when the name is in ``_REPEATED``)."""

    def decode(data: bytes) -> Message:
        out: Message = {}
        for number, value in _fields(data):
            name = names.get(number)
            if name is None:
                continue
            if number in nested:
                decoded = nested[number](value) if isinstance(value, bytes) else {}
                if name in _REPEATED:
                    out.setdefault(name, []).append(decoded)
                else:
                    out[name] = decoded
            elif name in _BOOLEANS:
                out[name] = bool(value)
            else:
                out[name] = value
        return out

    return decode


_REPEATED = frozenset({"kvs", "responses"})
_BOOLEANS = frozenset({"succeeded", "more"})

_header = _decoder({1: "cluster_id", 2: "member_id", 3: "revision", 4: "raft_term"}, {})
_key_value = _decoder({1: "key", 2: "create_revision", 3: "mod_revision", 4: "version", 5: "value", 6: "lease"}, {})
decode_range = _decoder({1: "header", 2: "kvs", 3: "more", 4: "count"}, {1: _header, 2: _key_value})
"""A ``RangeResponse``."""
#: A delete's answer carries the transaction's own header again: left out (a put's, nothing else: see decode_txn).
_delete_response = _decoder({2: "deleted"}, {})
_response_op = _decoder({1: "response_range", 3: "response_delete_range"}, {1: decode_range, 3: _delete_response})


def decode_txn(data: bytes) -> Message:
    """A ``TxnResponse``. Most of a write's answers are its puts', which hold only the transaction's own header
    again: each is ``{"response_put": {}}``, not parsed."""
    out: Message = {}
    responses: list[Message] = []
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            out["header"] = _header(value)
        elif number == 2:
            out["succeeded"] = bool(value)
        elif number == 3 and isinstance(value, bytes):
            responses.append({"response_put": {}} if value[:1] == b"\x12" else _response_op(value))
    if responses:
        out["responses"] = responses
    return out
