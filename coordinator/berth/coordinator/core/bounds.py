"""The bounds on what the coordinator keeps, as the handlers check them (docs/api.md §6; sizes in ``usage``).

Each check is a pure question answered in O(1) from the ledgers and the group's own counters; the handlers answer
a refusal in-band, as Kafka answers the nearest thing it has, and change nothing:

- **A new group** (``refuse_new_group``): beyond ``max_groups``, beyond its tenant's ``max_groups_per_tenant``, or
  when its ``GROUP_BYTES`` do not fit a ledger: COORDINATOR_NOT_AVAILABLE (15), counted in ``groups_refused``.
- **A join** (``join_refused``): the group's metadata beyond ``group_metadata_max_bytes``, or the member's stored
  bytes beyond a ledger: GROUP_MAX_SIZE_REACHED (81), as KIP-389 turns a member away.
- **A leader's assignment** (``assignment_refused``): the same bounds: UNKNOWN_SERVER_ERROR (-1) to every member and
  a rebalance, as Kafka answers a group record it cannot append.
- **An offset** (``refuse_offset``, per partition): beyond ``offsets_max_per_group`` or
  ``offsets_max_bytes_per_group``, or a ledger: INVALID_COMMIT_OFFSET_SIZE (28) for that partition only, as Kafka
  answers offsets whose append is too large; a commit that does not grow the group (progress on a partition it has)
  is never refused.
- **KIP-394 pending ids** (``make_room_for_pending``): never a refusal. A group holds at most
  ``max_pending_members_per_group`` and the coordinator ``max_pending_members``; a newcomer beyond either pushes out
  the oldest pending id (journaled ``member_expired`` with phase ``evicted``), so a flood of anonymous joins churns
  its own ids instead of locking the group's real newcomers out, and each lives at most ``pending_member_timeout_ms``.
"""

from __future__ import annotations

from berth.coordinator.core.events import EventType, ExpiryPhase
from berth.coordinator.core.group import Group
from berth.coordinator.core.rebalance import remove_pending_member_and_update_group
from berth.coordinator.core.state import CoreState, heartbeat_key
from berth.coordinator.core.usage import GROUP_BYTES, MEMBER_BYTES, Ledger
from berth.coordinator.protocol import GroupId, JoinRequest, MemberId


def _refused_by(ledgers: tuple[Ledger, ...], delta: int) -> bool:
    return any(ledger.refuses(delta) for ledger in ledgers)


# ------------------------------------------------------------------------------------------------------ groups


def refuse_new_group(core: CoreState, tenant: str | None) -> bool:
    """Whether a group created for ``tenant`` would go beyond a bound (counted in ``groups_refused``)."""
    limit = core.config.max_groups
    refused = limit is not None and len(core.groups) >= limit
    if not refused:
        ledgers = core.ledgers_for(tenant)
        refused = any(ledger.full() for ledger in ledgers) or _refused_by(ledgers, GROUP_BYTES)
    if refused:
        core.groups_refused += 1
    return refused


# ------------------------------------------------------------------------------------------- members, metadata


def join_refused(core: CoreState, group: Group | None, req: JoinRequest, tenant: str | None) -> bool:
    """Would the join take the group's metadata beyond ``group_metadata_max_bytes``, or its stored bytes beyond a
    ledger? ``group`` None: the join creates the group (for ``tenant``)."""
    limit = core.config.group_metadata_max_bytes
    offered = req.metadata_bytes()
    if group is None:
        return (limit is not None and offered > limit) or _refused_by(
            core.ledgers_for(tenant), GROUP_BYTES + MEMBER_BYTES + offered
        )
    replacing: MemberId | None = req.member_id or None
    if replacing is None and req.group_instance_id is not None:
        replacing = group.static_member_id(req.group_instance_id)
    if limit is not None and group.metadata_bytes_with(offered, replacing) > limit:
        return True
    old = group.members.get(replacing) if replacing is not None else None
    delta = offered - old.protocols_bytes() if old is not None else MEMBER_BYTES + offered
    return _refused_by(group.usage.ledgers, delta)


def assignment_refused(core: CoreState, group: Group, assignment: dict[MemberId, bytes]) -> bool:
    """Would the leader's assignment take the group beyond its metadata bound or a ledger?"""
    after = group.metadata_bytes_with(0, assignments=assignment)
    limit = core.config.group_metadata_max_bytes
    return (limit is not None and after > limit) or _refused_by(group.usage.ledgers, after - group.metadata_bytes)


# ----------------------------------------------------------------------------------------------------- offsets


def refuse_offset(core: CoreState, group: Group, new_offset: bool, delta: int) -> bool:
    """Would one more offset (``new_offset``: a partition the group has none for) growing the group by ``delta``
    stored bytes go beyond the group's offset bounds or a ledger? Offsets in flight count."""
    config = core.config
    most = config.offsets_max_per_group
    usage = group.usage
    if new_offset and most is not None and usage.offset_count + usage.reserved_offsets >= most:
        return True
    if delta <= 0:
        return False
    limit = config.offsets_max_bytes_per_group
    if limit is not None and usage.offset_bytes + usage.reserved_offset_bytes + delta > limit:
        return True
    return _refused_by(usage.ledgers, delta)


# ------------------------------------------------------------------------------------------------ pending ids


def make_room_for_pending(core: CoreState, group: Group) -> None:
    """Before a new pending id joins ``group``: push out its oldest beyond the per-group bound, and the oldest of
    all beyond the total bound (``pending_ids`` may hold ids that are no longer pending: those just go)."""
    if len(group.pending_join_members) >= core.config.max_pending_members_per_group:
        oldest = group.oldest_pending()
        if oldest is not None:
            evict_pending(core, group, oldest)
    pending_ids = core.pending_ids
    while len(pending_ids) >= core.config.max_pending_members:
        group_id, member_id = next(iter(pending_ids))
        del pending_ids[(group_id, member_id)]
        holder = core.groups.get(group_id)
        if holder is not None and holder.is_pending(member_id):
            evict_pending(core, holder, member_id)


def note_pending(core: CoreState, group_id: GroupId, member_id: MemberId) -> None:
    core.pending_ids[(group_id, member_id)] = None


def evict_pending(core: CoreState, group: Group, member_id: MemberId) -> None:
    core.cancel(heartbeat_key(group.group_id, member_id))
    core.event(group, EventType.MEMBER_EXPIRED, member_id=member_id, group_instance_id=None, phase=ExpiryPhase.EVICTED)
    remove_pending_member_and_update_group(core, group, member_id)
