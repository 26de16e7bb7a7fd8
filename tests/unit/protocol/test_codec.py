"""Decoding, validating and encoding the declared messages (berth.coordinator.protocol.codec, docs/api.md §3-§6)."""

from __future__ import annotations

import json

import pytest

from berth.coordinator.protocol import (
    DescribedMember,
    DescribeResponse,
    Error,
    InvalidRequest,
    JoinMember,
    JoinRequest,
    JoinResponse,
    LeaveMemberResult,
    LeaveRequest,
    LeaveResponse,
    Limits,
    OffsetCommitRequest,
    SyncResponse,
    UnsupportedVersion,
)
from berth.coordinator.protocol.codec import CarriesTooNew, RequestCodec, encode_answer, query_api_version

JOIN = RequestCodec(JoinRequest, "join")
LEAVE = RequestCodec(LeaveRequest, "leave")
COMMIT = RequestCodec(OffsetCommitRequest, "offsets")
LIMITS = Limits()


def join_body(**fields: object) -> bytes:
    body: dict[str, object] = {
        "member_id": "",
        "session_timeout_ms": 10_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": "AA=="}],
    }
    body.update(fields)
    return json.dumps(body).encode()


# ------------------------------------------------------------------------------------------------ decoding


def test_a_request_without_a_version_speaks_the_newest() -> None:
    request, version = JOIN.decode(join_body(), LIMITS)
    assert version == 9 and request.protocols[0].metadata == b"\x00"
    assert request.effective_rebalance_timeout_ms == 10_000


@pytest.mark.parametrize(("version", "field"), [(4, "group_instance_id"), (0, "rebalance_timeout_ms")])
def test_a_field_the_version_cannot_carry_is_refused_in_band(version: int, field: str) -> None:
    with pytest.raises(CarriesTooNew) as refused:
        JOIN.decode(join_body(api_version=version, **{field: "i-0" if field == "group_instance_id" else 5}), LIMITS)
    assert refused.value.version == version


def test_null_is_never_too_new_and_an_ignored_field_is_dropped() -> None:
    request, _ = JOIN.decode(join_body(api_version=4, group_instance_id=None, reason="restart"), LIMITS)
    assert request.group_instance_id is None and request.reason is None  # reason: v8+, ignored below
    request, _ = JOIN.decode(join_body(api_version=8, reason="restart"), LIMITS)
    assert request.reason == "restart"


def test_leave_takes_a_batch_from_v3_and_one_member_below() -> None:
    batch = json.dumps({"api_version": 4, "members": [{"member_id": "m", "reason": "r"}]}).encode()
    request, _ = LEAVE.decode(batch, LIMITS)
    assert request.leaving()[0].reason is None  # v5+
    legacy, _ = LEAVE.decode(b'{"api_version": 2, "member_id": "m"}', LIMITS)
    assert [m.member_id for m in legacy.leaving()] == ["m"]
    with pytest.raises(CarriesTooNew):
        LEAVE.decode(b'{"api_version": 3, "members": [], "member_id": "m"}', LIMITS)
    with pytest.raises(CarriesTooNew):
        LEAVE.decode(b'{"api_version": 2, "member_id": "m", "members": []}', LIMITS)
    with pytest.raises(InvalidRequest, match=r"^members: required field is missing"):
        LEAVE.decode(b'{"api_version": 3}', LIMITS)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "body: empty"),
        (b"[]", "body: expected `object`, got `array`"),
        (b'{"member_id": "\xff"}', "body: not valid UTF-8"),
        (b'{"session_timeout_ms": NaN}', "body: not valid JSON"),
        (join_body(protocols=[{"metadata": ""}]), "protocols[0].name: required field is missing"),
        (join_body(session_timeout_ms=True), "session_timeout_ms: expected `int`, got `bool`"),
        (join_body(session_timeout_ms=2**31), "session_timeout_ms: expected `int` <= 2147483647"),
        (join_body(member_id="\ud800"), "member_id: contains an unpaired surrogate"),
        (join_body(protocols=[{"name": "r", "metadata": ""}] * 2), "protocols[1].name: duplicate protocol name"),
        (join_body(api_version="9"), "api_version: expected `int | null`, got `str`"),
    ],
)
def test_an_invalid_request_names_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        JOIN.decode(body, LIMITS)
    assert str(refused.value).startswith(message)
    assert not isinstance(refused.value, UnsupportedVersion)


