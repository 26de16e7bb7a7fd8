"""What the operator observes of the coordinator, as plain immutable values.

The coordinator port returns these and the planners consume them, so neither depends on the other's module.
``from_wire`` helpers read the coordinator's JSON (docs/api.md §4: describe, ``GET /v1/config``) for adapters that
get raw responses; they raise ``ValueError`` on a response that does not have the documented shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeGuard


@dataclass(frozen=True, slots=True)
class ConsumerProtocolBounds:
    """A Kafka broker's bounds for KIP-848 consumer-protocol groups' session timeout and heartbeat interval, inclusive
    (``group.consumer.min/max.session.timeout.ms``, ``group.consumer.min/max.heartbeat.interval.ms``)."""

    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    #: The cluster's finalized ``group.version`` (ApiVersions v3+; 0: not finalized, and consumer-protocol groups
    #: are not enabled); None: not read (``planners.kafka_features``).
    group_version: int | None = None


@dataclass(frozen=True, slots=True)
class CoordinatorBounds:
    """The coordinator's accepted session timeouts, inclusive (Kafka: group.min/max.session.timeout.ms)."""

    min_session_timeout_ms: int
    max_session_timeout_ms: int
    #: The settings these bounds are, as the people who can change them name them (for conditions and reasons);
    #: None: "the coordinator's minimum/maximum".
    min_setting: str | None = None
    max_setting: str | None = None
    #: A Kafka broker's bounds for consumer-protocol groups (None: not known, or not Kafka).
    consumer: ConsumerProtocolBounds | None = None

    @classmethod
    def from_wire(cls, config: Mapping[str, Any]) -> CoordinatorBounds:
        low = config.get("group_min_session_timeout_ms")
        high = config.get("group_max_session_timeout_ms")
        if not _is_int(low) or not _is_int(high):
            raise ValueError("GET /v1/config lacks integer group_min/max_session_timeout_ms")
        return cls(min_session_timeout_ms=low, max_session_timeout_ms=high)


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None  # None: a dynamic member
    #: The member's epoch (KIP-848 consumer protocol); None where the protocol has none (classic).
    member_epoch: int | None = None
    #: The partitions it owns, ``topic:partition``, when the coordinator says (empty: unknown or none).
    assignment: tuple[str, ...] = ()
    #: The topics it subscribes to, when the coordinator says (empty: unknown).
    subscribed: tuple[str, ...] = ()


class GroupProtocol(StrEnum):
    """The group's rebalance protocol: Kafka's classic one (Berth's coordinator speaks only that), or KIP-848's
    ``consumer`` protocol, where the broker assigns partitions and owns the session timeout."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    #: KIP-1071's streams protocol: the broker assigns tasks; there is no admin removal of its members.
    STREAMS = "streams"


@dataclass(frozen=True, slots=True)
class GroupOwnerRef:
    """The fleet a group belongs to at the coordinator (docs/api.md §7a): namespace, name and uid (its identity)."""

    namespace: str
    name: str
    uid: str

    @property
    def fleet(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """DescribeGroups as Berth answers it: state, generation and leader are on every response."""

    group_id: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    generation: int  # -1 for a Dead or unknown group
    leader: str | None  # the leader's member id; None when there is no leader
    members: tuple[GroupMember, ...]
    #: The fleet the coordinator records as the group's owner (Berth's coordinator); None: none, or not recorded.
    owner: GroupOwnerRef | None = None
    protocol: GroupProtocol = GroupProtocol.CLASSIC
    #: The epoch of the group's target assignment (consumer protocol); None where the protocol has none.
    assignment_epoch: int | None = None
    #: The coordinator answered with this group (False: it knows no such group: Berth's "Dead", Kafka's
    #: GROUP_ID_NOT_FOUND); a group that does not exist yet has no state, generation or protocol of its own.
    exists: bool = True

    @classmethod
    def from_wire(cls, describe: Mapping[str, Any]) -> GroupDescription:
        state = describe.get("group_state")
        generation = describe.get("generation_id")
        members = describe.get("members", [])
        if not isinstance(state, str) or not _is_int(generation) or not isinstance(members, list):
            raise ValueError("describe response lacks group_state, generation_id or members")
        leader = describe.get("leader") or None  # "" and null both mean "no leader"
        return cls(
            group_id=str(describe.get("group_id", "")),
            state=state,
            generation=generation,
            leader=leader if isinstance(leader, str) else None,
            members=tuple(
                GroupMember(member_id=str(member["member_id"]), group_instance_id=member.get("group_instance_id"))
                for member in members
            ),
        )

    def static_instance_ids(self) -> frozenset[str]:
        return frozenset(m.group_instance_id for m in self.members if m.group_instance_id is not None)

    @property
    def known(self) -> bool:
        """The coordinator knows the group: it exists, and is not one Berth's coordinator reports as Dead."""
        return self.exists and not (self.state == "Dead" and not self.members)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition of a Kafka group's: its committed offset, log end offset and lag (None where unknown)."""

    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    owner: str | None = None  # the member it is assigned to (instance id, else member id)

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)

    @property
    def name(self) -> str:
        return f"{self.topic}:{self.partition}"


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A Kafka group's lag: log end offset minus committed offset, per partition with a commit."""

    partitions: tuple[PartitionLag, ...]

    @property
    def total(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)

    @property
    def measured(self) -> tuple[PartitionLag, ...]:
        return tuple(p for p in self.partitions if p.lag is not None)


@dataclass(frozen=True, slots=True)
class PodTimes:
    """When a member's pod's current process started, as the platform recorded it (Kubernetes: 1 s resolution),
    and when the previous one ended: the previous container's ``finishedAt`` after a restart in place, else None
    (a replaced pod: its ``created`` bounds the previous pod's end, which had gone by then)."""

    created: datetime
    started: datetime
    previous_ended: datetime | None = None

    @property
    def previous_end(self) -> datetime:
        """The latest the previous process can have ended: its recorded end, else this pod's creation."""
        return self.previous_ended or self.created


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
