"""What the operator observes of the coordinator, as plain immutable values.

The coordinator port returns these and the planners consume them, so neither depends on the other's module.
``from_wire`` helpers read the coordinator's JSON (docs/api.md §4: describe, ``GET /v1/config``) for adapters that
get raw responses; they raise ``ValueError`` on a response that does not have the documented shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeGuard


@dataclass(frozen=True, slots=True)
class CoordinatorBounds:
    """The coordinator's accepted session timeouts, inclusive (Kafka: group.min/max.session.timeout.ms)."""

    min_session_timeout_ms: int
    max_session_timeout_ms: int

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


class GroupProtocol(StrEnum):
    """The group's rebalance protocol: Kafka's classic one (Berth's coordinator speaks only that), or KIP-848's
    ``consumer`` protocol, where the broker assigns partitions and owns the session timeout."""

    CLASSIC = "classic"
    CONSUMER = "consumer"


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


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
