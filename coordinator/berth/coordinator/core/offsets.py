"""OffsetCommit (8) and OffsetFetch (9) for classic groups (Kafka's OffsetMetadataManager).

Committed offsets become visible (to fetches) only once durable. A commit with generation -1 and no member
id is a "simple" commit, accepted only while the group is Empty, and creates the group if it does not exist.
Metadata longer than ``offset_metadata_max_bytes`` (UTF-8) is refused for its partition only
(OFFSET_METADATA_TOO_LARGE), as Kafka does; the other partitions of the commit are accepted.
"""

from __future__ import annotations

from berth.coordinator.core.expiry import group_limit_reached
from berth.coordinator.core.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, Group
from berth.coordinator.core.rebalance import reschedule_heartbeat, validate_member
from berth.coordinator.core.records import OffsetRecord
from berth.coordinator.core.state import CoreState
from berth.coordinator.protocol import (
    COMMIT_GROUP_ID_NOT_FOUND_VERSION,
    Error,
    FetchedPartition,
    FetchedTopic,
    GroupId,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionResult,
    TopicResults,
    group_id_too_long,
)

commit_error_response = OffsetCommitResponse.refusing


def handle_commit(core: CoreState, group_id: GroupId, req: OffsetCommitRequest, version: int, ticket: int) -> None:
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
        # A "simple" commit (admin client, or a consumer without group management): it will create an Empty
        # group, but only once some offset is accepted, so that no group exists that nothing persists.
        if group_limit_reached(core):
            core.reply(ticket, commit_error_response(req, Error.COORDINATOR_NOT_AVAILABLE))
            return
    else:
        error = validate_offset_commit(core, group, req)
        if error is not None:
            core.reply(ticket, commit_error_response(req, error))
            return
    if group is not None and group.state in (STABLE, PREPARING_REBALANCE):
        member = group.members[req.effective_member_id]
        member.last_heard_ms = core.now_ms
        reschedule_heartbeat(core, group, member)  # classic commits keep the session alive

    max_bytes = core.config.offset_metadata_max_bytes
    accepted: list[OffsetRecord] = []
    topics = []
    for topic in req.topics:
        results = []
        for p in topic.partitions:
            metadata = p.committed_metadata or ""
            if len(metadata) > max_bytes // 4 and len(metadata.encode("utf-8")) > max_bytes:
                results.append(PartitionResult(p.partition_index, Error.OFFSET_METADATA_TOO_LARGE))
                continue
            results.append(PartitionResult(p.partition_index, Error.NONE))
            epoch = -1 if p.committed_leader_epoch is None else p.committed_leader_epoch
            value = OffsetAndMetadata(p.committed_offset, metadata, epoch, core.now_ms)
            accepted.append(OffsetRecord(group_id, topic.name, p.partition_index, value))
        topics.append(TopicResults(topic.name, tuple(results)))
    response = OffsetCommitResponse(Error.NONE, topics=tuple(topics))
    if not accepted:
        core.reply(ticket, response)
        return
    if group is None:
        group = core.new_group(group_id)
        created = True

    for record in accepted:
        core.persist(record)

    def on_persisted() -> None:
        for record in accepted:
            apply_offset(core, record)
        core.reply(ticket, response)

    def on_failed() -> None:
        if created and core.groups.get(group_id) is group and _is_vacant(core, group):
            del core.groups[group_id]
        core.reply(ticket, commit_error_response(req, Error.COORDINATOR_NOT_AVAILABLE))

    core.when_persisted(on_persisted)
    core.when_persist_failed(on_failed)


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
    """Apply a committed (or replayed) offset record; a tombstone removes the offset."""
    if record.value is None:
        topics = core.offsets.get(record.group_id)
        partitions = topics.get(record.topic) if topics else None
        if partitions is None or topics is None:
            return
        partitions.pop(record.partition, None)
        if not partitions:
            del topics[record.topic]
        if not topics:
            del core.offsets[record.group_id]
        return
    core.offsets.setdefault(record.group_id, {}).setdefault(record.topic, {})[record.partition] = record.value


def fetch_offsets(core: CoreState, group_id: GroupId, topics: tuple[str, ...] | None) -> OffsetFetchResponse:
    if group_id_too_long(group_id):
        return OffsetFetchResponse(
            Error.INVALID_GROUP_ID, topics=tuple(FetchedTopic(t, ()) for t in dict.fromkeys(topics or ()))
        )
    committed = core.offsets.get(group_id, {})
    names = sorted(committed) if topics is None else list(dict.fromkeys(topics))
    return OffsetFetchResponse(
        Error.NONE,
        topics=tuple(
            FetchedTopic(
                name,
                tuple(
                    FetchedPartition(
                        index,
                        o.offset,
                        -1 if o.leader_epoch is None else o.leader_epoch,
                        o.metadata or "",
                    )
                    for index, o in sorted(committed.get(name, {}).items())
                ),
            )
            for name in names
        ),
    )
