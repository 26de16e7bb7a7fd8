"""The group protocol's requests and responses as typed values, at the newest versions API.md §3 lists.

Owns ``GroupCalls`` (join v9, sync v5, heartbeat v4, leave v5, offset commit v9 and fetch v9 for one group,
over a ``Transport``) and the values they return. Rules:

- One call is one HTTP request: no retries, no state. Protocol outcomes come back in the result's ``error``;
  only transport failures raise (see ``transport``).
- Bytes are base64 on the wire and ``bytes`` here; a response missing a field the contract promises raises
  ``MalformedResponseError`` rather than being guessed at.
- Long-polls (join, sync) take their timeout from the caller, who sizes it from the rebalance timeout.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from berth.coordinator.client.errors import BerthClientError
from berth.coordinator.client.transport import Transport, error_of, group_path
from berth.coordinator.protocol import API_VERSIONS, Error

JOIN_VERSION: Final = API_VERSIONS["join"][1]
SYNC_VERSION: Final = API_VERSIONS["sync"][1]
HEARTBEAT_VERSION: Final = API_VERSIONS["heartbeat"][1]
LEAVE_VERSION: Final = API_VERSIONS["leave"][1]
COMMIT_VERSION: Final = API_VERSIONS["offsets"][1]
FETCH_VERSION: Final = API_VERSIONS["offset_fetch"][1]

#: The protocol type of Kafka consumers, and of the member library (docs/formats.md).
PROTOCOL_TYPE: Final = "consumer"

TopicPartition = tuple[str, int]


class MalformedResponseError(BerthClientError):
    """A 200 answer lacks a field the contract promises, or has it with the wrong type."""


@dataclass(frozen=True)
class JoinedMember:
    """One member in the leader's join response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: Error
    member_id: str
    generation_id: int
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    members: tuple[JoinedMember, ...]

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader == self.member_id


@dataclass(frozen=True)
class SyncResult:
    error: Error
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


@dataclass(frozen=True)
class MemberRemoval:
    """One member's outcome in a batch leave: NONE, UNKNOWN_MEMBER_ID (not a member), FENCED_INSTANCE_ID..."""

    member_id: str
    group_instance_id: str | None
    error: Error


@dataclass(frozen=True)
class LeaveResult:
    error: Error
    members: tuple[MemberRemoval, ...]


@dataclass(frozen=True)
class OffsetAndMetadata:
    """What to commit for one partition: the next offset to consume, optional metadata and leader epoch."""

    offset: int
    metadata: str | None = None
    leader_epoch: int | None = None


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's committed offset as fetched (``error`` NONE unless the partition could not be read)."""

    offset: int
    metadata: str | None
    leader_epoch: int | None
    error: Error = Error.NONE


@dataclass(frozen=True)
class CommitResult:
    error: Error
    partitions: Mapping[TopicPartition, Error]

    def failed(self) -> dict[TopicPartition, Error]:
        return {tp: error for tp, error in self.partitions.items() if error is not Error.NONE}


@dataclass(frozen=True)
class FetchResult:
    error: Error
    offsets: Mapping[TopicPartition, CommittedOffset]


@dataclass(frozen=True)
class MemberIdentity:
    """Who is asking: the ids every member request carries."""

    member_id: str
    generation_id: int
    group_instance_id: str | None


