"""The group membership APIs: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13).

Declared once, these classes are what the member library sends, what the coordinator decodes and validates,
what its core decides on and answers, and what the OpenAPI document describes (docs/api.md §3, §4).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Self

import msgspec
from msgspec import Meta

from berth.coordinator.protocol.base import (
    Answer,
    ApiVersion,
    Body,
    Int32,
    InvalidRequest,
    NamedError,
    NonNegativeInt32,
)
from berth.coordinator.protocol.errors import Error
from berth.coordinator.protocol.ids import InstanceId, MemberId
from berth.coordinator.protocol.limits import MAX_PROTOCOLS, Limits
from berth.coordinator.protocol.versions import (
    HEARTBEAT_STATIC_MEMBERSHIP_VERSION,
    JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION,
    JOIN_REASON_VERSION,
    JOIN_REBALANCE_TIMEOUT_VERSION,
    JOIN_SKIP_ASSIGNMENT_VERSION,
    JOIN_STATIC_MEMBERSHIP_VERSION,
    LEAVE_BATCH_VERSION,
    LEAVE_REASON_VERSION,
    SYNC_PROTOCOL_FIELDS_VERSION,
    SYNC_STATIC_MEMBERSHIP_VERSION,
    IgnoredBefore,
    Since,
    Until,
)

StaticId = Annotated[
    InstanceId | None, Meta(description="group.instance.id of a static member (KIP-345); null: a dynamic member")
]

# ------------------------------------------------------------------------------------------------------- join


class JoinProtocol(Body, frozen=True):
    """One entry of a join's ``protocols``: an assignor name and the member's subscription for it."""

    name: Annotated[str, Meta(description="assignor name, unique within the request")]
    metadata: Annotated[bytes, Meta(description="the member's subscription for this protocol")]


class JoinRequest(Body, frozen=True):
    member_id: Annotated[MemberId, Meta(description='"" for a new member')]
    session_timeout_ms: Int32
    protocol_type: str
    protocols: Annotated[tuple[JoinProtocol, ...], MAX_PROTOCOLS]
    api_version: ApiVersion = None
    group_instance_id: Annotated[StaticId, Since(JOIN_STATIC_MEMBERSHIP_VERSION)] = None
    rebalance_timeout_ms: Annotated[
        NonNegativeInt32 | None, Since(JOIN_REBALANCE_TIMEOUT_VERSION), Meta(description="absent: the session timeout")
    ] = None
    client_id: str | None = None
    reason: Annotated[str | None, IgnoredBefore(JOIN_REASON_VERSION)] = None

    @property
    def effective_rebalance_timeout_ms(self) -> int:
        """A join without ``rebalance_timeout_ms`` (always so in v0) uses its session timeout (Kafka)."""
        return self.session_timeout_ms if self.rebalance_timeout_ms is None else self.rebalance_timeout_ms

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def validate(self, version: int, limits: Limits) -> None:
        seen: set[str] = set()
        for i, protocol in enumerate(self.protocols):
            if protocol.name in seen:
                raise InvalidRequest(f"protocols[{i}].name: duplicate protocol name {protocol.name!r}")
            seen.add(protocol.name)
        size = self.metadata_bytes()
        if size > limits.max_member_metadata_bytes:
            raise InvalidRequest(
                f"protocols: {size} bytes of metadata is over the {limits.max_member_metadata_bytes}-byte limit"
                " for one member"
            )

    def metadata_bytes(self) -> int:
        """The member's metadata across its protocols: what the coordinator keeps of it."""
        return sum(len(p.metadata) for p in self.protocols)


class JoinMember(Body, frozen=True):
    """One member in the leader's join answer, with its subscription for the selected protocol."""

    member_id: MemberId
    group_instance_id: Annotated[InstanceId | None, Since(JOIN_STATIC_MEMBERSHIP_VERSION)] = None
    metadata: bytes = b""


class JoinResponse(Answer):
    generation_id: Int32 = -1
    protocol_type: Annotated[str | None, Since(JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION)] = None
    protocol_name: Annotated[str | None, Meta(description='null on errors from v7 ("" below)')] = None
    leader: Annotated[str, Meta(description="the leader's member id")] = ""
    skip_assignment: Annotated[bool, Since(JOIN_SKIP_ASSIGNMENT_VERSION), Meta(description="KIP-814")] = False
    member_id: MemberId = MemberId("")
    members: Annotated[tuple[JoinMember, ...], Meta(description="the leader's answer only")] = ()

    adapted_below: ClassVar[int] = JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader == self.member_id

    def for_version(self, version: int) -> Self:
        if version < JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION and self.protocol_name is None:
            return msgspec.structs.replace(self, protocol_name="")
        return self


