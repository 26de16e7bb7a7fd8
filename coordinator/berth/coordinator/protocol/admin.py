"""The admin and operations messages: DescribeGroups (15), ListGroups (16), DeleteGroups (42), Berth's
expected members, config, journal, test-only routes, health, and the body of an HTTP error (docs/api.md §4-§9).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from berth.coordinator.protocol.base import Answer, Body, Int32
from berth.coordinator.protocol.ids import GroupId, InstanceId, MemberId
from berth.coordinator.protocol.versions import DESCRIBE_INSTANCE_ID_VERSION, Since

GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")

# ---------------------------------------------------------------------------------------------------- owners


class GroupOwner(msgspec.Struct, frozen=True, gc=False):
    """The fleet a group belongs to (docs/api.md §7a): the Kubernetes object's namespace, name and uid."""

    namespace: str
    name: str
    uid: Annotated[str, Meta(description="the owner's identity: a claim or release names it")]


class OwnerRequest(Body, frozen=True):
    """``PUT /v1/groups/{group_id}/owner``: claim the group for this owner."""

    namespace: Annotated[str, Meta(min_length=1)]
    name: Annotated[str, Meta(min_length=1)]
    uid: Annotated[str, Meta(min_length=1)]
    adopt: Annotated[
        bool, Meta(description="claim an unowned group that has members or committed offsets (default false)")
    ] = False

    @property
    def owner(self) -> GroupOwner:
        return GroupOwner(self.namespace, self.name, self.uid)


class OwnerReleaseRequest(Body, frozen=True):
    """``DELETE /v1/groups/{group_id}/owner``'s optional body (or ``?uid=``): the owner that lets go."""

    uid: Annotated[str, Meta(min_length=1)]


class OwnerResponse(Answer):
    """The group's owner after the claim or release (null: none)."""

    owner: GroupOwner | None = None


# --------------------------------------------------------------------------------------------------- describe


class DescribedMember(msgspec.Struct, frozen=True, gc=False):
    member_id: MemberId
    group_instance_id: Annotated[InstanceId | None, Since(DESCRIBE_INSTANCE_ID_VERSION)] = None
    client_id: str = ""
    client_host: Annotated[str, Meta(description="the member's IP address as text")] = ""
    session_timeout_ms: int = 0
    rebalance_timeout_ms: int = 0
    member_metadata: Annotated[bytes, Meta(description="subscription for the selected protocol; Stable only")] = b""
    member_assignment: bytes = b""


class DescribeResponse(Answer):
    """DescribeGroups with Berth's ``generation_id`` and ``leader``; an unknown group is ``Dead``."""

    group_id: GroupId = GroupId("")
    group_state: Annotated[str, Meta(description=", ".join(GROUP_STATES))] = "Dead"
    protocol_type: str = ""
    protocol_data: Annotated[str, Meta(description="the selected protocol (assignor); Stable only")] = ""
    generation_id: Int32 = -1
    leader: Annotated[str | None, Meta(description="the leader's member id; null when Empty or Dead")] = None
    members: tuple[DescribedMember, ...] = ()
    owner: Annotated[GroupOwner | None, Meta(description="Berth: the fleet the group belongs to; null: none")] = None

    @property
    def state(self) -> str:
        return self.group_state

    @property
    def protocol(self) -> str:
        return self.protocol_data

    @property
    def exists(self) -> bool:
        return self.group_state != "Dead"

    def instance_ids(self) -> frozenset[str]:
        return frozenset(m.group_instance_id for m in self.members if m.group_instance_id is not None)


# ------------------------------------------------------------------------------------------------ list, delete


class ListedGroup(msgspec.Struct, frozen=True, gc=False):
    group_id: GroupId
    protocol_type: str
    group_state: str

    @property
    def state(self) -> str:
        return self.group_state


class ListResponse(Answer):
    groups: tuple[ListedGroup, ...] = ()


class DeleteResponse(Answer):
    pass


# ------------------------------------------------------------------------------------------- expected members


class ExpectedMembersRequest(Body, frozen=True):
    group_instance_ids: Annotated[tuple[InstanceId, ...], Meta(description="[] is the same as DELETE")]


class ExpectedMembersResponse(Answer):
    group_instance_ids: tuple[InstanceId, ...] = ()


# ------------------------------------------------------------------------------------------- config, journal


