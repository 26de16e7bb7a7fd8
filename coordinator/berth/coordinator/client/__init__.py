"""The asyncio member library and admin client Berth's consumer pods and operator use.

``GroupMember`` takes part in a group (join, sync, heartbeat, commit) from a ``MemberConfig`` built from arguments
or the ``BERTH_*`` environment; ``CoordinatorAdmin`` is the admin surface. Both speak HTTP/JSON to the coordinator
(docs/api.md) and import nothing of its insides but the contract's declarations (``berth.coordinator.protocol``):
the results are the coordinator's declared answers, under the names this library has always used for them. See
docs/member-library.md.
"""

from berth.coordinator.client.admin import CoordinatorAdmin
from berth.coordinator.client.backoff import Backoff, BackoffPolicy
from berth.coordinator.client.config import MemberConfig, parse_assignors, parse_topics
from berth.coordinator.client.encoding import Assignment, Subscription, read_assignment, read_subscription
from berth.coordinator.client.errors import (
    AuthorizationError,
    BerthClientError,
    CommitFailedError,
    ConfigError,
    CoordinatorHttpError,
    CoordinatorRefusedError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
    FencedInstanceError,
    GroupError,
    GroupOwnedError,
    MemberClosedError,
    MemberFatalError,
    RequestTooLargeError,
    ResponseTooLargeError,
)
from berth.coordinator.client.member import GroupMember
from berth.coordinator.client.state import AssignmentChange, MemberState, Phase
from berth.coordinator.protocol import (
    ConfigResponse,
    DescribedMember,
    DescribeResponse,
    Error,
    FetchedPartition,
    JournalResponse,
    LeaveMemberResult,
    ListedGroup,
    OffsetAndMetadata,
    TopicPartition,
)

# The member library's names for the coordinator's answers (one declaration each, in the protocol package).
CoordinatorConfig = ConfigResponse
GroupDescription = DescribeResponse
GroupListing = ListedGroup
JournalPage = JournalResponse
CommittedOffset = FetchedPartition
MemberRemoval = LeaveMemberResult

__all__ = [
    "Assignment",
    "AssignmentChange",
    "AuthorizationError",
    "Backoff",
    "BackoffPolicy",
    "BerthClientError",
    "CommitFailedError",
    "CommittedOffset",
    "ConfigError",
    "CoordinatorAdmin",
    "CoordinatorConfig",
    "CoordinatorHttpError",
    "CoordinatorRefusedError",
    "CoordinatorServerError",
    "CoordinatorUnavailableError",
    "DescribedMember",
    "Error",
    "FencedInstanceError",
    "GroupDescription",
    "GroupError",
    "GroupOwnedError",
    "GroupListing",
    "GroupMember",
    "JournalPage",
    "MemberClosedError",
    "MemberConfig",
    "MemberFatalError",
    "MemberRemoval",
    "MemberState",
    "OffsetAndMetadata",
    "Phase",
    "RequestTooLargeError",
    "ResponseTooLargeError",
    "Subscription",
    "TopicPartition",
    "parse_assignors",
    "parse_topics",
    "read_assignment",
    "read_subscription",
]
