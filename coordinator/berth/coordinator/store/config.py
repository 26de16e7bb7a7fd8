"""The store's settings: what it checks when it opens and how much journal it keeps (docs/api.md §6, §10)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

IntegrityCheck = Literal["quick", "full", "off"]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    #: ``PRAGMA quick_check`` (quick), ``integrity_check`` (full) or nothing (off) before the store is used.
    integrity_check: IntegrityCheck = "quick"
    #: Events per journal segment file before the next one starts.
    segment_max_events: int = 100_000

    def __post_init__(self) -> None:
        if self.segment_max_events < 1:
            raise ValueError("segment_max_events must be at least 1")
