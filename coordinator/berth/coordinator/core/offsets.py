"""OffsetCommit (8) and OffsetFetch (9) for classic groups (Kafka's OffsetMetadataManager).

Committed offsets become visible (to fetches) only once durable. A commit with generation -1 and no member
id is a "simple" commit, accepted only while the group is Empty, and creates the group if it does not exist (the
group is persisted with it, so that a restart knows its tenant). Per partition, as Kafka does, the other partitions
of the commit going ahead: metadata longer than ``offset_metadata_max_bytes`` (UTF-8) is OFFSET_METADATA_TOO_LARGE;
an offset beyond the group's, its tenant's or the coordinator's bounds (``bounds.refuse_offset``) is
INVALID_COMMIT_OFFSET_SIZE. Accepted offsets are reserved in the group's figures until durable (``usage``).

Every change of ``core.offsets`` goes through ``apply_offset``, which keeps the group's offset figures and its
ledgers right; only a deleted group's offsets go with it (its figures stay on the group object, which ``forget``
uncounted). A fetch is answered in pages (``fetch_offsets``): topics in name order (or in
the order asked), partitions in order, at most ``limit`` partitions and ``offset_fetch_page_max_bytes`` stored bytes
of offsets a page (but one), ``next`` the cursor of the rest.
"""

from __future__ import annotations

from bisect import bisect_left

from berth.coordinator.core.bounds import refuse_new_group, refuse_offset
from berth.coordinator.core.events import EventType
from berth.coordinator.core.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, Group
from berth.coordinator.core.rebalance import reschedule_heartbeat, validate_member
from berth.coordinator.core.records import OffsetRecord, new_empty_group_record
from berth.coordinator.core.state import CoreState
from berth.coordinator.core.usage import offset_bytes
from berth.coordinator.protocol import (
    COMMIT_GROUP_ID_NOT_FOUND_VERSION,
    FETCH_DEFAULT_LIMIT,
    Error,
    FetchedPartition,
    FetchedTopic,
    GroupId,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionResult,
    TopicPartition,
    TopicResults,
    fetch_cursor,
    group_id_too_long,
)

commit_error_response = OffsetCommitResponse.refusing

Reservation = tuple[int, int]  # (offsets, stored bytes) a commit holds in its group's figures until durable


def handle_commit(
    core: CoreState, group_id: GroupId, req: OffsetCommitRequest, version: int, ticket: int, tenant: str | None
) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, commit_error_response(req, Error.INVALID_GROUP_ID))
        return
    group = core.groups.get(group_id)
    created = False
    generation_id = req.effective_generation_id
    if group is None:
        if generation_id >= 0:
            missing = (
                Error.GROUP_ID_NOT_FOUND if version >= COMMIT_GROUP_ID_NOT_FOUND_VERSION else Error.ILLEGAL_GENERATION
            )
            core.reply(ticket, commit_error_response(req, missing))
            return
        # A "simple" commit (admin client, or a consumer without group management): it creates an Empty group,
        # held while its offsets are weighed and kept only once some offset is accepted.
        if refuse_new_group(core, tenant):
            core.reply(ticket, commit_error_response(req, Error.COORDINATOR_NOT_AVAILABLE))
            return
        group = Group(group_id, core.now_ms, tenant=tenant)
        core.register(group)
        created = True
    else:
        error = validate_offset_commit(core, group, req)
        if error is not None:
            core.reply(ticket, commit_error_response(req, error))
            return
    if group.state in (STABLE, PREPARING_REBALANCE):
        member = group.members[req.effective_member_id]
        member.last_heard_ms = core.now_ms
        reschedule_heartbeat(core, group, member)  # classic commits keep the session alive

    accepted, reserved, topics = _admit(core, group, req)
    response = OffsetCommitResponse(Error.NONE, topics=topics)
    if not accepted:
        if created:
            core.forget(group_id)
        core.reply(ticket, response)
        return
    if created:
        core.event(group, EventType.GROUP_CREATED)
        core.persist(new_empty_group_record(group))
    for record in accepted:
        core.persist(record)

    def on_persisted() -> None:
        _release(group, reserved)
        for record in accepted:
            apply_offset(core, record)
        core.reply(ticket, response)

    def on_failed() -> None:
        _release(group, reserved)
        if created and core.groups.get(group_id) is group and _is_vacant(core, group):
            core.forget(group_id)
        core.reply(ticket, commit_error_response(req, Error.COORDINATOR_NOT_AVAILABLE))

    core.when_persisted(on_persisted)
    core.when_persist_failed(on_failed)


