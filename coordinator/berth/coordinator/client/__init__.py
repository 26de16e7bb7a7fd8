"""The asyncio member library and admin client Berth's consumer pods and operator use.

``GroupMember`` takes part in a group (join, sync, heartbeat, commit) from a ``MemberConfig`` built from arguments
or the ``BERTH_*`` environment; ``CoordinatorAdmin`` is the admin surface. Both speak HTTP/JSON to the coordinator
(API.md) and import nothing of its insides. See docs/member-library.md.
"""

from berth.coordinator.client.admin import CoordinatorAdmin
from berth.coordinator.client.admin_types import (
    CoordinatorConfig,
    DescribedMember,
    GroupDescription,
    GroupListing,
    JournalPage,
)
from berth.coordinator.client.backoff import Backoff, BackoffPolicy
from berth.coordinator.client.config import MemberConfig, parse_assignors, parse_topics
from berth.coordinator.client.encoding import Assignment, Subscription
from berth.coordinator.client.errors import (
    AuthorizationError,
    BerthClientError,
    CommitFailedError,
    ConfigError,
    CoordinatorHttpError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
    FencedInstanceError,
    GroupError,
    MemberClosedError,
    MemberFatalError,
)
from berth.coordinator.client.member import GroupMember
from berth.coordinator.client.state import AssignmentChange, MemberState, Phase
from berth.coordinator.client.wire import CommittedOffset, MemberRemoval, OffsetAndMetadata, TopicPartition
from berth.coordinator.protocol import Error

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
    "CoordinatorServerError",
    "CoordinatorUnavailableError",
    "DescribedMember",
    "Error",
    "FencedInstanceError",
    "GroupDescription",
    "GroupError",
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
    "Subscription",
    "TopicPartition",
    "parse_assignors",
    "parse_topics",
]
