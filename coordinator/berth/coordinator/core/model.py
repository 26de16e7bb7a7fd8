"""Typed requests and responses of the coordinator core.

The HTTP adapter validates JSON into these requests and renders these responses back, omitting the fields a
request's ``api_version`` cannot carry (API.md §8). Byte fields are ``bytes`` here and base64 on the wire.
Responses carry Kafka's defaults, so an error response is just ``JoinResponse(Error.X, member_id=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.coordinator.protocol import Error

# ---------------------------------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class Protocol:
    """One entry of a join's ``protocols``: an assignor name and the member's subscription for it."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    api_version: int
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[SyncAssignment, ...]
    api_version: int


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    api_version: int


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """One entry of a batch leave: a member id, an instance id, or both (KIP-345)."""

    member_id: str
    group_instance_id: str | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]
    api_version: int


@dataclass(frozen=True, slots=True)
class CommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclass(frozen=True, slots=True)
class CommitTopic:
    name: str
    partitions: tuple[CommitPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: tuple[CommitTopic, ...]
    api_version: int


# --------------------------------------------------------------------------------------------------- responses


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResponse:
    error: Error
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResponse:
    error: Error
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: Error


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: Error


@dataclass(frozen=True, slots=True)
class LeaveResponse:
    error: Error
    members: tuple[LeaveMemberResult, ...] = ()

    def legacy_error(self) -> Error:
        """The single error a v0-2 leave answers: the top-level one, else the first member error (Kafka)."""
        if self.error != Error.NONE:
            return self.error
        return next((m.error for m in self.members if m.error != Error.NONE), Error.NONE)


@dataclass(frozen=True, slots=True)
class PartitionResult:
    partition_index: int
    error: Error


@dataclass(frozen=True, slots=True)
class TopicResults:
    name: str
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    error: Error  # group-level error; when set, every partition carries it too (API.md §8)
    topics: tuple[TopicResults, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error: Error = Error.NONE


@dataclass(frozen=True, slots=True)
class FetchedTopic:
    name: str
    partitions: tuple[FetchedPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: Error
    topics: tuple[FetchedTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribeResponse:
    error: Error
    group_id: str
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    generation_id: int = -1
    leader: str | None = None
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str


@dataclass(frozen=True, slots=True)
class ListResponse:
    error: Error
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteResponse:
    error: Error


@dataclass(frozen=True, slots=True)
class ExpectedMembersResponse:
    error: Error
    group_instance_ids: tuple[str, ...] = field(default=())


Response = (
    JoinResponse
    | SyncResponse
    | HeartbeatResponse
    | LeaveResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | DescribeResponse
    | ListResponse
    | DeleteResponse
    | ExpectedMembersResponse
)