def _admit(
    core: CoreState, group: Group, req: OffsetCommitRequest
) -> tuple[list[OffsetRecord], Reservation, tuple[TopicResults, ...]]:
    """Weigh each partition against the metadata bound and the offset bounds; reserve what is accepted."""
    max_bytes = core.config.offset_metadata_max_bytes
    committed = core.offsets.get(group.group_id, {})
    usage = group.usage
    accepted: list[OffsetRecord] = []
    reserved_offsets = reserved_bytes = 0
    topics = []
    for topic in req.topics:
        held = committed.get(topic.name, {})
        results = []
        for p in topic.partitions:
            metadata = p.committed_metadata or ""
            if len(metadata) > max_bytes // 4 and len(metadata.encode("utf-8")) > max_bytes:
                results.append(PartitionResult(p.partition_index, Error.OFFSET_METADATA_TOO_LARGE))
                continue
            old = held.get(p.partition_index)
            delta = offset_bytes(topic.name, metadata) - (0 if old is None else offset_bytes(topic.name, old.metadata))
            if refuse_offset(core, group, old is None, delta):
                results.append(PartitionResult(p.partition_index, Error.INVALID_COMMIT_OFFSET_SIZE))
                continue
            grows = max(delta, 0)
            new = int(old is None)
            usage.reserved_offsets += new
            usage.reserved_offset_bytes += grows
            group.charge(grows)
            reserved_offsets += new
            reserved_bytes += grows
            results.append(PartitionResult(p.partition_index, Error.NONE))
            epoch = -1 if p.committed_leader_epoch is None else p.committed_leader_epoch
            value = OffsetAndMetadata(p.committed_offset, metadata, epoch, core.now_ms)
            accepted.append(OffsetRecord(group.group_id, topic.name, p.partition_index, value))
        topics.append(TopicResults(topic.name, tuple(results)))
    return accepted, (reserved_offsets, reserved_bytes), tuple(topics)


def _release(group: Group, reserved: Reservation) -> None:
    offsets, size = reserved
    group.usage.reserved_offsets -= offsets
    group.usage.reserved_offset_bytes -= size
    group.charge(-size)


def _is_vacant(core: CoreState, group: Group) -> bool:
    return (
        group.state is EMPTY
        and not group.members
        and not group.pending_join_members
        and not group.has_expected_instance_ids
        and group.group_id not in core.offsets
    )