class GroupCalls:
    """The member protocol for one group, one request per call."""

    def __init__(self, transport: Transport, group_id: str) -> None:
        self.transport = transport
        self.group_id = group_id

    async def join(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: Sequence[tuple[str, bytes]],
        client_id: str,
        reason: str | None,
        timeout_s: float,
    ) -> JoinResult:
        body = {
            "api_version": JOIN_VERSION,
            "member_id": member_id,
            "group_instance_id": group_instance_id,
            "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": rebalance_timeout_ms,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": name, "metadata": _b64(metadata)} for name, metadata in protocols],
            "client_id": client_id,
            "reason": reason,
        }
        answer = await self.transport.post(group_path(self.group_id, "/join"), body, timeout_s=timeout_s)
        return JoinResult(
            error=error_of(answer),
            member_id=_str(answer, "member_id", ""),
            generation_id=_int(answer, "generation_id", -1),
            protocol_name=answer.get("protocol_name") or None,
            leader=_str(answer, "leader", ""),
            skip_assignment=bool(answer.get("skip_assignment", False)),
            members=tuple(
                JoinedMember(
                    member_id=_str(member, "member_id"),
                    group_instance_id=member.get("group_instance_id"),
                    metadata=_unb64(member.get("metadata", "")),
                )
                for member in _list(answer, "members")
            ),
        )

    async def sync(
        self,
        identity: MemberIdentity,
        *,
        protocol_name: str,
        assignments: Mapping[str, bytes],
        timeout_s: float,
    ) -> SyncResult:
        body = {
            "api_version": SYNC_VERSION,
            **_identity(identity),
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": protocol_name,
            "assignments": [{"member_id": member, "assignment": _b64(data)} for member, data in assignments.items()],
        }
        answer = await self.transport.post(group_path(self.group_id, "/sync"), body, timeout_s=timeout_s)
        return SyncResult(
            error=error_of(answer),
            protocol_type=answer.get("protocol_type"),
            protocol_name=answer.get("protocol_name"),
            assignment=_unb64(answer.get("assignment") or ""),
        )

    async def heartbeat(self, identity: MemberIdentity) -> Error:
        body = {"api_version": HEARTBEAT_VERSION, **_identity(identity)}
        return error_of(await self.transport.post(group_path(self.group_id, "/heartbeat"), body))

    async def leave(self, members: Iterable[tuple[str, str | None]], *, reason: str | None) -> LeaveResult:
        """A v5 batch leave; ``members`` are (member id, instance id) pairs, member id ``""`` for by-instance."""
        body = {
            "api_version": LEAVE_VERSION,
            "members": [
                {"member_id": member_id, "group_instance_id": instance_id, "reason": reason}
                for member_id, instance_id in members
            ],
        }
        answer = await self.transport.post(group_path(self.group_id, "/leave"), body)
        return LeaveResult(
            error=error_of(answer),
            members=tuple(
                MemberRemoval(
                    member_id=_str(member, "member_id", ""),
                    group_instance_id=member.get("group_instance_id"),
                    error=error_of(member),
                )
                for member in _list(answer, "members")
            ),
        )

    async def commit(
        self, identity: MemberIdentity, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> CommitResult:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), committed in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": committed.offset,
                    "committed_leader_epoch": -1 if committed.leader_epoch is None else committed.leader_epoch,
                    "committed_metadata": committed.metadata,
                }
            )
        body = {
            "api_version": COMMIT_VERSION,
            **_identity(identity),
            "topics": [{"name": topic, "partitions": partitions} for topic, partitions in by_topic.items()],
        }
        answer = await self.transport.post(group_path(self.group_id, "/offsets"), body)
        return CommitResult(
            error=error_of(answer),
            partitions={
                (_str(topic, "name"), _int(partition, "partition_index")): error_of(partition)
                for topic in _list(answer, "topics")
                for partition in _list(topic, "partitions")
            },
        )

    async def fetch(self, topics: Iterable[str] | None = None) -> FetchResult:
        """Committed offsets of ``topics`` (all committed topics when None)."""
        params = [("api_version", str(FETCH_VERSION))] + [("topic", topic) for topic in topics or ()]
        answer = await self.transport.get(group_path(self.group_id, "/offsets"), params)
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for topic in _list(answer, "topics"):
            for partition in _list(topic, "partitions"):
                epoch = partition.get("committed_leader_epoch")
                offsets[(_str(topic, "name"), _int(partition, "partition_index"))] = CommittedOffset(
                    offset=_int(partition, "committed_offset"),
                    metadata=partition.get("metadata"),
                    leader_epoch=epoch if isinstance(epoch, int) and epoch >= 0 else None,
                    error=error_of(partition),
                )
        return FetchResult(error=error_of(answer), offsets=offsets)


def _identity(identity: MemberIdentity) -> dict[str, Any]:
    return {
        "generation_id": identity.generation_id,
        "member_id": identity.member_id,
        "group_instance_id": identity.group_instance_id,
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise MalformedResponseError(f"expected a base64 string, got {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise MalformedResponseError(f"not base64: {error}") from error


def _str(document: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = document.get(key, default)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise MalformedResponseError(f"response field {key!r} should be a string, got {value!r}")
    return value


def _int(document: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = document.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedResponseError(f"response field {key!r} should be an integer, got {value!r}")
    return value


def _list(document: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise MalformedResponseError(f"response field {key!r} should be a list of objects")
    return value
