"""The coordinator's group limits (docs/api.md §6 defaults, §10 flags)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int | None = None  # None: unlimited (KIP-389 off)
    new_member_join_timeout_ms: int = 300_000
    offset_metadata_max_bytes: int = 4_096
    # Berth's guard against anonymous-join floods (KIP-394 leaves pending ids unbounded until they expire).
    max_pending_members_per_group: int = 10_000
    # Bounds (issue #12), docs/api.md §6: a journal event is summarised beyond this many bytes.
    journal_event_max_bytes: int = 256 * 1024

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms < 0 or self.group_max_session_timeout_ms < 0:
            raise ValueError("session timeout bounds must not be negative")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group min session timeout exceeds the max")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group initial rebalance delay must not be negative")
        if self.group_max_size is not None and self.group_max_size < 1:
            raise ValueError("group max size must be at least 1")
        if self.new_member_join_timeout_ms < 0 or self.offset_metadata_max_bytes < 0:
            raise ValueError("timeouts and sizes must not be negative")
        if self.max_pending_members_per_group < 1:
            raise ValueError("max pending members per group must be at least 1")
        if self.journal_event_max_bytes < 1:
            raise ValueError("journal event max bytes must be at least 1")
