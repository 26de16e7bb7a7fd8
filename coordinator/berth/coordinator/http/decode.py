"""JSON bodies and query strings -> the core's typed requests, per route and API version (API.md §3, §8).

Validation is driven by the declared models (``schemas``), the same ones the OpenAPI document is generated from.
Rules: a missing required field, a wrong type or an out-of-range number is a 400 naming the field; an
``api_version`` outside the route's range is a 400 UNSUPPORTED_VERSION; a field with a non-null value that the
request's version cannot carry is an in-band UNSUPPORTED_VERSION (35), raised as ``InBandError`` with the
route's response shape. Unknown fields are ignored (forward compatibility).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berth.coordinator.core.model import (
    CommitPartition,
    CommitTopic,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    MemberIdentity,
    OffsetCommitRequest,
    Protocol,
    Response,
    SyncAssignment,
    SyncRequest,
    SyncResponse,
)
from berth.coordinator.core.offsets import commit_error_response
from berth.coordinator.http import schemas
from berth.coordinator.http.errors import bad_request, unsupported_version
from berth.coordinator.http.fields import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Fields
from berth.coordinator.http.schemas import Model
from berth.coordinator.protocol import (
    API_VERSIONS,
    JOIN_REASON_VERSION,
    LEAVE_BATCH_VERSION,
    LEAVE_REASON_VERSION,
    Error,
)


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one request may carry (besides ``--max-body-bytes``)."""

    max_id_bytes: int = 1024
    max_list_items: int = 100_000
    max_protocols: int = 64


class InBandError(Exception):
    """A protocol-level rejection found while decoding: answered HTTP 200 with this response."""

    def __init__(self, response: Response, api_version: int) -> None:
        super().__init__(repr(response))
        self.response = response
        self.api_version = api_version


_RANGES = {"int32": (INT32_MIN, INT32_MAX), "int64": (INT64_MIN, INT64_MAX)}


def read_model(model: Model, fields: Fields, limits: Limits) -> dict[str, Any]:
    """Validate ``fields`` against ``model``; returns the present fields' values (bytes decoded, nested models as
    dicts). Raises a 400 naming the first offending field."""
    values: dict[str, Any] = {}
    for f in model.fields:
        if not fields.has(f.name):
            if f.required:
                raise bad_request(f"{fields.name(f.name)}: required field is missing")
            continue
        if f.nullable and not fields.present_non_null(f.name):
            values[f.name] = None
            continue
        kind = f.kind
        if kind == "string":
            values[f.name] = fields.str_(f.name)
        elif kind in _RANGES:
            lo, hi = _RANGES[kind]
            values[f.name] = fields.int_(
                f.name, lo=lo if f.minimum is None else f.minimum, hi=hi if f.maximum is None else f.maximum
            )
        elif kind == "bytes":
            values[f.name] = fields.bytes_(f.name)
        elif kind == "boolean":
            values[f.name] = fields.bool_(f.name)
        elif kind == "strings":
            values[f.name] = fields.strings(f.name, max_items=getattr(limits, f.limit))
        else:
            assert f.items is not None
            values[f.name] = [
                read_model(f.items, item, limits) for item in fields.objects(f.name, max_items=getattr(limits, f.limit))
            ]
    return values


def carries_too_new(model: Model, body: Mapping[str, Any], version: int) -> bool:
    """A non-null value in a field (at any depth) that ``version`` cannot carry (API.md §8)."""
    for f in model.fields:
        value = body.get(f.name)
        if value is None:
            continue
        if version < f.since:
            return True
        items = f.items
        if (
            items is not None
            and isinstance(value, list)
            and any(isinstance(item, dict) and carries_too_new(items, item, version) for item in value)
        ):
            return True
    return False


def api_version_of(value: object, api: str) -> int:
    lo, hi = API_VERSIONS[api]
    if value is None:
        return hi
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request("api_version: must be an integer")
    if not lo <= value <= hi:
        raise unsupported_version(f"api_version: {value} is not supported by {api} (versions {lo} to {hi})")
    return value


def query_api_version(query: Mapping[str, str], api: str) -> int:
    raw = query.get("api_version")
    return api_version_of(None if raw is None else query_int(raw, "api_version"), api)


