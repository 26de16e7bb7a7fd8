"""The coordinator's group limits and the bounds on what it keeps (docs/api.md §6 defaults, §10 flags).

The bounds on stored bytes (``usage``) derive from the chart's limits, as docs/api.md §6 sets out: of its 512 MiB of
memory, about 55 MiB are the process itself and at least 160 MiB are kept for what requests and rebalances hold for
a moment; of its 1 GiB volume, the journal takes up to 560 MiB. ``max_stored_bytes`` = 192 MiB then runs in under
350 MiB, reloads in about 260 MiB and takes under 300 MiB of disk (docs/reliability.md measures it). A tenant (a
non-admin token) may take an eighth of it.
"""

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
    # Berth's guard against anonymous-join floods (KIP-394 leaves pending ids unbounded until they expire): at most
    # this many per group and in total, the oldest pushed out by a newcomer; each lives at most its session timeout
    # and at most ``pending_member_timeout_ms`` (a client rejoins with its id at once).
    max_pending_members_per_group: int = 1_000
    max_pending_members: int = 100_000
    pending_member_timeout_ms: int = 30_000
    # Bounds (issue #12), docs/api.md §6: a journal event is summarised beyond this many bytes.
    journal_event_max_bytes: int = 256 * 1024
    # Kafka's offsets.retention.minutes (7 days) and its check interval; None: offsets and groups never expire.
    offsets_retention_ms: int | None = 7 * 86_400_000
    offsets_retention_check_interval_ms: int = 600_000
    # At most this many groups (None: unlimited); one more is refused COORDINATOR_NOT_AVAILABLE.
    max_groups: int | None = 50_000
    # Every member's protocol metadata and assignment together, per group (None: unlimited): a join beyond it is
    # GROUP_MAX_SIZE_REACHED, a leader's assignment beyond it UNKNOWN_SERVER_ERROR (Kafka's record too large).
    group_metadata_max_bytes: int | None = 8 * 2**20
    # Committed offsets per group (None: unlimited): one beyond either bound is INVALID_COMMIT_OFFSET_SIZE for its
    # partition, as Kafka answers offsets it cannot append.
    offsets_max_per_group: int | None = 100_000
    offsets_max_bytes_per_group: int | None = 16 * 2**20
    # Stored bytes (``usage``) of all groups, and of the groups one non-admin token created, and how many groups one
    # such token may create (None: unlimited). Beyond them: a join is GROUP_MAX_SIZE_REACHED, a commit's partition
    # INVALID_COMMIT_OFFSET_SIZE, a leader's assignment UNKNOWN_SERVER_ERROR, a new group COORDINATOR_NOT_AVAILABLE.
    max_stored_bytes: int | None = 192 * 2**20
    max_stored_bytes_per_tenant: int | None = 24 * 2**20
    max_groups_per_tenant: int | None = 1_000
    # An offset fetch answers in pages of at most this many stored bytes of offsets (but one offset).
    offset_fetch_page_max_bytes: int = 2**20

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
        if self.max_pending_members_per_group < 1 or self.max_pending_members < 1:
            raise ValueError("max pending members (per group and in total) must be at least 1")
        if self.pending_member_timeout_ms < 1:
            raise ValueError("pending member timeout must be at least 1 ms")
        for name in (
            "offsets_max_per_group",
            "offsets_max_bytes_per_group",
            "max_stored_bytes",
            "max_stored_bytes_per_tenant",
            "max_groups_per_tenant",
        ):
            bound = getattr(self, name)
            if bound is not None and bound < 1:
                raise ValueError(f"{name.replace('_', ' ')} must be at least 1")
        if self.offset_fetch_page_max_bytes < 1:
            raise ValueError("offset fetch page max bytes must be at least 1")
        if self.offsets_retention_ms is not None and self.offsets_retention_ms < 1:
            raise ValueError("offsets retention must be at least 1 ms")
        if self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offsets retention check interval must be at least 1 ms")
        if self.group_metadata_max_bytes is not None and self.group_metadata_max_bytes < 1:
            raise ValueError("group metadata max bytes must be at least 1")
        if self.max_groups is not None and self.max_groups < 1:
            raise ValueError("max groups must be at least 1")
        if self.journal_event_max_bytes < 1:
            raise ValueError("journal event max bytes must be at least 1")
