"""The pure group coordinator: Kafka's classic group protocol as a clock-injected state machine.

No asyncio, aiohttp, sqlite3, clocks, randomness beyond member-id uuids, or threads here (import-linter
enforces it). ``Coordinator`` is the entry point; requests and answers are the declared messages of
``berth.coordinator.protocol``; ``records`` is what gets persisted, ``effects`` what a call asks of its adapter,
``events`` the journal's event types.
"""

from berth.coordinator.core.config import CoordinatorConfig
from berth.coordinator.core.coordinator import Coordinator
from berth.coordinator.core.effects import Effects, Response, Write
from berth.coordinator.core.events import EventType, ExpiryPhase, GroupDeletedVia, LeaveVia, RebalanceCause
from berth.coordinator.core.group import Group, GroupState
from berth.coordinator.core.ownership import OwnerRefusal
from berth.coordinator.core.records import (
    ExpectedMembersRecord,
    GroupDeltaRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetRecord,
    Record,
    RecordFormatError,
)
from berth.coordinator.protocol import OffsetAndMetadata

__all__ = [
    "Coordinator",
    "CoordinatorConfig",
    "Effects",
    "EventType",
    "ExpectedMembersRecord",
    "ExpiryPhase",
    "Group",
    "GroupDeletedVia",
    "GroupDeltaRecord",
    "GroupMetadata",
    "GroupRecord",
    "GroupState",
    "LeaveVia",
    "MemberMetadata",
    "OffsetAndMetadata",
    "OffsetRecord",
    "OwnerRefusal",
    "RebalanceCause",
    "Record",
    "RecordFormatError",
    "Response",
    "Write",
]
