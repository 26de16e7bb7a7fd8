"""What the operator observes of groups on a coordinator that keeps no journal (Kafka), kept as evidence: an
:class:`EvidenceRecorder` per operator remembers each fleet's last observation, turns the next one (or its own
removal) into journal events (``planners.evidence``) and appends them to an
:class:`~berth.operator.ports.EvidenceJournal` (a directory, ``evidence_files``, or a ConfigMap,
``kube.evidence_configmap``), which ``berth-analyze`` reads like the coordinator's journal.

Rules: an append that fails is logged and dropped (evidence is best effort, never a reason to stop a reconcile);
nothing but membership facts is written (no secrets).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from berth.operator.planners.evidence import EvidenceEvent, EvidenceState, observe_group, removal_events
from berth.operator.planners.observations import GroupDescription, PodTimes
from berth.operator.ports import EvidenceJournal

logger = logging.getLogger("berth.operator.evidence")


class EvidenceRecorder:
    """Per fleet (uid) the last observation, and the journal the events go to."""

    def __init__(self, journal: EvidenceJournal | None) -> None:
        self.journal = journal
        self._states: dict[str, EvidenceState] = {}

    async def observed(
        self,
        fleet_uid: str,
        key: str,
        description: GroupDescription,
        now_ms: int,
        pods: Mapping[str, PodTimes] | None = None,
    ) -> list[EvidenceEvent]:
        """One describe of the fleet's group, recorded under ``key`` (``planners.advice.group_key``), with the fleet's
        pods' times (``pods``, by name) for restart durations: the events it shows since the last one (kept where
        there is a journal; returned either way: the fleet's restarts are counted from them)."""
        previous = self._states.get(fleet_uid, EvidenceState())
        state, events = observe_group(previous, description, now_ms=now_ms, key=key, pods=pods)
        self._states[fleet_uid] = state
        await self._write(events)
        return events

    async def removed(
        self, fleet_uid: str, key: str, results: Mapping[str, str], *, everyone: bool, now_ms: int
    ) -> None:
        """The operator's removal from the fleet's group, recorded under ``key``."""
        if self.journal is None:
            return
        state, events = removal_events(
            self._states.get(fleet_uid, EvidenceState()), key, results, everyone=everyone, now_ms=now_ms
        )
        self._states[fleet_uid] = state
        await self._write(events)

    def forget(self, fleet_uid: str) -> None:
        self._states.pop(fleet_uid, None)

    async def _write(self, events: Sequence[EvidenceEvent]) -> None:
        if not events or self.journal is None:
            return
        try:
            await self.journal.append(events)
        except Exception as error:  # best effort: evidence never stops a reconcile
            logger.warning("could not record %d evidence event(s): %s", len(events), error)
