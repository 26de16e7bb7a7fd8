"""The journal's event types and the reasons events carry, as the core uses them: declared once, with the event's
fields, in ``berth.coordinator.formats.journal`` (shared with the operator's evidence and the pipeline's schema).

The core emits only these (docs/formats.md "Journal events", docs/api.md §8).
"""

from __future__ import annotations

from berth.coordinator.formats.journal import (
    EventFields,
    EventHeader,
    EventType,
    ExpiryPhase,
    GroupDeletedVia,
    JournalEvent,
    LeaveVia,
    OwnerRecord,
    RebalanceCause,
)

__all__ = [
    "EventFields",
    "EventHeader",
    "EventType",
    "ExpiryPhase",
    "GroupDeletedVia",
    "JournalEvent",
    "LeaveVia",
    "OwnerRecord",
    "RebalanceCause",
]
