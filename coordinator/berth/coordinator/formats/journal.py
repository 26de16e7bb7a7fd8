"""The membership journal's event, declared once (docs/formats.md "Journal events", docs/api.md §8).

One declaration serves three writers and readers that may not import one another: the coordinator core writes
events (``core.state.CoreState.event``), the operator writes the same events as evidence for groups on a
coordinator that keeps no journal (Kafka, ``berth.operator.planners.evidence``), and the pipeline reads them
(``berth.pipeline.schema`` builds its Spark schema from :func:`columns`). Rules:

- :class:`JournalEvent` names every field an event may carry and its Python type (mypy holds the writers to it);
  a field the pipeline reads is marked with its :class:`Column` kind (``Annotated[..., Column.LONG]``), in the
  order of the pipeline's columns; the others (owner records, audit, bounds) are for people reading the journal.
- The values of ``type``, ``cause``, ``phase`` and ``via`` are the enumerations below (the coordinator's causes
  are :class:`RebalanceCause`; :class:`ObservedCause` only the operator's evidence writes) (``str`` values, so an event
  encodes as JSON unchanged); ``source`` is ``operator`` on events the operator wrote, absent on the coordinator's.
- Pure and shared (like the rest of ``protocol``): standard library only, so the pipeline may import this module
  and nothing else of the coordinator (an import-linter contract).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Required, TypedDict, get_args, get_origin, get_type_hints


class Column(StrEnum):
    """How the pipeline types a field it reads (``berth.pipeline.schema`` maps each to a Spark type)."""

    LONG = "long"
    INT = "int"
    STRING = "string"
    BOOL = "bool"
    MEMBERS = "members"  # a list of :class:`MemberRef`
    ASSIGNMENTS = "assignments"  # a list of :class:`StoredAssignment`


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


class ObservedCause(StrEnum):
    """``cause`` of a ``rebalance_started`` the operator observed (Kafka evidence) without seeing why."""

    UNKNOWN = "unknown"


class ExpiryPhase(StrEnum):
    """``phase`` of ``member_expired``: what the member was doing when its time ran out."""

    SESSION = "session"
    NEW_MEMBER_JOIN = "new_member_join"
    SYNC = "sync"
    PENDING = "pending"
    EVICTED = "evicted"  # a KIP-394 id pushed out by newer ones beyond the pending bounds (core/bounds.py)
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


class EventSource(StrEnum):
    """``source`` of an event not written by the coordinator."""

    OPERATOR = "operator"  # the operator's evidence of a Kafka group


class MemberRef(TypedDict):
    """One member of ``rebalance_completed``'s ``members``."""

    member_id: Annotated[str, Column.STRING]
    group_instance_id: Annotated[str | None, Column.STRING]


class StoredAssignment(TypedDict, total=False):
    """One member of ``assignment_stored``'s ``assignments``."""

    member_id: Required[Annotated[str, Column.STRING]]
    group_instance_id: Required[Annotated[str | None, Column.STRING]]
    #: The bytes the leader sent (base64 in the journal's JSON); None when a summary dropped them.
    assignment: Required[Annotated[bytes | str | None, Column.STRING]]
    assignment_bytes: int  # the size of what the leader sent, on a summarised event


class OwnerRecord(TypedDict):
    """``owner`` of ``owner_claimed`` and ``owner_released`` (docs/api.md §7a)."""

    namespace: str
    name: str
    uid: str


class EventHeader(TypedDict, total=False):
    """What every event has: ``seq`` from the journal that stores it, the rest from its writer."""

    seq: Annotated[int, Column.LONG]
    ts_ms: Required[Annotated[int, Column.LONG]]  # the writer's clock, ms since the Unix epoch
    group_id: Required[Annotated[str, Column.STRING]]
    type: Required[Annotated[EventType, Column.STRING]]
    generation_id: Annotated[int, Column.INT]  # the group's generation (the new one for rebalance_completed)


class EventFields(TypedDict, total=False):
    """What an event carries besides its header, by type (docs/formats.md has the table)."""

    member_id: Annotated[str, Column.STRING]
    group_instance_id: Annotated[str | None, Column.STRING]
    static: Annotated[bool, Column.BOOL]
    client_id: Annotated[str, Column.STRING]
    old_member_id: Annotated[str, Column.STRING]
    offline_ms: Annotated[int, Column.LONG]
    rebalance: Annotated[bool, Column.BOOL]
    reason: Annotated[str, Column.STRING]
    via: Annotated[LeaveVia | GroupDeletedVia, Column.STRING]
    phase: Annotated[ExpiryPhase, Column.STRING]
    cause: Annotated[RebalanceCause | ObservedCause, Column.STRING]
    leader: Annotated[str | None, Column.STRING]
    protocol_name: Annotated[str | None, Column.STRING]
    members: Annotated[list[MemberRef], Column.MEMBERS]
    assignments: Annotated[list[StoredAssignment], Column.ASSIGNMENTS]
    #: Absent on the coordinator's events; ``operator`` on its Kafka evidence, whose group_id is then the group's
    #: advice key ``kafka://<cluster>/<group>`` (the pipeline flags an event keyed against its source).
    source: Annotated[EventSource, Column.STRING]
    # Not read by the pipeline:
    summarised: bool  # a bounded event (docs/formats.md "Bounded events")
    member_count: int
    owner: OwnerRecord
    adopted: bool
    count: int  # expected_members_changed
    added: Sequence[str]
    removed: Sequence[str]
    added_count: int
    removed_count: int
    actor: str  # the token that caused it (docs/api.md §10 "Audit")


class JournalEvent(EventHeader, EventFields, total=False):
    """One journal event: its header, then its fields (the pipeline's column order)."""


def columns(declaration: Any = JournalEvent) -> tuple[tuple[str, Column], ...]:
    """The fields of ``declaration`` (:class:`JournalEvent`, :class:`MemberRef`, :class:`StoredAssignment`) that
    the pipeline reads, in declaration order, each with its column kind."""
    found = []
    for name, hint in get_type_hints(declaration, include_extras=True).items():
        while get_origin(hint) is Required:
            (hint,) = get_args(hint)
        kinds = [meta for meta in getattr(hint, "__metadata__", ()) if isinstance(meta, Column)]
        if kinds:
            found.append((name, kinds[0]))
    return tuple(found)
