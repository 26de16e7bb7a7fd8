"""The group protocol for one group, one HTTP request per call, at the newest versions (docs/api.md §3).

Owns ``GroupCalls`` (join v9, sync v5, heartbeat v4, leave v5, offset commit v9 and fetch v9 over a
``Transport``). The requests and answers are the coordinator's own declarations (``berth.coordinator.protocol``),
so nothing here restates a format. Rules:

- One call is one HTTP request: no retries, no state. Protocol outcomes come back in the answer's ``error``;
  only transport failures raise (see ``transport``).
- Long-polls (join, sync) take their timeout from the caller, who sizes it from the rebalance timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from berth.coordinator.client.transport import Transport
from berth.coordinator.protocol import (
    CommitPartition,
    CommitTopic,
    Error,
    HeartbeatRequest,
    HeartbeatResponse,
    InstanceId,
    JoinProtocol,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    MemberId,
    MemberIdentity,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncAssignment,
    SyncRequest,
    SyncResponse,
    TopicPartition,
    newest,
)
from berth.coordinator.protocol.routes import OWNER_UID_HEADER, ROUTES_BY_OPERATION

JOIN_VERSION: Final = newest("join")
SYNC_VERSION: Final = newest("sync")
HEARTBEAT_VERSION: Final = newest("heartbeat")
LEAVE_VERSION: Final = newest("leave")
COMMIT_VERSION: Final = newest("offsets")
FETCH_VERSION: Final = newest("offset_fetch")

#: The protocol type of Kafka consumers, and of the member library (docs/formats.md).
PROTOCOL_TYPE: Final = "consumer"


def identity(member_id: str, generation_id: int, group_instance_id: str | None) -> HeartbeatRequest:
    """Who is asking: the ids every member request carries, as the heartbeat sends them."""
    return HeartbeatRequest(
        generation_id,
        MemberId(member_id),
        HEARTBEAT_VERSION,
        None if group_instance_id is None else InstanceId(group_instance_id),
    )


class GroupCalls:
    """The member protocol for one group, one request per call."""

    def __init__(self, transport: Transport, group_id: str) -> None:
        self.transport = transport
        self.group_id = group_id
        self._paths = {
            op: ROUTES_BY_OPERATION[op].path_for(group_id) for op in ("join", "sync", "heartbeat", "leave", "offsets")
        }

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
    ) -> JoinResponse:
        body = JoinRequest(
            member_id=MemberId(member_id),
            session_timeout_ms=session_timeout_ms,
            protocol_type=PROTOCOL_TYPE,
            protocols=tuple(JoinProtocol(name, metadata) for name, metadata in protocols),
            api_version=JOIN_VERSION,
            group_instance_id=None if group_instance_id is None else InstanceId(group_instance_id),
            rebalance_timeout_ms=rebalance_timeout_ms,
            client_id=client_id,
            reason=reason,
        )
        return await self.transport.request("POST", self._paths["join"], JoinResponse, body=body, timeout_s=timeout_s)

    async def sync(
        self,
        who: HeartbeatRequest,
        *,
        protocol_name: str,
        assignments: Mapping[str, bytes],
        timeout_s: float,
    ) -> SyncResponse:
        body = SyncRequest(
            generation_id=who.generation_id,
            member_id=who.member_id,
            assignments=tuple(SyncAssignment(MemberId(member), data) for member, data in assignments.items()),
            api_version=SYNC_VERSION,
            group_instance_id=who.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=protocol_name,
        )
        return await self.transport.request("POST", self._paths["sync"], SyncResponse, body=body, timeout_s=timeout_s)

    async def heartbeat(self, who: HeartbeatRequest) -> HeartbeatResponse:
        return await self.transport.request("POST", self._paths["heartbeat"], HeartbeatResponse, body=who)

    async def leave(
        self, members: Iterable[tuple[str, str | None]], *, reason: str | None, owner_uid: str | None = None
    ) -> LeaveResponse:
        """A v5 batch leave; ``members`` are (member id, instance id) pairs, member id ``""`` for by-instance;
        ``owner_uid`` asserts the group's owner (``Berth-Owner-Uid``, docs/api.md §7a)."""
        body = LeaveRequest(
            api_version=LEAVE_VERSION,
            members=tuple(
                MemberIdentity(MemberId(member_id), None if instance_id is None else InstanceId(instance_id), reason)
                for member_id, instance_id in members
            ),
        )
        headers = {OWNER_UID_HEADER: owner_uid} if owner_uid else None
        return await self.transport.request("POST", self._paths["leave"], LeaveResponse, body=body, headers=headers)

    async def commit(
        self, who: HeartbeatRequest, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> OffsetCommitResponse:
        by_topic: dict[str, list[CommitPartition]] = {}
        for (topic, partition), committed in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                CommitPartition(
                    partition_index=partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=-1 if committed.leader_epoch is None else committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        body = OffsetCommitRequest(
            topics=tuple(CommitTopic(topic, tuple(partitions)) for topic, partitions in by_topic.items()),
            api_version=COMMIT_VERSION,
            generation_id=who.generation_id,
            member_id=who.member_id,
            group_instance_id=who.group_instance_id,
        )
        return await self.transport.request("POST", self._paths["offsets"], OffsetCommitResponse, body=body)

    async def fetch(self, topics: Iterable[str] | None = None, *, limit: int | None = None) -> OffsetFetchResponse:
        """Committed offsets of ``topics`` (all committed topics when None): every page the coordinator answers in
        (docs/api.md §4), one request each, merged into one answer; a page with an error ends it with that error.
        With ``limit``, only the first page of at most ``limit`` partitions (its ``next`` says whether more remain)."""
        params = [("api_version", str(FETCH_VERSION))] + [("topic", topic) for topic in topics or ()]
        if limit is not None:
            params.append(("limit", str(limit)))
        answer = await self.transport.request("GET", self._paths["offsets"], OffsetFetchResponse, params=params)
        while limit is None and answer.next is not None and answer.error is Error.NONE:
            page = await self.transport.request(
                "GET", self._paths["offsets"], OffsetFetchResponse, params=[*params, ("after", answer.next)]
            )
            answer = answer.followed_by(page)
        return answer
