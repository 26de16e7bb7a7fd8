"""The request and response models of the HTTP API, declared once: they validate requests (``decode``) and
generate the OpenAPI document (``openapi``), so the document cannot drift from what the code accepts.

A ``Field`` says its JSON type, whether it is required or nullable, the first ``api_version`` that may carry a
non-null value (``since``; an older request carrying one is answered in-band UNSUPPORTED_VERSION, API.md §8),
and bounds. ``Model`` is a JSON object of fields. Lists take their length limit from ``Limits`` by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["string", "int32", "int64", "bytes", "boolean", "objects", "strings", "object"]


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    required: bool = False
    nullable: bool = False
    since: int = 0  # first api_version that may carry a non-null value
    minimum: int | None = None
    maximum: int | None = None
    items: Model | None = None  # for kind "objects"
    limit: str = "max_list_items"  # which Limits attribute bounds a list
    description: str = ""


@dataclass(frozen=True)
class Model:
    name: str
    fields: tuple[Field, ...]
    description: str = ""
    by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})

    def __getitem__(self, name: str) -> Field:
        return self.by_name[name]


API_VERSION = Field("api_version", "int32", description="Kafka API version; absent = the newest (API.md §3)")

# ------------------------------------------------------------------------------------------------ requests

PROTOCOL = Model(
    "JoinProtocol",
    (
        Field("name", "string", required=True, description="assignor name, unique within the request"),
        Field("metadata", "bytes", required=True, description="the member's subscription for this protocol"),
    ),
)
JOIN_REQUEST = Model(
    "JoinRequest",
    (
        API_VERSION,
        Field("member_id", "string", required=True, description='"" for a new member'),
        Field("group_instance_id", "string", nullable=True, since=5, description="static membership (KIP-345)"),
        Field("session_timeout_ms", "int32", required=True),
        Field("rebalance_timeout_ms", "int32", nullable=True, since=1, minimum=0, description="default: session"),
        Field("protocol_type", "string", required=True),
        Field("protocols", "objects", required=True, items=PROTOCOL, limit="max_protocols"),
        Field("client_id", "string", nullable=True),
        Field("reason", "string", nullable=True, description="v8+; ignored below"),
    ),
)
SYNC_ASSIGNMENT = Model(
    "SyncAssignment",
    (Field("member_id", "string", required=True), Field("assignment", "bytes", required=True)),
)
SYNC_REQUEST = Model(
    "SyncRequest",
    (
        API_VERSION,
        Field("generation_id", "int32", required=True),
        Field("member_id", "string", required=True),
        Field("group_instance_id", "string", nullable=True, since=3),
        Field("protocol_type", "string", nullable=True, since=5, description="required (non-null) from v5"),
        Field("protocol_name", "string", nullable=True, since=5, description="required (non-null) from v5"),
        Field("assignments", "objects", required=True, items=SYNC_ASSIGNMENT, description="[] unless leader"),
    ),
)
HEARTBEAT_REQUEST = Model(
    "HeartbeatRequest",
    (
        API_VERSION,
        Field("generation_id", "int32", required=True),
        Field("member_id", "string", required=True),
        Field("group_instance_id", "string", nullable=True, since=3),
    ),
)
LEAVE_MEMBER = Model(
    "LeaveMember",
    (
        Field("member_id", "string", description='"" with a group_instance_id: removal by instance id'),
        Field("group_instance_id", "string", nullable=True),
        Field("reason", "string", nullable=True, description="v5+; ignored below"),
    ),
)
LEAVE_REQUEST = Model(
    "LeaveRequest",
    (
        API_VERSION,
        Field("members", "objects", items=LEAVE_MEMBER, description="v3+: required; v0-2: not allowed"),
        Field("member_id", "string", description="v0-2: required; v3+: not allowed"),
    ),
    description="v3+ takes a batch in members; v0-2 a single member_id.",
)
COMMIT_PARTITION = Model(
    "CommitPartition",
    (
        Field("partition_index", "int32", required=True, minimum=0),
        Field("committed_offset", "int64", required=True),
        Field("committed_leader_epoch", "int32", nullable=True, since=6),
        Field("committed_metadata", "string", nullable=True),
    ),
)
COMMIT_TOPIC = Model(
    "CommitTopic",
    (
        Field("name", "string", required=True),
        Field("partitions", "objects", required=True, items=COMMIT_PARTITION),
    ),
)
COMMIT_REQUEST = Model(
    "OffsetCommitRequest",
    (
        API_VERSION,
        Field("generation_id", "int32", nullable=True, since=1, description="default -1: a simple commit"),
        Field("member_id", "string", nullable=True, since=1),
        Field("group_instance_id", "string", nullable=True, since=7),
        Field("topics", "objects", required=True, items=COMMIT_TOPIC),
    ),
)
EXPECTED_MEMBERS_REQUEST = Model(
    "ExpectedMembersRequest",
    (Field("group_instance_ids", "strings", required=True, description="[] is the same as DELETE"),),
)
CLOCK_REQUEST = Model(
    "ClockAdvanceRequest",
    (Field("advance_ms", "int64", required=True, minimum=0, maximum=100 * 365 * 24 * 3600 * 1000),),
)
STORE_FAULTS_REQUEST = Model(
    "StoreFaultsRequest",
    (
        Field("fail_next", "int32", minimum=0, maximum=1_000_000),
        Field("failing", "boolean"),
        Field("stalled", "boolean"),
    ),
)

# ----------------------------------------------------------------------------------------------- responses
# Fields marked required are always present; the rest appear when the request's version can carry them
# (API.md §8) or, for describe, when the group could be described.

ERROR_CODE = Field("error_code", "int32", required=True, description="Kafka's error code; 0 = NONE")
ERROR = Field("error", "string", required=True, description="Kafka's error name")
ERROR_ONLY = Model("ErrorOnlyResponse", (ERROR_CODE, ERROR))
HTTP_ERROR = Model(
    "HttpError",
    (
        Field("error_code", "int32", description="INVALID_REQUEST 42, UNSUPPORTED_VERSION 35, 30, 15"),
        ERROR,
        Field("message", "string", description="names the offending field"),
    ),
)
JOIN_MEMBER = Model(
    "JoinMember",
    (
        Field("member_id", "string", required=True),
        Field("group_instance_id", "string", nullable=True, description="v5+"),
        Field("metadata", "bytes", required=True),
    ),
)
JOIN_RESPONSE = Model(
    "JoinResponse",
    (
        ERROR_CODE,
        ERROR,
        Field("generation_id", "int32", required=True),
        Field("protocol_type", "string", nullable=True, description="v7+"),
        Field("protocol_name", "string", nullable=True, required=True, description="null on errors from v7"),
        Field("leader", "string", required=True),
        Field("skip_assignment", "boolean", description="v9+ (KIP-814)"),
        Field("member_id", "string", required=True),
        Field("members", "objects", required=True, items=JOIN_MEMBER, description="for the leader only"),
    ),
)
SYNC_RESPONSE = Model(
    "SyncResponse",
    (
        ERROR_CODE,
        ERROR,
        Field("protocol_type", "string", nullable=True, description="v5+"),
        Field("protocol_name", "string", nullable=True, description="v5+"),
        Field("assignment", "bytes", required=True),
    ),
)
LEAVE_RESULT = Model(
    "LeaveMemberResult",
    (
        Field("member_id", "string", required=True),
        Field("group_instance_id", "string", nullable=True, required=True),
        ERROR_CODE,
        ERROR,
    ),
)
LEAVE_RESPONSE = Model(
    "LeaveResponse", (ERROR_CODE, ERROR, Field("members", "objects", items=LEAVE_RESULT, description="v3+"))
)
PARTITION_RESULT = Model("PartitionResult", (Field("partition_index", "int32", required=True), ERROR_CODE, ERROR))
TOPIC_RESULTS = Model(
    "TopicResults",
    (Field("name", "string", required=True), Field("partitions", "objects", required=True, items=PARTITION_RESULT)),
)
COMMIT_RESPONSE = Model(
    "OffsetCommitResponse", (ERROR_CODE, ERROR, Field("topics", "objects", required=True, items=TOPIC_RESULTS))
)
FETCHED_PARTITION = Model(
    "FetchedPartition",
    (
        Field("partition_index", "int32", required=True),
        Field("committed_offset", "int64", required=True),
        Field("committed_leader_epoch", "int32", required=True),
        Field("metadata", "string", required=True),
        ERROR_CODE,
        ERROR,
    ),
)
FETCHED_TOPIC = Model(
    "FetchedTopic",
    (Field("name", "string", required=True), Field("partitions", "objects", required=True, items=FETCHED_PARTITION)),
)
FETCH_RESPONSE = Model(
    "OffsetFetchResponse", (ERROR_CODE, ERROR, Field("topics", "objects", required=True, items=FETCHED_TOPIC))
)
DESCRIBED_MEMBER = Model(
    "DescribedMember",
    (
        Field("member_id", "string", required=True),
        Field("group_instance_id", "string", nullable=True, description="v4+"),
        Field("client_id", "string", required=True),
        Field("client_host", "string", required=True),
        Field("session_timeout_ms", "int32", required=True),
        Field("rebalance_timeout_ms", "int32", required=True),
        Field("member_metadata", "bytes", required=True),
        Field("member_assignment", "bytes", required=True),
    ),
)
DESCRIBE_RESPONSE = Model(
    "DescribeResponse",
    (
        ERROR_CODE,
        ERROR,
        Field("group_id", "string"),
        Field("group_state", "string", description="Empty, PreparingRebalance, CompletingRebalance, Stable, Dead"),
        Field("protocol_type", "string"),
        Field("protocol_data", "string"),
        Field("generation_id", "int32"),
        Field("leader", "string", nullable=True),
        Field("members", "objects", items=DESCRIBED_MEMBER),
    ),
)
LISTED_GROUP = Model(
    "ListedGroup",
    (
        Field("group_id", "string", required=True),
        Field("protocol_type", "string", required=True),
        Field("group_state", "string", required=True),
    ),
)
LIST_RESPONSE = Model(
    "ListResponse", (ERROR_CODE, ERROR, Field("groups", "objects", required=True, items=LISTED_GROUP))
)
EXPECTED_MEMBERS_RESPONSE = Model(
    "ExpectedMembersResponse", (ERROR_CODE, ERROR, Field("group_instance_ids", "strings", required=True))
)
CONFIG_RESPONSE = Model(
    "ConfigResponse",
    (
        Field("group_min_session_timeout_ms", "int32", required=True),
        Field("group_max_session_timeout_ms", "int32", required=True),
        Field("group_max_size", "int32", nullable=True, required=True, description="null = unlimited"),
        Field("group_initial_rebalance_delay_ms", "int32", required=True),
        Field("new_member_join_timeout_ms", "int32", required=True),
        Field("offset_metadata_max_bytes", "int32", required=True),
        Field("api_versions", "object", required=True, description="route family -> [lowest, highest]"),
    ),
)
CLOCK_RESPONSE = Model("ClockResponse", (Field("now_ms", "int64", required=True),))
STORE_FAULTS_RESPONSE = Model("StoreFaultsResponse", (Field("injected", "int32", required=True),))
STATUS_RESPONSE = Model("StatusResponse", (Field("status", "string", required=True),))
