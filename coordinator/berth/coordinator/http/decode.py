"""JSON bodies and query strings -> the core's typed requests, per route and API version (API.md §3, §8).

Rules: a missing required field, a wrong type or an out-of-range number is a 400 naming the field; an
``api_version`` outside the route's range is a 400 UNSUPPORTED_VERSION; a field with a non-null value that
the request's version cannot carry is an in-band UNSUPPORTED_VERSION (35), raised as ``InBandError`` with
the route's response shape. Unknown fields are ignored (forward compatibility).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
from berth.coordinator.http.errors import bad_request, unsupported_version
from berth.coordinator.http.fields import Fields
from berth.coordinator.protocol import (
    API_VERSIONS,
    COMMIT_LEADER_EPOCH_VERSION,
    COMMIT_MEMBER_FIELDS_VERSION,
    COMMIT_STATIC_MEMBERSHIP_VERSION,
    HEARTBEAT_STATIC_MEMBERSHIP_VERSION,
    JOIN_REASON_VERSION,
    JOIN_STATIC_MEMBERSHIP_VERSION,
    LEAVE_BATCH_VERSION,
    LEAVE_REASON_VERSION,
    SYNC_PROTOCOL_FIELDS_VERSION,
    SYNC_STATIC_MEMBERSHIP_VERSION,
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


def _fields(body: object, limits: Limits) -> Fields:
    return Fields(body, "", limits.max_id_bytes)


def _version_gate(fields: Fields, key: str, version: int, since: int) -> bool:
    """True when a non-null ``key`` is present in a request of a version that cannot carry it."""
    return version < since and fields.present_non_null(key)


# ------------------------------------------------------------------------------------------------- join


def decode_join(group_id: str, body: object, limits: Limits, client_host: str) -> JoinRequest:
    f = _fields(body, limits)
    version = api_version_of(f.raw("api_version"), "join")
    member_id = f.str_("member_id", required=True)
    session_timeout_ms = f.int32("session_timeout_ms", required=True)
    rebalance_timeout_ms = (
        f.int32("rebalance_timeout_ms", lo=0) if f.present_non_null("rebalance_timeout_ms") else session_timeout_ms
    )
    protocol_type = f.str_("protocol_type", required=True)
    protocols = []
    seen: set[str] = set()
    for p in f.objects("protocols", required=True, max_items=limits.max_protocols):
        name = p.str_("name", required=True)
        if name in seen:
            raise bad_request(f"{p.name('name')}: duplicate protocol name {name!r}")
        seen.add(name)
        protocols.append(Protocol(name, p.bytes_("metadata", required=True)))
    group_instance_id = f.nullable_str("group_instance_id")
    client_id = f.nullable_str("client_id") or ""
    reason = f.nullable_str("reason") if version >= JOIN_REASON_VERSION else None
    if _version_gate(f, "group_instance_id", version, JOIN_STATIC_MEMBERSHIP_VERSION) or _version_gate(
        f, "rebalance_timeout_ms", version, 1
    ):
        raise InBandError(JoinResponse(Error.UNSUPPORTED_VERSION, member_id=member_id), version)
    return JoinRequest(
        group_id,
        member_id,
        group_instance_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type,
        tuple(protocols),
        version,
        client_id,
        client_host,
        reason,
    )


# ------------------------------------------------------------------------------------------------- sync


def decode_sync(group_id: str, body: object, limits: Limits) -> SyncRequest:
    f = _fields(body, limits)
    version = api_version_of(f.raw("api_version"), "sync")
    generation_id = f.int32("generation_id", required=True)
    member_id = f.str_("member_id", required=True)
    assignments = tuple(
        SyncAssignment(a.str_("member_id", required=True), a.bytes_("assignment", required=True))
        for a in f.objects("assignments", required=True, max_items=limits.max_list_items)
    )
    group_instance_id = f.nullable_str("group_instance_id")
    protocol_type = f.nullable_str("protocol_type")
    protocol_name = f.nullable_str("protocol_name")
    if (
        _version_gate(f, "group_instance_id", version, SYNC_STATIC_MEMBERSHIP_VERSION)
        or _version_gate(f, "protocol_type", version, SYNC_PROTOCOL_FIELDS_VERSION)
        or _version_gate(f, "protocol_name", version, SYNC_PROTOCOL_FIELDS_VERSION)
    ):
        raise InBandError(SyncResponse(Error.UNSUPPORTED_VERSION), version)
    return SyncRequest(
        group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, assignments, version
    )


# -------------------------------------------------------------------------------------------- heartbeat


def decode_heartbeat(group_id: str, body: object, limits: Limits) -> HeartbeatRequest:
    f = _fields(body, limits)
    version = api_version_of(f.raw("api_version"), "heartbeat")
    generation_id = f.int32("generation_id", required=True)
    member_id = f.str_("member_id", required=True)
    group_instance_id = f.nullable_str("group_instance_id")
    if _version_gate(f, "group_instance_id", version, HEARTBEAT_STATIC_MEMBERSHIP_VERSION):
        raise InBandError(HeartbeatResponse(Error.UNSUPPORTED_VERSION), version)
    return HeartbeatRequest(group_id, generation_id, member_id, group_instance_id, version)


# ------------------------------------------------------------------------------------------------ leave


def decode_leave(group_id: str, body: object, limits: Limits) -> LeaveRequest:
    f = _fields(body, limits)
    version = api_version_of(f.raw("api_version"), "leave")
    if version >= LEAVE_BATCH_VERSION:
        members = []
        for m in f.objects("members", required=True, max_items=limits.max_list_items):
            reason = m.nullable_str("reason") if version >= LEAVE_REASON_VERSION else None
            members.append(MemberIdentity(m.str_("member_id"), m.nullable_str("group_instance_id"), reason))
        if f.present_non_null("member_id"):
            raise InBandError(LeaveResponse(Error.UNSUPPORTED_VERSION), version)
        return LeaveRequest(group_id, tuple(members), version)
    member_id = f.str_("member_id", required=True)
    if f.present_non_null("members"):
        raise InBandError(LeaveResponse(Error.UNSUPPORTED_VERSION), version)
    return LeaveRequest(group_id, (MemberIdentity(member_id, None),), version)


# -------------------------------------------------------------------------------------- offset commit


def decode_commit(group_id: str, body: object, limits: Limits) -> OffsetCommitRequest:
    f = _fields(body, limits)
    version = api_version_of(f.raw("api_version"), "offsets")
    topics = []
    leader_epoch_too_new = False
    budget = limits.max_list_items
    for t in f.objects("topics", required=True, max_items=limits.max_list_items):
        partitions = []
        for p in t.objects("partitions", required=True, max_items=budget):
            leader_epoch_too_new |= _version_gate(p, "committed_leader_epoch", version, COMMIT_LEADER_EPOCH_VERSION)
            partitions.append(
                CommitPartition(
                    p.int32("partition_index", required=True, lo=0),
                    p.int64("committed_offset", required=True),
                    p.int32("committed_leader_epoch", default=-1)
                    if p.present_non_null("committed_leader_epoch")
                    else -1,
                    p.nullable_str("committed_metadata"),
                )
            )
        budget -= len(partitions)
        topics.append(CommitTopic(t.str_("name", required=True), tuple(partitions)))
    generation_id = f.int32("generation_id", default=-1) if f.present_non_null("generation_id") else -1
    member_id = f.str_("member_id") if f.present_non_null("member_id") else ""
    request = OffsetCommitRequest(
        group_id, generation_id, member_id, f.nullable_str("group_instance_id"), tuple(topics), version
    )
    if (
        leader_epoch_too_new
        or _version_gate(f, "generation_id", version, COMMIT_MEMBER_FIELDS_VERSION)
        or _version_gate(f, "member_id", version, COMMIT_MEMBER_FIELDS_VERSION)
        or _version_gate(f, "group_instance_id", version, COMMIT_STATIC_MEMBERSHIP_VERSION)
    ):
        raise InBandError(commit_error_response(request, Error.UNSUPPORTED_VERSION), version)
    return request


# --------------------------------------------------------------------------------------------- others


def decode_expected_members(body: object, limits: Limits) -> list[str]:
    f = _fields(body, limits)
    return f.strings("group_instance_ids", required=True, max_items=limits.max_list_items)


def decode_clock_advance(body: object, limits: Limits) -> int:
    f = _fields(body, limits)
    return f.int_("advance_ms", required=True, lo=0, hi=100 * 365 * 24 * 3600 * 1000)
