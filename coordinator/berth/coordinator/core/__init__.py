"""The pure group coordinator: Kafka's classic group protocol as a clock-injected state machine.

No asyncio, aiohttp, sqlite3 or Kopf here (import-linter enforces it). ``Coordinator`` is the entry point;
``model`` holds the typed requests and responses, ``records`` what gets persisted, ``effects`` what a call
asks of its adapter.
"""

from berth.coordinator.core.config import CoordinatorConfig
from berth.coordinator.core.coordinator import Coordinator
from berth.coordinator.core.effects import Effects, Write
from berth.coordinator.core.group import Group, GroupState
from berth.coordinator.core.records import (
    ExpectedMembersRecord,
    GroupRecord,
    OffsetAndMetadata,
    OffsetRecord,
    Record,
    RecordFormatError,
)

__all__ = [
    "Coordinator",
    "CoordinatorConfig",
    "Effects",
    "ExpectedMembersRecord",
    "Group",
    "GroupRecord",
    "GroupState",
    "OffsetAndMetadata",
    "OffsetRecord",
    "Record",
    "RecordFormatError",
    "Write",
]
