"""The routes of the coordinator's HTTP API, declared once (docs/api.md §2).

Each ``Route`` names its method and path, its request and answer types, the API version family it speaks, who
may call it (``Access``, docs/api.md §10 "Tokens") and its query parameters. The server registers its views by
``operation``; the OpenAPI document is generated from this table; the member library builds its paths from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import quote

from berth.coordinator.protocol.admin import (
    ClockRequest,
    ClockResponse,
    ConfigResponse,
    DeleteResponse,
    DescribeResponse,
    ExpectedMembersRequest,
    ExpectedMembersResponse,
    JournalResponse,
    ListResponse,
    OwnerRequest,
    OwnerResponse,
    StatusResponse,
    StoreFaultsRequest,
    StoreFaultsResponse,
)
from berth.coordinator.protocol.base import Body
from berth.coordinator.protocol.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    SyncRequest,
    SyncResponse,
)
from berth.coordinator.protocol.offsets import (
    FETCH_DEFAULT_LIMIT,
    FETCH_MAX_LIMIT,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
)

#: Journal paging (docs/api.md §8): ``limit`` defaults to 1,000 and may be at most 10,000; a long-poll parks for
#: at most ``JOURNAL_MAX_WAIT_MS``.
JOURNAL_DEFAULT_LIMIT = 1_000
JOURNAL_MAX_LIMIT = 10_000
JOURNAL_MAX_WAIT_MS = 30_000

GROUP_PATH = "/v1/groups/{group_id}"


class Access(Enum):
    """Who may call a route when the coordinator has a tokens file (docs/api.md §10)."""

    OPEN = "open"  # no token needed (health, metrics, test-only routes)
    TOKEN = "token"  # any valid token
    GROUP = "group"  # a token whose group patterns match the group (or an admin token)
    ADMIN = "admin"  # an admin token
    JOURNAL = "journal"  # an admin token or one with the journal:read scope (the analytics job's)


@dataclass(frozen=True, slots=True)
class Query:
    """A parameter of a route besides its path: in the query string, or (``location="header"``) a header."""

    name: str
    schema: dict[str, Any]
    repeated: bool = False
    description: str = ""
    location: str = "query"


#: The header by which an admin write asserts the group's owner (docs/api.md §7a).
OWNER_UID_HEADER = "Berth-Owner-Uid"


@dataclass(frozen=True, slots=True)
class Route:
    operation: str
    method: str
    path: str
    summary: str
    answer: type | None  # the HTTP 200 body; None: Prometheus text
    request: type[Body] | None = None
    api: str | None = None  # the API version family (docs/api.md §3)
    access: Access = Access.GROUP
    query: tuple[Query, ...] = ()
    long_poll: bool = False
    test_only: bool = False  # exists only with --manual-clock
    documented: bool = True
    owned: bool = False  # the group's owner may refuse it: HTTP 409 GROUP_OWNED (docs/api.md §7a)

    @property
    def takes_group(self) -> bool:
        return "{group_id}" in self.path

    def path_for(self, group_id: str = "") -> str:
        """The path with ``group_id`` percent-encoded (every byte but unreserved ones, ``/`` included)."""
        return self.path.replace("{group_id}", quote(group_id, safe=""))


_TOPICS = Query("topic", {"type": "string"}, repeated=True, description="a topic to fetch; none: every topic")
_FETCH_AFTER = Query(
    "after", {"type": "string"}, description="the previous page's next: the offsets after it (default: from the first)"
)
_FETCH_LIMIT = Query(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": FETCH_MAX_LIMIT},
    description=f"partitions in a page, at most (default {FETCH_DEFAULT_LIMIT}); a page also ends before"
    " --offset-fetch-page-max-bytes",
)
_STATES = Query("state", {"type": "string"}, repeated=True, description="only groups in this state")
_AFTER = Query("after", {"type": "integer", "minimum": 0}, description="exclusive; default 0")
_LIMIT = Query(
    "limit",
    {"type": "integer", "minimum": 0, "maximum": JOURNAL_MAX_LIMIT},
    description=f"default {JOURNAL_DEFAULT_LIMIT}",
)
_OWNER_UID = Query(
    OWNER_UID_HEADER,
    {"type": "string", "minLength": 1},
    description="the owner's uid this write acts for: 409 GROUP_OWNED when the group is another's (docs/api.md §7a)",
    location="header",
)
_RELEASING_UID = Query(
    "uid", {"type": "string", "minLength": 1}, description="the owner that lets go (or a body {uid})"
)
_WAIT = Query(
    "wait_ms",
    {"type": "integer", "minimum": 0, "maximum": JOURNAL_MAX_WAIT_MS},
    description="with no event after `after`, wait up to this long for one (long-poll); default 0",
)

ROUTES: tuple[Route, ...] = (
    # Registration order is match order: the hottest first.
    Route(
        "heartbeat", "POST", f"{GROUP_PATH}/heartbeat", "Heartbeat",
        HeartbeatResponse, HeartbeatRequest, api="heartbeat",
    ),
    Route(
        "offsets", "POST", f"{GROUP_PATH}/offsets", "OffsetCommit",
        OffsetCommitResponse, OffsetCommitRequest, api="offsets",
    ),
    Route(
        "join", "POST", f"{GROUP_PATH}/join", "JoinGroup (long-poll)",
        JoinResponse, JoinRequest, api="join", long_poll=True,
    ),
    Route(
        "sync", "POST", f"{GROUP_PATH}/sync", "SyncGroup (long-poll)",
        SyncResponse, SyncRequest, api="sync", long_poll=True,
    ),
    Route(
        "leave", "POST", f"{GROUP_PATH}/leave", "LeaveGroup",
        LeaveResponse, LeaveRequest, api="leave", query=(_OWNER_UID,), owned=True,
    ),
    Route(
        "offset_fetch", "GET", f"{GROUP_PATH}/offsets", "OffsetFetch",
        OffsetFetchResponse, api="offset_fetch", query=(_TOPICS, _FETCH_AFTER, _FETCH_LIMIT),
    ),
    Route("describe", "GET", GROUP_PATH, "DescribeGroups", DescribeResponse, api="describe"),
    Route(
        "delete", "DELETE", GROUP_PATH, "DeleteGroups (admin)",
        DeleteResponse, api="delete", access=Access.ADMIN, query=(_OWNER_UID,), owned=True,
    ),
    Route(
        "expected_members_put", "PUT", f"{GROUP_PATH}/expected-members",
        "Pre-register the group's static members (admin, docs/api.md §7)",
        ExpectedMembersResponse, ExpectedMembersRequest, access=Access.ADMIN, query=(_OWNER_UID,), owned=True,
    ),
    Route(
        "expected_members_get", "GET", f"{GROUP_PATH}/expected-members", "The group's expected members (admin)",
        ExpectedMembersResponse, access=Access.ADMIN,
    ),
    Route(
        "expected_members_delete", "DELETE", f"{GROUP_PATH}/expected-members",
        "Clear the group's expected members (admin)", ExpectedMembersResponse, access=Access.ADMIN,
        query=(_OWNER_UID,), owned=True,
    ),
    Route(
        "owner_put", "PUT", f"{GROUP_PATH}/owner", "Claim the group for a fleet (admin, docs/api.md §7a)",
        OwnerResponse, OwnerRequest, access=Access.ADMIN, owned=True,
    ),
    Route(
        "owner_delete", "DELETE", f"{GROUP_PATH}/owner", "Release the group's owner (admin, docs/api.md §7a)",
        OwnerResponse, access=Access.ADMIN, query=(_RELEASING_UID,), owned=True,
    ),
    Route(
        "list", "GET", "/v1/groups", "ListGroups (admin)",
        ListResponse, api="list", access=Access.ADMIN, query=(_STATES,),
    ),
    Route("config", "GET", "/v1/config", "Effective limits and API versions", ConfigResponse, access=Access.TOKEN),
    Route("openapi", "GET", "/v1/openapi.json", "This document", dict, access=Access.TOKEN, documented=False),
    Route(
        "journal", "GET", "/v1/journal",
        "The membership journal, paged, or a long-poll (admin or journal:read, docs/api.md §8)",
        JournalResponse, access=Access.JOURNAL, query=(_AFTER, _LIMIT, _WAIT),
    ),
    Route(
        "debug_clock", "POST", "/v1/debug/clock", "Advance the manual clock (tests only, docs/api.md §9)",
        ClockResponse, ClockRequest, access=Access.OPEN, test_only=True,
    ),
    Route(
        "debug_store", "POST", "/v1/debug/store", "Inject store faults (tests only, docs/api.md §9)",
        StoreFaultsResponse, StoreFaultsRequest, access=Access.OPEN, test_only=True,
    ),
    Route("healthz", "GET", "/healthz", "Liveness", StatusResponse, access=Access.OPEN),
    Route(
        "readyz", "GET", "/readyz", "Readiness: 503 while loading persisted state, stopping, or writes fail",
        StatusResponse, access=Access.OPEN,
    ),
    Route("metrics", "GET", "/metrics", "Prometheus text", None, access=Access.OPEN),
)  # fmt: skip

ROUTES_BY_OPERATION: dict[str, Route] = {route.operation: route for route in ROUTES}
