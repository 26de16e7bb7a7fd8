"""A member of a classic group, as the coordinator sees it (Kafka's ClassicGroupMember).

A member may be parked in a join (``join_ticket``) or a sync (``sync_ticket``): tickets are the adapter's
handles for long-poll requests; the core answers them through ``Effects``.
"""

from __future__ import annotations

from collections.abc import Collection

from berth.coordinator.protocol import InstanceId, JoinProtocol, MemberId


class Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "group_instance_id",
        "is_new",
        "join_ticket",
        "last_heard_ms",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_ticket",
    )

    def __init__(
        self,
        member_id: MemberId,
        group_instance_id: InstanceId | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[JoinProtocol, ...],
        assignment: bytes = b"",
        last_heard_ms: int = 0,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.join_ticket: int | None = None
        self.sync_ticket: int | None = None
        self.is_new = False
        self.last_heard_ms = last_heard_ms

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_ticket is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_ticket is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def protocols_bytes(self) -> int:
        """Bytes of the metadata of every protocol the member offered (all of it is kept)."""
        return sum(len(p.metadata) for p in self.protocols)

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def has_satisfied_heartbeat(self) -> bool:
        """A parked join or sync keeps a member alive, except a new member awaiting its first join (Kafka)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: tuple[JoinProtocol, ...]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for protocol in self.protocols:
            if protocol.name in candidates:
                return protocol.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
