"""What the core persists, and how a group is rebuilt from it (Kafka's GroupMetadataValue and replay).

A group record is a full snapshot of the group as Kafka writes it: protocol type and name, generation, leader,
and each member with only the selected protocol's subscription and its assignment. ``value is None`` is the
tombstone of a deleted group. Records are plain dicts with a version field so that the store can persist them
without understanding them, and a newer record format is refused at load instead of misread. Byte fields stay
``bytes`` here: the store's writer thread turns them into base64 when it encodes the JSON, which keeps that
O(members) work off the event loop; a loaded record carries base64 strings and ``group_from_record`` takes both.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from berth.coordinator.core.group import EMPTY, STABLE, Group
from berth.coordinator.core.member import Member
from berth.coordinator.core.model import Protocol

GROUP_RECORD_VERSION = 1


class RecordFormatError(ValueError):
    """A persisted record this version of Berth cannot read."""


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group_id: str
    value: dict[str, Any] | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class ExpectedMembersRecord:
    group_id: str
    group_instance_ids: tuple[str, ...]  # empty: the list is cleared


Record = GroupRecord | OffsetRecord | ExpectedMembersRecord


def _unb64(text: str | bytes) -> bytes:
    if isinstance(text, bytes):
        return text  # a record fresh from the core, not yet through JSON
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RecordFormatError(f"bad base64 in group record: {exc}") from exc


def new_group_record(group: Group, assignments: dict[str, bytes] | None = None) -> GroupRecord:
    """Snapshot ``group``; ``assignments`` overrides the members' stored assignments (the leader's sync)."""
    protocol = group.protocol_name
    members = []
    for m in group.members.values():
        assignment = m.assignment if assignments is None else assignments.get(m.member_id, b"")
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "session_timeout_ms": m.session_timeout_ms,
                "subscription": m.metadata(protocol),
                "assignment": assignment,
            }
        )
    return GroupRecord(
        group.group_id,
        {
            "version": GROUP_RECORD_VERSION,
            "protocol_type": group.protocol_type or "",
            "generation": group.generation_id,
            "protocol": protocol,
            "leader": group.leader_id if members else None,
            "current_state_timestamp": group.state_timestamp_ms,
            "members": members,
        },
    )


def new_empty_group_record(group: Group) -> GroupRecord:
    """What Kafka writes when a group is created: no members, generation 0."""
    return GroupRecord(
        group.group_id,
        {
            "version": GROUP_RECORD_VERSION,
            "protocol_type": group.protocol_type or "",
            "generation": 0,
            "protocol": None,
            "leader": None,
            "current_state_timestamp": group.state_timestamp_ms,
            "members": [],
        },
    )


def new_group_tombstone(group_id: str) -> GroupRecord:
    return GroupRecord(group_id, None)


def group_from_record(group_id: str, value: dict[str, Any], now_ms: int) -> Group:
    """Rebuild a group as Kafka's replay does: Stable with its members, or Empty; no timers, nothing parked."""
    version = value.get("version")
    if version != GROUP_RECORD_VERSION:
        raise RecordFormatError(f"group {group_id!r}: record version {version!r} is not {GROUP_RECORD_VERSION}")
    try:
        protocol_type = value["protocol_type"] or None
        protocol = value["protocol"]
        raw_members = value["members"]
        group = Group(
            group_id,
            now_ms=int(value.get("current_state_timestamp", now_ms)),
            state=STABLE if raw_members else EMPTY,
            generation_id=int(value["generation"]),
            protocol_type=protocol_type,
            protocol_name=protocol,
            leader_id=value["leader"],
        )
        for raw in raw_members:
            member = Member(
                raw["member_id"],
                raw["group_instance_id"],
                raw["client_id"],
                raw["client_host"],
                int(raw["rebalance_timeout_ms"]),
                int(raw["session_timeout_ms"]),
                protocol_type or "",
                (Protocol(protocol, _unb64(raw["subscription"])),),
                _unb64(raw["assignment"]),
                last_heard_ms=now_ms,
            )
            group.add(member)
    except (KeyError, TypeError) as exc:
        raise RecordFormatError(f"group {group_id!r}: malformed record ({exc!r})") from exc
    return group
