"""Kafka's expiry of committed offsets and empty groups (``offsets.retention.minutes``, KIP-211), and the cap on
the number of groups (docs/api.md §6, §11).

Every ``offsets_retention_check_interval_ms`` (Kafka's ``offsets.retention.check.interval.ms``, 10 minutes) one
timer runs ``expire_groups``:

- A group with members (or KIP-394 pending ids) keeps its offsets: Kafka expires a Stable consumer group's offsets
  of topics it no longer subscribes to, which needs the consumer protocol's subscriptions; Berth keeps those.
- An Empty group that had members (a protocol type) loses all its offsets once ``offsets_retention_ms`` has passed
  since it became Empty and since each offset was committed (Kafka counts only the former; Berth never expires
  an offset committed less than the retention ago).
- A group that never had members (simple commits, no protocol type) loses each offset ``offsets_retention_ms``
  after its commit.
- Then an Empty group with no offsets is deleted — as Kafka deletes it — unless an admin set it up: a group with an
  owner (docs/api.md §7a) or expected members stays until its owner or an admin deletes it.

Deletions are durable before they count: a failed write puts back what the run took away (unless a request
recreated it meanwhile). A run deletes at most ``MAX_GROUPS_PER_RUN`` groups and comes back a second later for the
rest, so one write stays small. What expires leaves the group's figures and ledgers (``usage``) at once.
"""

from __future__ import annotations

from berth.coordinator.core.events import EventType, GroupDeletedVia
from berth.coordinator.core.group import EMPTY, Group
from berth.coordinator.core.offsets import apply_offset
from berth.coordinator.core.records import OffsetRecord, new_group_tombstone
from berth.coordinator.core.state import EXPIRE_GROUPS, CoreState, expiry_key, join_key, sync_key
from berth.coordinator.protocol import GroupId, OffsetAndMetadata

MAX_GROUPS_PER_RUN = 10_000
SOON_MS = 1_000

ExpiredOffset = tuple[GroupId, str, int, OffsetAndMetadata]


def schedule_expiry(core: CoreState, delay_ms: int | None = None) -> None:
    if core.config.offsets_retention_ms is None:
        return
    interval = core.config.offsets_retention_check_interval_ms
    core.schedule(expiry_key(), interval if delay_ms is None else delay_ms, EXPIRE_GROUPS)


def expire_groups(core: CoreState) -> None:
    """One expiry run (see the module rules); schedules the next."""
    retention = core.config.offsets_retention_ms
    if retention is None:
        return
    expired: list[ExpiredOffset] = []
    deleted: list[Group] = []
    for group in list(core.groups.values()):
        if group.state is not EMPTY or group.members or group.pending_join_members:
            continue
        expired += _expire_offsets(core, group, retention)
        if _is_deletable(core, group):
            deleted.append(group)
            if len(deleted) == MAX_GROUPS_PER_RUN:
                break
    for group in deleted:
        _forget(core, group)
    schedule_expiry(core, SOON_MS if len(deleted) == MAX_GROUPS_PER_RUN else None)
    if not expired and not deleted:
        return
    for group_id, topic, partition, _ in expired:
        core.persist(OffsetRecord(group_id, topic, partition, None))
    for group in deleted:
        core.persist(new_group_tombstone(group.group_id))
        core.event(group, EventType.GROUP_DELETED, via=GroupDeletedVia.EXPIRED)

    def on_failed() -> None:
        for group in deleted:
            if group.group_id not in core.groups:
                core.register(group)
        for group_id, topic, partition, value in expired:
            held = core.offsets.get(group_id, {}).get(topic, {})
            if partition not in held:
                apply_offset(core, OffsetRecord(group_id, topic, partition, value))

    core.when_persist_failed(on_failed)


def _expire_offsets(core: CoreState, group: Group, retention_ms: int) -> list[ExpiredOffset]:
    committed = core.offsets.get(group.group_id)
    if not committed:
        return []
    # A group that had members counts from when it became Empty; one that never had any, from each commit.
    empty_since = group.state_timestamp_ms if group.protocol_type else None
    due = core.now_ms - retention_ms
    expired: list[ExpiredOffset] = []
    for topic, partitions in committed.items():
        for partition, value in partitions.items():
            since = value.commit_timestamp_ms if empty_since is None else max(empty_since, value.commit_timestamp_ms)
            if since <= due:
                expired.append((group.group_id, topic, partition, value))
    for group_id, topic, partition, _ in expired:
        apply_offset(core, OffsetRecord(group_id, topic, partition, None))
    return expired


def _is_deletable(core: CoreState, group: Group) -> bool:
    return group.group_id not in core.offsets and not group.has_expected_instance_ids and group.owner is None


def _forget(core: CoreState, group: Group) -> None:
    core.forget(group.group_id)
    core.cancel(join_key(group.group_id))
    core.cancel(sync_key(group.group_id))
