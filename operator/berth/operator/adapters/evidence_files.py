"""The Kafka evidence journal in a directory (``--evidence-dir``): JSON Lines segments in the format of Berth's
coordinator journal (docs/formats.md), so ``berth-analyze --journal DIR`` reads it.

An :class:`~berth.operator.ports.EvidenceJournal` (the ConfigMap one is ``kube.evidence_configmap``). Rules:
segments ``segment-<first seq>.jsonl``, at most ``max_segments`` of ``segment_bytes`` each, the oldest dropped;
sequence numbers continue from what the directory holds; writes run in a worker thread, one at a time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from berth.operator.planners.evidence import EvidenceEvent, encode_line, numbered


class DirectoryJournal:
    def __init__(self, directory: Path, *, segment_bytes: int = 1 << 20, max_segments: int = 8) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.max_segments = max_segments
        self._seq: int | None = None
        self._lock = asyncio.Lock()

    async def append(self, events: Sequence[EvidenceEvent]) -> None:
        if events:
            async with self._lock:
                await asyncio.to_thread(self._append, events)

    def _append(self, events: Sequence[EvidenceEvent]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        segments = sorted(self.directory.glob("segment-*.jsonl"))
        if self._seq is None:
            self._seq = _last_seq(segments[-1]) if segments else 0
        lines = [encode_line(event) + "\n" for event in numbered(events, self._seq)]
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
