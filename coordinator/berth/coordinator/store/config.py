"""The store's settings: what it checks when it opens and how much journal it keeps (docs/api.md §6, §8, §10).

Retention defaults fit the chart's 1 GiB data volume (docs/api.md §8 has the arithmetic): the journal exists twice
on disk (the SQLite table and the segment files), so 256 MiB of events cost about 560 MiB with SQLite's overhead
and leave the rest for groups, offsets and the write-ahead log. Seven days is Kafka's default log retention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from berth.coordinator.store.segments import Retention

IntegrityCheck = Literal["quick", "full", "off"]

MiB = 2**20
DAY_MS = 86_400_000

#: A segment is at most this big, and at most an eighth of the retained bytes, so retention frees space in
#: steps of at most an eighth of what it keeps.
SEGMENT_MAX_BYTES = 16 * MiB
SEGMENTS_PER_RETENTION = 8


@dataclass(frozen=True, slots=True)
class StoreConfig:
    #: ``PRAGMA quick_check`` (quick), ``integrity_check`` (full) or nothing (off) before the store is used.
    integrity_check: IntegrityCheck = "quick"
    #: Journal bytes kept (the segments' size; the table holds the same events); None: no bound.
    journal_retention_bytes: int | None = 256 * MiB
    #: Events older than this before the newest event are dropped; None: no bound.
    journal_retention_ms: int | None = 7 * DAY_MS
    #: Events per journal segment file before the next one starts.
    segment_max_events: int = 100_000

    def __post_init__(self) -> None:
        if self.segment_max_events < 1:
            raise ValueError("segment_max_events must be at least 1")
        if self.journal_retention_bytes is not None and self.journal_retention_bytes < 1:
            raise ValueError("journal retention bytes must be at least 1")
        if self.journal_retention_ms is not None and self.journal_retention_ms < 1:
            raise ValueError("journal retention ms must be at least 1")

    @property
    def retention(self) -> Retention:
        segment_bytes = SEGMENT_MAX_BYTES
        if self.journal_retention_bytes is not None:
            segment_bytes = max(1, min(segment_bytes, self.journal_retention_bytes // SEGMENTS_PER_RETENTION))
        return Retention(
            max_bytes=self.journal_retention_bytes,
            max_age_ms=self.journal_retention_ms,
            segment_max_events=self.segment_max_events,
            segment_max_bytes=segment_bytes,
        )
