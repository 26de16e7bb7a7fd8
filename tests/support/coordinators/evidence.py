"""What the operator's passes do with each describe of a Kafka fleet's group (``reconcile.evidence_journal``),
without a pass: the describe compared with the fleet's last one (``planners.evidence.observe_group``; the operator
keeps the last in the fleet's memory) and the events appended to an evidence journal; likewise a batch leave."""

from __future__ import annotations

from collections.abc import Mapping

from berth.operator.planners.evidence import EvidenceEvent, EvidenceState, observe_group, removal_events
from berth.operator.planners.observations import GroupDescription, PodTimes
from berth.operator.ports import EvidenceJournal
from berth.operator.reconcile import evidence_journal


class EvidenceWriter:
    def __init__(self, journal: EvidenceJournal) -> None:
        self.journal = journal
        self.states: dict[str, EvidenceState] = {}  # per fleet uid, as each fleet's memory holds it

    async def observed(
        self,
        fleet_uid: str,
        key: str,
        description: GroupDescription,
        now_ms: int,
        pods: Mapping[str, PodTimes] | None = None,
    ) -> list[EvidenceEvent]:
        state, events = observe_group(
            self.states.get(fleet_uid, EvidenceState()), description, now_ms=now_ms, key=key, pods=pods
        )
        self.states[fleet_uid] = state
        await evidence_journal.append(self.journal, events)
        return events

    async def removed(
        self, fleet_uid: str, key: str, results: Mapping[str, str], *, everyone: bool, now_ms: int
    ) -> None:
        """The operator's batch leave from the fleet's group (its per-id ``results``), recorded."""
        state, events = removal_events(
            self.states.get(fleet_uid, EvidenceState()), key, results, everyone=everyone, now_ms=now_ms
        )
        self.states[fleet_uid] = state
        await evidence_journal.append(self.journal, events)
