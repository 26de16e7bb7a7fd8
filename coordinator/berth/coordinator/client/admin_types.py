"""The admin client's results as typed, immutable values, read from the coordinator's JSON (API.md §3, §5, §8).

Owns ``CoordinatorConfig``, ``GroupDescription`` / ``DescribedMember``, ``GroupListing`` and ``JournalPage`` and
their ``from_wire`` readers. Rules: readers take the documented shape and raise ``MalformedResponseError`` when
a promised field is missing; bytes are decoded from base64; a member's subscription and assignment are decoded
on request and read as ``None`` when they are not the Berth encoding (docs/formats.md: never guessed at).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berth.coordinator.client.encoding import (
    Assignment,
    EncodingError,
    Subscription,
    decode_assignment,
    decode_subscription,
)
from berth.coordinator.client.wire import MalformedResponseError


@dataclass(frozen=True)
class CoordinatorConfig:
    """``GET /v1/config``: the coordinator's limits and the API versions it speaks."""

    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int | None
    group_initial_rebalance_delay_ms: int
    new_member_join_timeout_ms: int
    offset_metadata_max_bytes: int
    api_versions: Mapping[str, tuple[int, int]]

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> CoordinatorConfig:
        versions = body.get("api_versions")
        if not isinstance(versions, dict):
            raise MalformedResponseError("config lacks api_versions")
        max_size = body.get("group_max_size")
        return cls(
            group_min_session_timeout_ms=_int(body, "group_min_session_timeout_ms"),
            group_max_session_timeout_ms=_int(body, "group_max_session_timeout_ms"),
            group_max_size=max_size if isinstance(max_size, int) else None,
            group_initial_rebalance_delay_ms=_int(body, "group_initial_rebalance_delay_ms"),
            new_member_join_timeout_ms=_int(body, "new_member_join_timeout_ms"),
            offset_metadata_max_bytes=_int(body, "offset_metadata_max_bytes"),
            api_versions={name: (int(pair[0]), int(pair[1])) for name, pair in versions.items()},
        )


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_metadata: bytes
    member_assignment: bytes

    def subscription(self) -> Subscription | None:
        """The member's subscription, or None when its metadata is not the Berth encoding."""
        try:
            return decode_subscription(self.member_metadata)
        except EncodingError:
            return None

    def assignment(self) -> Assignment | None:
        """The member's assignment (empty before the first sync), or None when not the Berth encoding."""
        try:
            return decode_assignment(self.member_assignment)
        except EncodingError:
            return None

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> DescribedMember:
        return cls(
            member_id=_str(body, "member_id"),
            group_instance_id=body.get("group_instance_id"),
            client_id=str(body.get("client_id") or ""),
            client_host=str(body.get("client_host") or ""),
            session_timeout_ms=int(body.get("session_timeout_ms") or 0),
            rebalance_timeout_ms=int(body.get("rebalance_timeout_ms") or 0),
            member_metadata=_bytes(body, "member_metadata"),
            member_assignment=_bytes(body, "member_assignment"),
        )


@dataclass(frozen=True)
class GroupDescription:
    """DescribeGroups as Berth answers it (with generation and leader); an unknown group is ``Dead``."""

    group_id: str
    state: str
    protocol_type: str
    #: The selected protocol (assignor) name; ``""`` when none.
    protocol: str
    generation_id: int
    #: The leader's member id; None when the group has no leader.
    leader: str | None
    members: tuple[DescribedMember, ...]

    @property
    def exists(self) -> bool:
        return self.state != "Dead"

    def instance_ids(self) -> frozenset[str]:
        return frozenset(m.group_instance_id for m in self.members if m.group_instance_id is not None)

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> GroupDescription:
        members = body.get("members") or []
        if not isinstance(members, list):
            raise MalformedResponseError("describe: members should be a list")
        generation = body.get("generation_id", -1)
        return cls(
            group_id=_str(body, "group_id"),
            state=_str(body, "group_state"),
            protocol_type=str(body.get("protocol_type") or ""),
            protocol=str(body.get("protocol_data") or ""),
            generation_id=generation if isinstance(generation, int) else -1,
            leader=body.get("leader") or None,
            members=tuple(DescribedMember.from_wire(member) for member in members),
        )


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> GroupListing:
        return cls(
            group_id=_str(body, "group_id"),
            protocol_type=str(body.get("protocol_type") or ""),
            state=str(body.get("group_state") or ""),
        )


@dataclass(frozen=True)
class JournalPage:
    """One page of the journal: events in ``seq`` order, and ``next`` to pass as ``after`` for the next page."""

    events: tuple[Mapping[str, Any], ...]
    next: int

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> JournalPage:
        events = body.get("events")
        if not isinstance(events, list):
            raise MalformedResponseError("journal: events should be a list")
        return cls(events=tuple(events), next=_int(body, "next"))


def _int(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedResponseError(f"response field {key!r} should be an integer, got {value!r}")
    return value


def _str(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise MalformedResponseError(f"response field {key!r} should be a string, got {value!r}")
    return value


def _bytes(body: Mapping[str, Any], key: str) -> bytes:
    text = body.get(key) or ""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError) as error:
        raise MalformedResponseError(f"response field {key!r} is not base64: {error}") from error