def query_int(raw: str, name: str, lo: int = 0, hi: int = 2**63 - 1) -> int:
    try:
        value = int(raw, 10)
    except ValueError:
        raise bad_request(f"{name}: must be a decimal integer, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise bad_request(f"{name}: {value} is out of range [{lo}, {hi}]")
    return value


def _read(model: Model, body: object, limits: Limits, api: str) -> tuple[dict[str, Any], int, Fields]:
    fields = Fields(body, "", limits.max_id_bytes)
    version = api_version_of(fields.raw("api_version"), api)
    return read_model(model, fields, limits), version, fields


# -------------------------------------------------------------------------------------------- builders


def decode_join(group_id: str, body: object, limits: Limits, client_host: str) -> JoinRequest:
    v, version, fields = _read(schemas.JOIN_REQUEST, body, limits, "join")
    seen: set[str] = set()
    protocols = []
    for i, p in enumerate(v["protocols"]):
        if p["name"] in seen:
            raise bad_request(f"protocols[{i}].name: duplicate protocol name {p['name']!r}")
        seen.add(p["name"])
        protocols.append(Protocol(p["name"], p["metadata"]))
    if carries_too_new(schemas.JOIN_REQUEST, fields.obj, version):
        raise InBandError(JoinResponse(Error.UNSUPPORTED_VERSION, member_id=v["member_id"]), version)
    rebalance_timeout_ms = v.get("rebalance_timeout_ms")
    return JoinRequest(
        group_id,
        v["member_id"],
        v.get("group_instance_id"),
        v["session_timeout_ms"],
        v["session_timeout_ms"] if rebalance_timeout_ms is None else rebalance_timeout_ms,
        v["protocol_type"],
        tuple(protocols),
        version,
        v.get("client_id") or "",
        client_host,
        v.get("reason") if version >= JOIN_REASON_VERSION else None,
    )


def decode_sync(group_id: str, body: object, limits: Limits) -> SyncRequest:
    v, version, fields = _read(schemas.SYNC_REQUEST, body, limits, "sync")
    if carries_too_new(schemas.SYNC_REQUEST, fields.obj, version):
        raise InBandError(SyncResponse(Error.UNSUPPORTED_VERSION), version)
    return SyncRequest(
        group_id,
        v["generation_id"],
        v["member_id"],
        v.get("group_instance_id"),
        v.get("protocol_type"),
        v.get("protocol_name"),
        tuple(SyncAssignment(a["member_id"], a["assignment"]) for a in v["assignments"]),
        version,
    )


def decode_heartbeat(group_id: str, body: object, limits: Limits) -> HeartbeatRequest:
    v, version, fields = _read(schemas.HEARTBEAT_REQUEST, body, limits, "heartbeat")
    if carries_too_new(schemas.HEARTBEAT_REQUEST, fields.obj, version):
        raise InBandError(HeartbeatResponse(Error.UNSUPPORTED_VERSION), version)
    return HeartbeatRequest(group_id, v["generation_id"], v["member_id"], v.get("group_instance_id"), version)


def decode_leave(group_id: str, body: object, limits: Limits) -> LeaveRequest:
    v, version, fields = _read(schemas.LEAVE_REQUEST, body, limits, "leave")
    if version >= LEAVE_BATCH_VERSION:
        if "members" not in v:
            raise bad_request("members: required field is missing")
        if fields.present_non_null("member_id"):
            raise InBandError(LeaveResponse(Error.UNSUPPORTED_VERSION), version)
        with_reason = version >= LEAVE_REASON_VERSION
        members = tuple(
            MemberIdentity(m.get("member_id", ""), m.get("group_instance_id"), m.get("reason") if with_reason else None)
            for m in v["members"]
        )
        return LeaveRequest(group_id, members, version)
    if "member_id" not in v:
        raise bad_request("member_id: required field is missing")
    if fields.present_non_null("members"):
        raise InBandError(LeaveResponse(Error.UNSUPPORTED_VERSION), version)
    return LeaveRequest(group_id, (MemberIdentity(v["member_id"], None),), version)


def decode_commit(group_id: str, body: object, limits: Limits) -> OffsetCommitRequest:
    v, version, fields = _read(schemas.COMMIT_REQUEST, body, limits, "offsets")
    total = sum(len(t["partitions"]) for t in v["topics"])
    if total > limits.max_list_items:
        raise bad_request(f"topics: {total} partitions is more than the limit of {limits.max_list_items}")
    generation_id = v.get("generation_id")
    request = OffsetCommitRequest(
        group_id,
        -1 if generation_id is None else generation_id,
        v.get("member_id") or "",
        v.get("group_instance_id"),
        tuple(
            CommitTopic(
                t["name"],
                tuple(
                    CommitPartition(
                        p["partition_index"],
                        p["committed_offset"],
                        -1 if p.get("committed_leader_epoch") is None else p["committed_leader_epoch"],
                        p.get("committed_metadata"),
                    )
                    for p in t["partitions"]
                ),
            )
            for t in v["topics"]
        ),
        version,
    )
    if carries_too_new(schemas.COMMIT_REQUEST, fields.obj, version):
        raise InBandError(commit_error_response(request, Error.UNSUPPORTED_VERSION), version)
    return request


def decode_expected_members(body: object, limits: Limits) -> list[str]:
    values = read_model(schemas.EXPECTED_MEMBERS_REQUEST, Fields(body, "", limits.max_id_bytes), limits)
    return list(values["group_instance_ids"])


def decode_clock_advance(body: object, limits: Limits) -> int:
    values = read_model(schemas.CLOCK_REQUEST, Fields(body, "", limits.max_id_bytes), limits)
    return int(values["advance_ms"])


def decode_store_faults(body: object, limits: Limits) -> dict[str, Any]:
    return read_model(schemas.STORE_FAULTS_REQUEST, Fields(body, "", limits.max_id_bytes), limits)