def test_an_unsupported_version_is_reported_before_anything_else() -> None:
    with pytest.raises(UnsupportedVersion, match="api_version: 10 is not supported by join"):
        JOIN.decode(join_body(api_version=10, session_timeout_ms="soon"), LIMITS)
    with pytest.raises(UnsupportedVersion, match="api_version: -1"):
        query_api_version("-1", "describe")
    with pytest.raises(InvalidRequest, match="api_version: must be a decimal integer"):
        query_api_version("one", "describe")
    assert query_api_version(None, "describe") == 5


def test_ids_and_lists_are_bounded_by_the_limits_and_metadata_is_not() -> None:
    tight = Limits(max_id_bytes=8, max_list_items=2, max_protocols=1)
    with pytest.raises(InvalidRequest, match=r"^member_id: 9 bytes is longer than the 8-byte limit"):
        JOIN.decode(join_body(member_id="é" * 4 + "x"), tight)
    with pytest.raises(InvalidRequest, match=r"^protocols: 2 items is more than the limit of 1"):
        JOIN.decode(join_body(protocols=[{"name": "a", "metadata": ""}, {"name": "b", "metadata": ""}]), tight)
    commit = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}] * 3}]}
    with pytest.raises(InvalidRequest, match=r"^topics\[0\].partitions: 3 items"):
        COMMIT.decode(json.dumps(commit).encode(), tight)
    commit["topics"][0]["partitions"] = [{"partition_index": 0, "committed_offset": 1, "committed_metadata": "m" * 50}]
    request, _ = COMMIT.decode(json.dumps(commit).encode(), tight)
    assert request.topics[0].partitions[0].committed_metadata == "m" * 50


# ------------------------------------------------------------------------------------------------ encoding


def test_an_answer_leaves_out_what_the_request_version_cannot_carry() -> None:
    answer = JoinResponse(Error.NONE, member_id="m", members=(JoinMember("m", "i", b"x"),))
    newest = json.loads(encode_answer(answer, 9))
    assert newest["protocol_type"] is None and newest["protocol_name"] is None and newest["skip_assignment"] is False
    assert newest["members"] == [{"member_id": "m", "group_instance_id": "i", "metadata": "eA=="}]
    v6 = json.loads(encode_answer(answer, 6))
    assert "protocol_type" not in v6 and "skip_assignment" not in v6 and v6["protocol_name"] == ""
    v4 = json.loads(encode_answer(answer, 4))
    assert v4["members"] == [{"member_id": "m", "metadata": "eA=="}]
    assert json.loads(encode_answer(SyncResponse(Error.NONE, "consumer", "range", b""), 4)) == {
        "error_code": 0,
        "assignment": "",
        "error": "NONE",
    }
    described = DescribeResponse(Error.NONE, group_id="g", members=(DescribedMember("m", "i"),))
    assert "group_instance_id" not in json.loads(encode_answer(described, 3))["members"][0]


def test_a_legacy_leave_answers_one_error() -> None:
    answer = LeaveResponse(Error.NONE, (LeaveMemberResult("m", None, Error.UNKNOWN_MEMBER_ID),))
    assert json.loads(encode_answer(answer, 2)) == {"error_code": 25, "error": "UNKNOWN_MEMBER_ID"}
    assert json.loads(encode_answer(answer, 3))["members"][0]["error"] == "UNKNOWN_MEMBER_ID"
