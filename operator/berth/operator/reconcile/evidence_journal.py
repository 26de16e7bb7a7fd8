"""Where the Kafka evidence (``planners.evidence``) is kept: an :class:`EvidenceRecorder` per operator, writing to
a bounded journal in the format of Berth's coordinator journal (docs/formats.md), so ``berth-analyze`` reads it.

Journals: :class:`DirectoryJournal` (``--evidence-dir``: JSON Lines segments ``segment-<first seq>.jsonl``, at most
``max_segments`` of ``segment_bytes`` each, the oldest dropped) and the ConfigMap journal
(``kube.evidence_configmap``, ``--evidence-configmap``: the newest events within a size bound, in one key).
Rules: sequence numbers continue from what the journal holds; an append that fails is logged and dropped (evidence
is best effort, never a reason to stop a reconcile); nothing but membership facts is written (no secrets).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from berth.operator.planners.evidence import EvidenceState, numbered, observe_group, removal_events
from berth.operator.planners.observations import GroupDescription

logger = logging.getLogger("berth.operator.evidence")


class EvidenceJournal(Protocol):
    async def append(self, events: Sequence[Mapping[str, Any]]) -> None: ...


def encode(event: Mapping[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), sort_keys=True)


class DirectoryJournal:
    def __init__(self, directory: Path, *, segment_bytes: int = 1 << 20, max_segments: int = 8) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.max_segments = max_segments
        self._seq: int | None = None
        self._lock = asyncio.Lock()

    async def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        if events:
            async with self._lock:
                await asyncio.to_thread(self._append, events)

    def _append(self, events: Sequence[Mapping[str, Any]]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        segments = sorted(self.directory.glob("segment-*.jsonl"))
        if self._seq is None:
            self._seq = _last_seq(segments[-1]) if segments else 0
        lines = [encode(event) + "\n" for event in numbered(events, self._seq)]
        self._seq += len(lines)
        current = segments[-1] if segments else None
        if current is None or current.stat().st_size >= self.segment_bytes:
            current = self.directory / f"segment-{self._seq - len(lines) + 1:020d}.jsonl"
            segments.append(current)
        with current.open("a") as out:
            out.writelines(lines)
        for stale in segments[: -self.max_segments]:
            stale.unlink(missing_ok=True)


def _last_seq(segment: Path) -> int:
    last = 0
    for line in segment.read_text().splitlines():
        try:
            last = max(last, int(json.loads(line).get("seq", 0)))
        except (ValueError, AttributeError):
            continue
    return last


class EvidenceRecorder:
    """Per fleet (uid) the last observation, and the journal the events go to."""

    def __init__(self, journal: EvidenceJournal | None) -> None:
        self.journal = journal
        self._states: dict[str, EvidenceState] = {}

    async def observed(self, fleet_uid: str, description: GroupDescription, now_ms: int) -> None:
        if self.journal is None:
            return
        state, events = observe_group(self._states.get(fleet_uid, EvidenceState()), description, now_ms=now_ms)
        self._states[fleet_uid] = state
        await self._write(events)

    async def removed(
        self, fleet_uid: str, group_id: str, results: Mapping[str, str], *, everyone: bool, now_ms: int
    ) -> None:
        if self.journal is None:
            return
        state, events = removal_events(
            self._states.get(fleet_uid, EvidenceState()), group_id, results, everyone=everyone, now_ms=now_ms
        )
        self._states[fleet_uid] = state
        await self._write(events)

    def forget(self, fleet_uid: str) -> None:
        self._states.pop(fleet_uid, None)

    async def _write(self, events: Sequence[Mapping[str, Any]]) -> None:
        if not events or self.journal is None:
            return
        try:
            await self.journal.append(events)
        except Exception as error:  # best effort: evidence never stops a reconcile
            logger.warning("could not record %d evidence event(s): %s", len(events), error)
