"""The core's responses -> JSON bodies, omitting what the request's version cannot carry (API.md §3, §8).

Byte fields go out as standard padded base64. Every body has ``error_code`` and ``error``.
"""

from __future__ import annotations

from base64 import b64encode
from typing import Any

from berth.coordinator.core.model import (
    DeleteResponse,
    DescribeResponse,
    ExpectedMembersResponse,
    HeartbeatResponse,
    JoinResponse,
    LeaveResponse,
    ListResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    Response,
    SyncResponse,
)
from berth.coordinator.protocol import (
    DESCRIBE_INSTANCE_ID_VERSION,
    JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION,
    JOIN_SKIP_ASSIGNMENT_VERSION,
    JOIN_STATIC_MEMBERSHIP_VERSION,
    LEAVE_BATCH_VERSION,
    SYNC_PROTOCOL_FIELDS_VERSION,
    Error,
)

Body = dict[str, Any]


def _b64(data: bytes) -> str:
    return b64encode(data).decode("ascii")


def _error(error: Error) -> Body:
    return {"error_code": int(error), "error": error.name}


def render_join(r: JoinResponse, version: int) -> Body:
    body = _error(r.error)
    body["generation_id"] = r.generation_id
    if version >= JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION:
        body["protocol_type"] = r.protocol_type
        body["protocol_name"] = r.protocol_name
    else:
        body["protocol_name"] = r.protocol_name or ""
    body["leader"] = r.leader
    if version >= JOIN_SKIP_ASSIGNMENT_VERSION:
        body["skip_assignment"] = r.skip_assignment
    body["member_id"] = r.member_id
    with_instance = version >= JOIN_STATIC_MEMBERSHIP_VERSION
    members = []
    for m in r.members:
        member: Body = {"member_id": m.member_id}
        if with_instance:
            member["group_instance_id"] = m.group_instance_id
        member["metadata"] = _b64(m.metadata)
        members.append(member)
    body["members"] = members
    return body


def render_sync(r: SyncResponse, version: int) -> Body:
    body = _error(r.error)
    if version >= SYNC_PROTOCOL_FIELDS_VERSION:
        body["protocol_type"] = r.protocol_type
        body["protocol_name"] = r.protocol_name
    body["assignment"] = _b64(r.assignment)
    return body


def render_leave(r: LeaveResponse, version: int) -> Body:
    if version < LEAVE_BATCH_VERSION:
        return _error(r.legacy_error())
    body = _error(r.error)
    body["members"] = [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id, **_error(m.error)} for m in r.members
    ]
    return body


def render_commit(r: OffsetCommitResponse) -> Body:
    body = _error(r.error)
    body["topics"] = [
        {
            "name": t.name,
            "partitions": [{"partition_index": p.partition_index, **_error(p.error)} for p in t.partitions],
        }
        for t in r.topics
    ]
    return body


def render_fetch(r: OffsetFetchResponse) -> Body:
    body = _error(r.error)
    body["topics"] = [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    **_error(p.error),
                }
                for p in t.partitions
            ],
        }
        for t in r.topics
    ]
    return body


def render_describe(r: DescribeResponse, version: int) -> Body:
    body = _error(r.error)
    with_instance = version >= DESCRIBE_INSTANCE_ID_VERSION
    members = []
    for m in r.members:
        member: Body = {"member_id": m.member_id}
        if with_instance:
            member["group_instance_id"] = m.group_instance_id
        member.update(
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_metadata=_b64(m.member_metadata),
            member_assignment=_b64(m.member_assignment),
        )
        members.append(member)
    body.update(
        group_id=r.group_id,
        group_state=r.group_state,
        protocol_type=r.protocol_type,
        protocol_data=r.protocol_data,
        generation_id=r.generation_id,
        leader=r.leader,
        members=members,
    )
    return body


def render_list(r: ListResponse) -> Body:
    body = _error(r.error)
    body["groups"] = [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.group_state} for g in r.groups
    ]
    return body


def render(response: Response, version: int) -> Body:
    """Render any core response for a request of ``version``."""
    if isinstance(response, JoinResponse):
        return render_join(response, version)
    if isinstance(response, SyncResponse):
        return render_sync(response, version)
    if isinstance(response, HeartbeatResponse | DeleteResponse):
        return _error(response.error)
    if isinstance(response, LeaveResponse):
        return render_leave(response, version)
    if isinstance(response, OffsetCommitResponse):
        return render_commit(response)
    if isinstance(response, OffsetFetchResponse):
        return render_fetch(response)
    if isinstance(response, DescribeResponse):
        return render_describe(response, version)
    if isinstance(response, ListResponse):
        return render_list(response)
    if isinstance(response, ExpectedMembersResponse):
        return {**_error(response.error), "group_instance_ids": list(response.group_instance_ids)}
    raise TypeError(f"cannot render {type(response).__name__}")
