"""API versions: the range each route family speaks, the versions that gate behaviour, and the field markers.

Named constants are the single source of a gate: the message declarations (``Since``, ``Until``,
``IgnoredBefore`` on a field) and the core's decisions both use them (docs/api.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Supported API versions per route family, inclusive (docs/api.md §3, and ``GET /v1/config``).
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

# Version gates (docs/api.md §3), named after what they enable.
JOIN_REBALANCE_TIMEOUT_VERSION = 1
JOIN_MEMBER_ID_REQUIRED_VERSION = 4  # KIP-394
JOIN_STATIC_MEMBERSHIP_VERSION = 5  # KIP-345
JOIN_PROTOCOL_TYPE_IN_RESPONSE_VERSION = 7  # KIP-559
JOIN_REASON_VERSION = 8  # KIP-800
JOIN_SKIP_ASSIGNMENT_VERSION = 9  # KIP-814
SYNC_STATIC_MEMBERSHIP_VERSION = 3
SYNC_PROTOCOL_FIELDS_VERSION = 5  # KIP-559
HEARTBEAT_STATIC_MEMBERSHIP_VERSION = 3
LEAVE_BATCH_VERSION = 3  # KIP-345
LEAVE_REASON_VERSION = 5  # KIP-800
COMMIT_MEMBER_FIELDS_VERSION = 1
COMMIT_LEADER_EPOCH_VERSION = 6
COMMIT_STATIC_MEMBERSHIP_VERSION = 7
COMMIT_GROUP_ID_NOT_FOUND_VERSION = 9
DESCRIBE_INSTANCE_ID_VERSION = 4


def newest(api: str) -> int:
    return API_VERSIONS[api][1]


@dataclass(frozen=True, slots=True)
class Since:
    """The first version that carries a field.

    In a request, a non-null value sent with an older version is answered in-band UNSUPPORTED_VERSION (35); in a
    response, an older version does not get the field at all.
    """

    version: int


@dataclass(frozen=True, slots=True)
class Until:
    """A request field only versions below ``version`` carry (leave's single ``member_id``): a non-null value
    from a newer version is answered in-band UNSUPPORTED_VERSION."""

    version: int


@dataclass(frozen=True, slots=True)
class IgnoredBefore:
    """A request field older versions may send but the coordinator ignores below ``version`` (``reason``)."""

    version: int