def validate_offset_commit(core: CoreState, group: Group, req: OffsetCommitRequest) -> Error | None:
    generation_id = req.effective_generation_id
    if generation_id < 0 and group.state is EMPTY:
        return None  # admin client or a consumer without group management
    if generation_id >= 0 or req.member_id or req.group_instance_id is not None:
        error = validate_member(core, group, req.effective_member_id, req.group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return Error.ILLEGAL_GENERATION
    elif group.state is not EMPTY:
        return Error.UNKNOWN_MEMBER_ID  # v0-style commits only while the group is empty
    if group.state is COMPLETING_REBALANCE:
        return Error.REBALANCE_IN_PROGRESS
    return None


def apply_offset(core: CoreState, record: OffsetRecord) -> None:
    """Apply a committed (or replayed) offset record; a tombstone removes the offset. An offset of a group the core
    does not hold creates it (a simple group), as a reload of the same records would."""
    group = core.groups.get(record.group_id)
    if group is None and record.value is not None:
        group = Group(record.group_id, core.now_ms)
        core.register(group)
    topics = core.offsets.get(record.group_id)
    partitions = topics.get(record.topic) if topics is not None else None
    old = partitions.get(record.partition) if partitions is not None else None
    if record.value is None:
        if old is None or partitions is None or topics is None:
            return
        del partitions[record.partition]
        if not partitions:
            del topics[record.topic]
        if not topics:
            del core.offsets[record.group_id]
    else:
        if partitions is None:
            partitions = core.offsets.setdefault(record.group_id, {}).setdefault(record.topic, {})
        partitions[record.partition] = record.value
    if group is not None:
        _count(group, record.topic, old, record.value)


def _count(group: Group, topic: str, old: OffsetAndMetadata | None, new: OffsetAndMetadata | None) -> None:
    before = 0 if old is None else offset_bytes(topic, old.metadata)
    after = 0 if new is None else offset_bytes(topic, new.metadata)
    group.usage.offset_count += (new is not None) - (old is not None)
    group.usage.offset_bytes += after - before
    group.charge(after - before)


# ------------------------------------------------------------------------------------------------------ fetch


def fetch_offsets(
    core: CoreState,
    group_id: GroupId,
    topics: tuple[str, ...] | None,
    after: TopicPartition | None = None,
    limit: int = FETCH_DEFAULT_LIMIT,
) -> OffsetFetchResponse:
    """One page of the group's committed offsets: of ``topics`` (every committed topic when None), from the cursor
    on (after its partition of its topic; partition -1: the whole topic), at most ``limit`` partitions and
    ``offset_fetch_page_max_bytes`` stored bytes (but one); ``next`` is the cursor of the rest (None: no rest)."""
    if group_id_too_long(group_id):
        return OffsetFetchResponse(
            Error.INVALID_GROUP_ID, topics=tuple(FetchedTopic(t, ()) for t in dict.fromkeys(topics or ()))
        )
    committed = core.offsets.get(group_id, {})
    names = sorted(committed) if topics is None else list(dict.fromkeys(topics))
    start, after_partition = _start(names, topics is None, after)
    budget = core.config.offset_fetch_page_max_bytes
    page: list[FetchedTopic] = []
    taken = count = 0
    for index in range(start, len(names)):
        name = names[index]
        held = committed.get(name, {})
        first = after_partition + 1 if index == start else 0
        partitions: list[FetchedPartition] = []
        for partition in sorted(p for p in held if p >= first) if first else sorted(held):
            o = held[partition]
            size = offset_bytes(name, o.metadata)
            if count and (count >= limit or taken + size > budget):
                if partitions:
                    page.append(FetchedTopic(name, tuple(partitions)))
                    cursor = fetch_cursor(name, partitions[-1].partition_index)
                else:
                    cursor = fetch_cursor(name, -1)  # the rest starts with this topic
                return OffsetFetchResponse(Error.NONE, topics=tuple(page), next=cursor)
            count += 1
            taken += size
            epoch = -1 if o.leader_epoch is None else o.leader_epoch
            partitions.append(FetchedPartition(partition, o.offset, epoch, o.metadata or ""))
        page.append(FetchedTopic(name, tuple(partitions)))
    return OffsetFetchResponse(Error.NONE, topics=tuple(page))


def _start(names: list[str], every_topic: bool, after: TopicPartition | None) -> tuple[int, int]:
    """Where a page starts: the index of its first topic and the partition of that topic it continues after."""
    if after is None:
        return 0, -1
    topic, partition = after
    if every_topic:
        index = bisect_left(names, topic)
        if index == len(names) or names[index] != topic:
            return index, -1  # that topic has no offsets any more: on with the next one
        return index, partition
    if topic in names:
        return names.index(topic), partition
    return len(names), -1  # not a topic asked for: nothing follows it
