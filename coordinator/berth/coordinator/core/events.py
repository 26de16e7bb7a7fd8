"""The journal's event types and the reasons events carry (docs/formats.md "Journal events", docs/api.md §8).

The core emits only these; the pipeline reads the same names (a test holds its constants to this enum, since
the pipeline may not import the coordinator). Values are ``str`` so an event encodes as JSON unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    GROUP_CREATED = "group_created"
    MEMBER_ID_REQUIRED = "member_id_required"
    MEMBER_JOINED = "member_joined"
    STATIC_MEMBER_REPLACED = "static_member_replaced"
    MEMBER_FENCED = "member_fenced"
    MEMBER_LEFT = "member_left"
    MEMBER_EXPIRED = "member_expired"
    REBALANCE_STARTED = "rebalance_started"
    REBALANCE_COMPLETED = "rebalance_completed"
    ASSIGNMENT_STORED = "assignment_stored"
    GROUP_EMPTIED = "group_emptied"
    GROUP_DELETED = "group_deleted"
    EXPECTED_MEMBERS_CHANGED = "expected_members_changed"
    OWNER_CLAIMED = "owner_claimed"
    OWNER_RELEASED = "owner_released"


class RebalanceCause(StrEnum):
    """``cause`` of ``rebalance_started``."""

    NEW_MEMBER = "new_member"
    LEADER_REJOIN = "leader_rejoin"
    METADATA_CHANGE = "metadata_change"
    MEMBER_LEFT = "member_left"
    MEMBER_EXPIRED = "member_expired"
    STATIC_REPLACEMENT = "static_replacement"
    SYNC_TIMEOUT = "sync_timeout"
    PERSIST_FAILURE = "persist_failure"
    GROUP_MAX_SIZE = "group_max_size"


class ExpiryPhase(StrEnum):
    """``phase`` of ``member_expired``: what the member was doing when its time ran out."""

    SESSION = "session"
    NEW_MEMBER_JOIN = "new_member_join"
    SYNC = "sync"
    PENDING = "pending"
    EVICTED = "evicted"  # a KIP-394 id pushed out by newer ones beyond the pending bounds (``bounds``)
    REBALANCE = "rebalance"


class LeaveVia(StrEnum):
    """``via`` of ``member_left``."""

    LEAVE = "leave"
    ADMIN = "admin"
    GROUP_MAX_SIZE = "group_max_size"


class GroupDeletedVia(StrEnum):
    """``via`` of ``group_deleted``."""

    ADMIN = "admin"  # DELETE /v1/groups/{group_id}
    EXPIRED = "expired"  # Kafka's expiry of an empty group (offsets retention)