# ------------------------------------------------------------------------------------------------------- sync


class SyncAssignment(Body, frozen=True):
    member_id: MemberId
    assignment: bytes


class SyncRequest(Body, frozen=True):
    generation_id: Int32
    member_id: MemberId
    assignments: Annotated[tuple[SyncAssignment, ...], Meta(description="[] unless from the leader")]
    api_version: ApiVersion = None
    group_instance_id: Annotated[StaticId, Since(SYNC_STATIC_MEMBERSHIP_VERSION)] = None
    protocol_type: Annotated[
        str | None, Since(SYNC_PROTOCOL_FIELDS_VERSION), Meta(description="required (non-null) from v5")
    ] = None
    protocol_name: Annotated[
        str | None, Since(SYNC_PROTOCOL_FIELDS_VERSION), Meta(description="required (non-null) from v5")
    ] = None

    def validate(self, version: int, limits: Limits) -> None:
        for i, given in enumerate(self.assignments):
            if len(given.assignment) > limits.max_member_metadata_bytes:
                raise InvalidRequest(
                    f"assignments[{i}].assignment: {len(given.assignment)} bytes is over the"
                    f" {limits.max_member_metadata_bytes}-byte limit for one member"
                )


class SyncResponse(Answer):
    protocol_type: Annotated[str | None, Since(SYNC_PROTOCOL_FIELDS_VERSION)] = None
    protocol_name: Annotated[str | None, Since(SYNC_PROTOCOL_FIELDS_VERSION)] = None
    assignment: bytes = b""


# -------------------------------------------------------------------------------------------------- heartbeat


class HeartbeatRequest(Body, frozen=True):
    generation_id: Int32
    member_id: MemberId
    api_version: ApiVersion = None
    group_instance_id: Annotated[StaticId, Since(HEARTBEAT_STATIC_MEMBERSHIP_VERSION)] = None


class HeartbeatResponse(Answer):
    pass


# ------------------------------------------------------------------------------------------------------ leave


class MemberIdentity(Body, frozen=True):
    """One entry of a batch leave: a member id, an instance id, or both (KIP-345).

    A ``member_id`` of ``""`` with an instance id is the admin path that removes a static member by instance id.
    """

    member_id: MemberId = MemberId("")
    group_instance_id: InstanceId | None = None
    reason: Annotated[str | None, IgnoredBefore(LEAVE_REASON_VERSION)] = None


class LeaveRequest(Body, frozen=True):
    api_version: ApiVersion = None
    members: Annotated[
        tuple[MemberIdentity, ...] | None, Since(LEAVE_BATCH_VERSION), Meta(description="v3+: required")
    ] = None
    member_id: Annotated[MemberId | None, Until(LEAVE_BATCH_VERSION), Meta(description="v0-2: required")] = None

    def validate(self, version: int, limits: Limits) -> None:
        if version >= LEAVE_BATCH_VERSION and self.members is None:
            raise InvalidRequest("members: required field is missing")
        if version < LEAVE_BATCH_VERSION and self.member_id is None:
            raise InvalidRequest("member_id: required field is missing")

    def leaving(self) -> tuple[MemberIdentity, ...]:
        """Who leaves: the batch (v3+), or the single member of a v0-2 request."""
        if self.members is not None:
            return self.members
        return (MemberIdentity(self.member_id or MemberId("")),)


class LeaveMemberResult(NamedError):
    member_id: MemberId
    group_instance_id: InstanceId | None
    error: Error = msgspec.field(name="error_code")


class LeaveResponse(Answer):
    members: Annotated[tuple[LeaveMemberResult, ...], Since(LEAVE_BATCH_VERSION)] = ()

    adapted_below: ClassVar[int] = LEAVE_BATCH_VERSION

    def legacy_error(self) -> Error:
        """The single error a v0-2 leave answers: the top-level one, else the first member's (Kafka)."""
        if self.error != Error.NONE:
            return self.error
        return next((m.error for m in self.members if m.error != Error.NONE), Error.NONE)

    def for_version(self, version: int) -> Self:
        if version < LEAVE_BATCH_VERSION:
            return type(self)(self.legacy_error())
        return self
