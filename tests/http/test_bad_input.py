"""Bad input gets a clear 4xx naming the field, changes nothing, and never crashes the coordinator.

One coordinator process serves the whole table (started with small limits so that "too big" is cheap to
send); a Stable group formed before the table must look exactly the same after every rejected request.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from support.coordinator import CoordinatorProcess
from support.rawhttp import post_json, send

pytestmark = pytest.mark.timeout(120)

JSON = {"Content-Type": "application/json"}
JOIN_OK: dict[str, Any] = {
    "member_id": "",
    "group_instance_id": "s-0",
    "session_timeout_ms": 10_000,
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": "AA=="}],
}
LONG_GROUP = "g" * 256
LIMITS = ("--max-body-bytes", "4096", "--max-list-items", "50", "--max-id-bytes", "100")


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    body = dict(base)
    for key, value in changes.items():
        if value is _DROP:
            body.pop(key, None)
        else:
            body[key] = value
    return body


_DROP = object()


@pytest.fixture(scope="module")
def stable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    """A coordinator with a Stable one-member group "stable" whose view must never change."""
    proc = CoordinatorProcess(Path(tmp_path_factory.mktemp("bad-input")) / "data", *LIMITS)
    proc.start()
    _form_stable_group(proc.url)
    yield proc
    proc.kill()


def _form_stable_group(url: str) -> None:
    import threading

    result: dict[str, Any] = {}

    def join() -> None:
        result["join"] = post_json(url, "/v1/groups/stable/join", JOIN_OK)[1]

    t = threading.Thread(target=join)
    t.start()
    while send(url, "GET", "/v1/groups/stable")[1].get("group_state") != "PreparingRebalance":
        pass
    post_json(url, "/v1/debug/clock", {"advance_ms": 3_000})
    t.join(10)
    joined = result["join"]
    _, synced = post_json(
        url,
        "/v1/groups/stable/sync",
        {
            "member_id": joined["member_id"],
            "generation_id": joined["generation_id"],
            "group_instance_id": "s-0",
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": joined["member_id"], "assignment": base64.b64encode(b"p0").decode()}],
        },
    )
    assert synced["error"] == "NONE", synced


def _observable_state(url: str) -> tuple[Any, ...]:
    return (
        send(url, "GET", "/v1/groups")[1],
        send(url, "GET", "/v1/groups/stable")[1],
        send(url, "GET", "/v1/groups/stable/offsets")[1],
        send(url, "GET", "/v1/journal?after=0&limit=10000")[1]["next"],
    )


def _raw(method: str, path: str, body: bytes | None, headers: dict[str, str] | None = None) -> tuple[Any, ...]:
    return (method, path, body, headers if headers is not None else JSON)


def _json(path: str, body: Any, method: str = "POST") -> tuple[Any, ...]:
    return _raw(method, path, json.dumps(body).encode())


J = "/v1/groups/stable/join"
S = "/v1/groups/stable/sync"
H = "/v1/groups/stable/heartbeat"
L = "/v1/groups/stable/leave"
OFF = "/v1/groups/stable/offsets"
E = "/v1/groups/stable/expected-members"
SYNC_OK = {"member_id": "x", "generation_id": 1, "assignments": []}
COMMIT_OK = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}

# (case id, request, expected HTTP status, expected error name, a field the message must name)
HTTP_REJECTIONS: list[tuple[str, tuple[Any, ...], int, str, str]] = [
    ("not json", _raw("POST", J, b"{"), 400, "INVALID_REQUEST", "body"),
    ("json array", _raw("POST", J, b"[]"), 400, "INVALID_REQUEST", "body"),
    ("json string", _raw("POST", J, b'"join"'), 400, "INVALID_REQUEST", "body"),
    ("empty body", _raw("POST", J, b""), 400, "INVALID_REQUEST", "body"),
    ("not utf-8", _raw("POST", J, b'{"member_id": "\xff"}'), 400, "INVALID_REQUEST", "body"),
    ("NaN", _raw("POST", J, b'{"session_timeout_ms": NaN}'), 400, "INVALID_REQUEST", "body"),
    ("deep nesting", _raw("POST", J, b"[" * 1500 + b"]" * 1500), 400, "INVALID_REQUEST", "body"),
    (
        "huge integer",
        _raw("POST", J, b'{"session_timeout_ms": 1' + b"0" * 5000 + b"}"),
        413,
        "PAYLOAD_TOO_LARGE",
        "body",
    ),
    ("member_id type", _json(J, _with(JOIN_OK, member_id=5)), 400, "INVALID_REQUEST", "member_id"),
    ("member_id null", _json(J, _with(JOIN_OK, member_id=None)), 400, "INVALID_REQUEST", "member_id"),
    ("member_id missing", _json(J, _with(JOIN_OK, member_id=_DROP)), 400, "INVALID_REQUEST", "member_id"),
    ("session type", _json(J, _with(JOIN_OK, session_timeout_ms="10")), 400, "INVALID_REQUEST", "session_timeout_ms"),
    ("session bool", _json(J, _with(JOIN_OK, session_timeout_ms=True)), 400, "INVALID_REQUEST", "session_timeout_ms"),
    ("session float", _json(J, _with(JOIN_OK, session_timeout_ms=1.5)), 400, "INVALID_REQUEST", "session_timeout_ms"),
    ("session int32", _json(J, _with(JOIN_OK, session_timeout_ms=2**40)), 400, "INVALID_REQUEST", "session_timeout_ms"),
    (
        "session missing",
        _json(J, _with(JOIN_OK, session_timeout_ms=_DROP)),
        400,
        "INVALID_REQUEST",
        "session_timeout_ms",
    ),
    (
        "rebalance negative",
        _json(J, _with(JOIN_OK, rebalance_timeout_ms=-5)),
        400,
        "INVALID_REQUEST",
        "rebalance_timeout_ms",
    ),
    ("protocol_type missing", _json(J, _with(JOIN_OK, protocol_type=_DROP)), 400, "INVALID_REQUEST", "protocol_type"),
    ("protocols missing", _json(J, _with(JOIN_OK, protocols=_DROP)), 400, "INVALID_REQUEST", "protocols"),
    ("protocols type", _json(J, _with(JOIN_OK, protocols={"range": "AA=="})), 400, "INVALID_REQUEST", "protocols"),
    (
        "protocol name missing",
        _json(J, _with(JOIN_OK, protocols=[{"metadata": "AA=="}])),
        400,
        "INVALID_REQUEST",
        "protocols[0].name",
    ),
    (
        "metadata not base64",
        _json(J, _with(JOIN_OK, protocols=[{"name": "range", "metadata": "***"}])),
        400,
        "INVALID_REQUEST",
        "protocols[0].metadata",
    ),
    (
        "duplicate protocol",
        _json(J, _with(JOIN_OK, protocols=[{"name": "r", "metadata": ""}, {"name": "r", "metadata": ""}])),
        400,
        "INVALID_REQUEST",
        "protocols[1].name",
    ),
    ("instance id type", _json(J, _with(JOIN_OK, group_instance_id=7)), 400, "INVALID_REQUEST", "group_instance_id"),
    ("long member id", _json(J, _with(JOIN_OK, member_id="m" * 101)), 400, "INVALID_REQUEST", "member_id"),
    (
        "lone surrogate",
        _raw("POST", J, json.dumps(_with(JOIN_OK, member_id="\ud800")).encode()),
        400,
        "INVALID_REQUEST",
        "member_id",
    ),
    ("api_version type", _json(J, _with(JOIN_OK, api_version="9")), 400, "INVALID_REQUEST", "api_version"),
    ("api_version too new", _json(J, _with(JOIN_OK, api_version=10)), 400, "UNSUPPORTED_VERSION", "api_version"),
    ("api_version negative", _json(J, _with(JOIN_OK, api_version=-1)), 400, "UNSUPPORTED_VERSION", "api_version"),
    ("sync assignments missing", _json(S, _with(SYNC_OK, assignments=_DROP)), 400, "INVALID_REQUEST", "assignments"),
    ("sync generation missing", _json(S, _with(SYNC_OK, generation_id=_DROP)), 400, "INVALID_REQUEST", "generation_id"),
    (
        "sync assignment type",
        _json(S, _with(SYNC_OK, assignments=[{"member_id": "x", "assignment": 3}])),
        400,
        "INVALID_REQUEST",
        "assignments[0].assignment",
    ),
    ("heartbeat member missing", _json(H, {"generation_id": 1}), 400, "INVALID_REQUEST", "member_id"),
    ("leave members missing", _json(L, {"api_version": 3}), 400, "INVALID_REQUEST", "members"),
    ("leave v0 member missing", _json(L, {"api_version": 0}), 400, "INVALID_REQUEST", "member_id"),
    (
        "too many leaves",
        _json(L, {"members": [{"group_instance_id": str(i)} for i in range(51)]}),
        400,
        "INVALID_REQUEST",
        "members",
    ),
    ("offsets topics missing", _json(OFF, {}), 400, "INVALID_REQUEST", "topics"),
    (
        "partition index missing",
        _json(OFF, {"topics": [{"name": "t", "partitions": [{"committed_offset": 1}]}]}),
        400,
        "INVALID_REQUEST",
        "topics[0].partitions[0].partition_index",
    ),
    (
        "negative partition",
        _json(OFF, {"topics": [{"name": "t", "partitions": [{"partition_index": -1, "committed_offset": 1}]}]}),
        400,
        "INVALID_REQUEST",
        "partition_index",
    ),
    (
        "offset beyond int64",
        _json(OFF, {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 2**63}]}]}),
        400,
        "INVALID_REQUEST",
        "committed_offset",
    ),
    (
        "expected not a list",
        _json(E, {"group_instance_ids": "a,b"}, "PUT"),
        400,
        "INVALID_REQUEST",
        "group_instance_ids",
    ),
    (
        "expected item type",
        _json(E, {"group_instance_ids": ["a", 2]}, "PUT"),
        400,
        "INVALID_REQUEST",
        "group_instance_ids[1]",
    ),
    (
        "no content type",
        _raw("POST", J, json.dumps(JOIN_OK).encode(), {}),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "Content-Type",
    ),
    (
        "text/plain",
        _raw("POST", J, json.dumps(JOIN_OK).encode(), {"Content-Type": "text/plain"}),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "Content-Type",
    ),
    ("body too large", _raw("POST", J, b'{"x": "' + b"a" * 5000 + b'"}'), 413, "PAYLOAD_TOO_LARGE", "body"),
    ("group id not utf-8", _json("/v1/groups/bad%FF/join", JOIN_OK), 400, "INVALID_REQUEST", "group_id"),
    ("empty group segment", _json("/v1/groups//join", JOIN_OK), 404, "NOT_FOUND", "path"),
    ("unknown route", _raw("GET", "/v1/nothing", None), 404, "NOT_FOUND", "path"),
    ("wrong method", _raw("GET", J, None), 405, "METHOD_NOT_ALLOWED", "method"),
    ("journal limit", _raw("GET", "/v1/journal?limit=10001", None), 400, "INVALID_REQUEST", "limit"),
    ("journal after", _raw("GET", "/v1/journal?after=-1", None), 400, "INVALID_REQUEST", "after"),
    ("journal after text", _raw("GET", "/v1/journal?after=abc", None), 400, "INVALID_REQUEST", "after"),
    (
        "describe version",
        _raw("GET", "/v1/groups/stable?api_version=6", None),
        400,
        "UNSUPPORTED_VERSION",
        "api_version",
    ),
    # A negative version in a query is as unsupported as in a body (Kafka's answer, docs/api.md §3).
    (
        "describe version negative",
        _raw("GET", "/v1/groups/stable?api_version=-1", None),
        400,
        "UNSUPPORTED_VERSION",
        "api_version",
    ),
    (
        "fetch version negative",
        _raw("GET", "/v1/groups/stable/offsets?api_version=-1", None),
        400,
        "UNSUPPORTED_VERSION",
        "api_version",
    ),
    (
        "list version negative",
        _raw("GET", "/v1/groups?api_version=-1", None),
        400,
        "UNSUPPORTED_VERSION",
        "api_version",
    ),
    (
        "delete version negative",
        _raw("DELETE", "/v1/groups/stable?api_version=-1", None),
        400,
        "UNSUPPORTED_VERSION",
        "api_version",
    ),
    (
        "describe version text",
        _raw("GET", "/v1/groups/stable?api_version=x", None),
        400,
        "INVALID_REQUEST",
        "api_version",
    ),
    ("clock negative", _json("/v1/debug/clock", {"advance_ms": -1}), 400, "INVALID_REQUEST", "advance_ms"),
    ("clock missing", _json("/v1/debug/clock", {}), 400, "INVALID_REQUEST", "advance_ms"),
]


@pytest.mark.parametrize(
    ("request_", "status", "error", "field"), [c[1:] for c in HTTP_REJECTIONS], ids=[c[0] for c in HTTP_REJECTIONS]
)
def test_rejected_with_a_clear_error_and_no_state_change(
    stable: CoordinatorProcess, request_: tuple[Any, ...], status: int, error: str, field: str
) -> None:
    before = _observable_state(stable.url)
    got_status, body = send(stable.url, *request_)
    assert got_status == status, body
    assert body["error"] == error
    assert field in body["message"]
    assert "Traceback" not in json.dumps(body)
    if status == 400 and error in ("INVALID_REQUEST", "UNSUPPORTED_VERSION"):
        assert body["error_code"] == (42 if error == "INVALID_REQUEST" else 35)
    assert _observable_state(stable.url) == before
    assert send(stable.url, "GET", "/healthz")[0] == 200


# In-band protocol rejections: HTTP 200 with the route's response shape and an error code.
IN_BAND: list[tuple[str, str, dict[str, Any], int]] = [
    ("join v4 with instance id", J, _with(JOIN_OK, api_version=4), 35),
    (
        "join v0 with rebalance timeout",
        J,
        _with(JOIN_OK, api_version=0, group_instance_id=None, rebalance_timeout_ms=1),
        35,
    ),
    ("sync v2 with instance id", S, _with(SYNC_OK, api_version=2, group_instance_id="s-0"), 35),
    ("sync v4 with protocol type", S, _with(SYNC_OK, api_version=4, protocol_type="consumer"), 35),
    (
        "heartbeat v2 with instance id",
        H,
        {"api_version": 2, "member_id": "x", "generation_id": 1, "group_instance_id": "s-0"},
        35,
    ),
    ("leave v2 with members", L, {"api_version": 2, "member_id": "x", "members": []}, 35),
    ("leave v3 with member_id", L, {"api_version": 3, "member_id": "x", "members": []}, 35),
    ("commit v6 with instance id", OFF, _with(COMMIT_OK, api_version=6, group_instance_id="s-0"), 35),
    ("commit v0 with generation", OFF, _with(COMMIT_OK, api_version=0, generation_id=1), 35),
    ("session timeout too small", J, _with(JOIN_OK, session_timeout_ms=10), 26),
    ("session timeout too large", J, _with(JOIN_OK, session_timeout_ms=1_800_001), 26),
    ("sync v5 without protocol fields", S, _with(SYNC_OK, api_version=5), 23),
]


@pytest.mark.parametrize(("path", "body", "code"), [c[1:] for c in IN_BAND], ids=[c[0] for c in IN_BAND])
def test_protocol_rejections_are_in_band(
    stable: CoordinatorProcess, path: str, body: dict[str, Any], code: int
) -> None:
    before = _observable_state(stable.url)
    status, response = post_json(stable.url, path, body)
    assert status == 200
    assert response["error_code"] == code
    if path == OFF:
        assert all(p["error_code"] == code for t in response["topics"] for p in t["partitions"])
    assert _observable_state(stable.url) == before


ROUTES_TAKING_A_GROUP = [
    ("POST", "/join", JOIN_OK),
    ("POST", "/sync", SYNC_OK),
    ("POST", "/heartbeat", {"member_id": "x", "generation_id": 1}),
    ("POST", "/leave", {"members": [{"member_id": "x"}]}),
    ("POST", "/offsets", COMMIT_OK),
    ("GET", "/offsets", None),
    ("GET", "", None),
    ("DELETE", "", None),
    ("PUT", "/expected-members", {"group_instance_ids": ["a"]}),
    ("GET", "/expected-members", None),
    ("DELETE", "/expected-members", None),
]


@pytest.mark.parametrize(
    ("method", "suffix", "body"), ROUTES_TAKING_A_GROUP, ids=[f"{m} {s or '/'}" for m, s, _ in ROUTES_TAKING_A_GROUP]
)
def test_a_too_long_group_id_is_invalid_group_id_in_band(
    stable: CoordinatorProcess, method: str, suffix: str, body: Any
) -> None:
    before = _observable_state(stable.url)
    payload = None if body is None else json.dumps(body).encode()
    status, response = send(stable.url, method, f"/v1/groups/{LONG_GROUP}{suffix}", payload, JSON if payload else {})
    assert status == 200
    assert response["error_code"] == 24
    assert _observable_state(stable.url) == before


def test_a_255_byte_group_id_is_fine(stable: CoordinatorProcess) -> None:
    status, response = send(stable.url, "GET", "/v1/groups/" + quote("é" * 127 + "x"))  # 255 bytes of UTF-8
    assert status == 200
    assert response["group_state"] == "Dead"


def test_content_type_may_carry_parameters(stable: CoordinatorProcess) -> None:
    status, response = send(
        stable.url,
        "POST",
        "/v1/groups/other/heartbeat",
        b'{"member_id":"x","generation_id":1}',
        {"Content-Type": "application/json; charset=utf-8"},
    )
    assert status == 200
    assert response["error"] == "UNKNOWN_MEMBER_ID"
