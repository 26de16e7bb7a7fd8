"""Wire constants of the coordinator's HTTP/JSON contract (API.md), shared by server and clients.

Error codes are Kafka's numbers; API version ranges are those of API.md §3. Nothing here has behaviour.
"""

from __future__ import annotations

from enum import IntEnum


class Error(IntEnum):
    """Kafka error codes used by the coordinator (API.md §1)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    REQUEST_TIMED_OUT = 7
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82


#: Supported API versions per route family, inclusive (API.md §3 and §8 ``GET /v1/config``).
API_VERSIONS: dict[str, tuple[int, int]] = {
    "join": (0, 9),
    "sync": (0, 5),
    "heartbeat": (0, 4),
    "leave": (0, 5),
    "offsets": (0, 9),
    "offset_fetch": (0, 9),
    "describe": (0, 5),
    "list": (0, 5),
    "delete": (0, 2),
}

#: Group states as they appear on the wire.
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")

#: Group ids are 1..255 bytes of UTF-8 (API.md §2).
MAX_GROUP_ID_BYTES = 255

#: Version gates (API.md §3), named after what they enable.
JOIN_MEMBER_ID_REQUIRED_VERSION = 4  # KIP-394
JOIN_STATIC_MEMBERSHIP_VERSION = 5  # KIP-345
JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION = 7  # KIP-559
JOIN_REASON_VERSION = 8
JOIN_SKIP_ASSIGNMENT_VERSION = 9  # KIP-814
SYNC_STATIC_MEMBERSHIP_VERSION = 3
SYNC_PROTOCOL_FIELDS_VERSION = 5  # KIP-559
HEARTBEAT_STATIC_MEMBERSHIP_VERSION = 3
LEAVE_BATCH_VERSION = 3
LEAVE_REASON_VERSION = 5
COMMIT_MEMBER_FIELDS_VERSION = 1
COMMIT_LEADER_EPOCH_VERSION = 6
COMMIT_STATIC_MEMBERSHIP_VERSION = 7
COMMIT_GROUP_ID_NOT_FOUND_VERSION = 9
DESCRIBE_INSTANCE_ID_VERSION = 4