class ConfigResponse(msgspec.Struct, frozen=True, gc=False):
    """``GET /v1/config``: the coordinator's effective limits and the API versions it speaks."""

    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: Annotated[int | None, Meta(description="null: unlimited")]
    group_initial_rebalance_delay_ms: int
    new_member_join_timeout_ms: int
    offset_metadata_max_bytes: int
    api_versions: Annotated[
        dict[str, Annotated[tuple[int, ...], Meta(min_length=2, max_length=2)]],
        Meta(description="route family -> [lowest, highest]"),
    ]
    # Bounds (docs/api.md §6). Defaults only so that a newer client reads an older coordinator's answer.
    member_metadata_max_bytes: Annotated[
        int, Meta(description="a join's metadata, or one assignment of a sync, beyond it: HTTP 400")
    ] = 0
    group_metadata_max_bytes: Annotated[
        int | None,
        Meta(description="one group's metadata and assignments; null: unlimited (a join beyond it: 81)"),
    ] = None
    max_groups: Annotated[int | None, Meta(description="null: unlimited (one more: 15)")] = None
    offsets_retention_ms: Annotated[int | None, Meta(description="null: offsets and groups never expire")] = None
    journal_event_max_bytes: Annotated[int, Meta(description="a larger event is summarised")] = 0
    journal_page_max_bytes: Annotated[int, Meta(description="a journal page stops before it")] = 0
    offsets_max_per_group: Annotated[
        int | None, Meta(description="committed offsets one group keeps; null: unlimited (one more: 28)")
    ] = None
    offsets_max_bytes_per_group: Annotated[
        int | None, Meta(description="stored bytes of one group's offsets; null: unlimited (beyond: 28)")
    ] = None
    max_stored_bytes: Annotated[
        int | None, Meta(description="stored bytes of every group together (docs/api.md §6); null: unlimited")
    ] = None
    max_stored_bytes_per_token: Annotated[
        int | None, Meta(description="stored bytes of the groups one non-admin token created; null: no bound")
    ] = None
    max_groups_per_token: Annotated[
        int | None, Meta(description="groups one non-admin token may create; null: no bound (one more: 15)")
    ] = None
    max_pending_members_per_group: Annotated[
        int, Meta(description="KIP-394 pending ids a group holds; a newcomer beyond pushes out the oldest")
    ] = 0
    pending_member_timeout_ms: Annotated[int, Meta(description="longest a KIP-394 pending id lives")] = 0


class JournalResponse(msgspec.Struct, frozen=True, gc=False):
    """One page of the journal: events in ``seq`` order, ``next`` to pass as ``after`` for the next page, and the
    journal's extent: an ``after`` below ``first - 1`` asked for events retention dropped (docs/api.md §8)."""

    events: Annotated[tuple[dict[str, Any], ...], Meta(description="docs/formats.md, journal events")]
    next: Annotated[int, Meta(description="the last seq returned, or after when the page is empty")]
    first: Annotated[int, Meta(description="the oldest retained seq (last + 1 when none is)")] = 0
    last: Annotated[int, Meta(description="the newest seq (0 when nothing was journaled yet)")] = 0


# ----------------------------------------------------------------------------------------- tests, operations


class ClockRequest(Body, frozen=True):
    advance_ms: Annotated[int, Meta(ge=0, le=100 * 365 * 24 * 3600 * 1000)]


class ClockResponse(msgspec.Struct, frozen=True, gc=False):
    now_ms: int


class StoreFaultsRequest(Body, frozen=True):
    fail_next: Annotated[int, Meta(ge=0, le=1_000_000)] | None = None
    failing: bool | None = None
    stalled: bool | None = None
    reads_failing: bool | None = None


class StoreFaultsResponse(msgspec.Struct, frozen=True, gc=False):
    injected: int


class StatusResponse(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    status: str
    reason: str = ""  # why it is not ready (``store failing``: what the store says)


class HttpErrorBody(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """The body of every answer other than HTTP 200 (docs/api.md §5); ``message`` names the offending field."""

    error: str
    message: str = ""
    error_code: Annotated[int | None, Meta(description="42, 35, 30 or 15 where a Kafka code applies")] = None


class GroupOwnedBody(msgspec.Struct, frozen=True, gc=False):
    """HTTP 409 (docs/api.md §7a): the group belongs to another owner, or to none and is in use; nothing changed."""

    error: Annotated[str, Meta(description="GROUP_OWNED")]
    message: str
    owner: Annotated[GroupOwner | None, Meta(description="the group's owner; null: it has none")]
