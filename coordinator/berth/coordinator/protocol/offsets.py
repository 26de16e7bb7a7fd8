"""OffsetCommit (8) and OffsetFetch (9), and ``OffsetAndMetadata``: a partition's committed position.

``OffsetAndMetadata`` is Kafka's: what a member commits for one partition, and what the coordinator keeps for it
(with the time it accepted the commit). Group-level errors are set on every partition and at the top level
(docs/api.md §11). An offset fetch is answered in pages (docs/api.md §4): ``next`` is the cursor of the rest, made
and read by ``fetch_cursor`` and ``parse_fetch_cursor`` (opaque to clients, which pass it back as ``?after=``).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

import msgspec
from msgspec import Meta

from berth.coordinator.protocol.base import (
    Answer,
    ApiVersion,
    Body,
    Int32,
    Int64,
    InvalidRequest,
    NamedError,
    NonNegativeInt32,
)
from berth.coordinator.protocol.errors import Error
from berth.coordinator.protocol.ids import InstanceId, MemberId
from berth.coordinator.protocol.limits import INT32_MAX, UNBOUNDED, Limits
from berth.coordinator.protocol.versions import (
    COMMIT_LEADER_EPOCH_VERSION,
    COMMIT_MEMBER_FIELDS_VERSION,
    COMMIT_STATIC_MEMBERSHIP_VERSION,
    Since,
)

TopicPartition = tuple[str, int]


class OffsetAndMetadata(msgspec.Struct, frozen=True, gc=False):
    """A committed position: the next offset to consume, optional metadata and leader epoch.

    ``commit_timestamp_ms`` is set by the coordinator when it accepts the commit (-1 until then).
    """

    offset: int
    metadata: str | None = None
    leader_epoch: int | None = None
    commit_timestamp_ms: int = -1


# ----------------------------------------------------------------------------------------------------- commit


class CommitPartition(Body, frozen=True):
    partition_index: NonNegativeInt32
    committed_offset: Int64
    committed_leader_epoch: Annotated[Int32 | None, Since(COMMIT_LEADER_EPOCH_VERSION)] = None
    committed_metadata: Annotated[
        str | None,
        UNBOUNDED,
        Meta(description="above offset_metadata_max_bytes (UTF-8): OFFSET_METADATA_TOO_LARGE for this partition"),
    ] = None


class CommitTopic(Body, frozen=True):
    name: str
    partitions: tuple[CommitPartition, ...]


class OffsetCommitRequest(Body, frozen=True):
    topics: tuple[CommitTopic, ...]
    api_version: ApiVersion = None
    generation_id: Annotated[
        Int32 | None, Since(COMMIT_MEMBER_FIELDS_VERSION), Meta(description="absent: -1, a simple commit")
    ] = None
    member_id: Annotated[MemberId | None, Since(COMMIT_MEMBER_FIELDS_VERSION)] = None
    group_instance_id: Annotated[InstanceId | None, Since(COMMIT_STATIC_MEMBERSHIP_VERSION)] = None

    @property
    def effective_generation_id(self) -> int:
        return -1 if self.generation_id is None else self.generation_id

    @property
    def effective_member_id(self) -> MemberId:
        return self.member_id or MemberId("")

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics)

    def validate(self, version: int, limits: Limits) -> None:
        total = self.partition_count()
        if total > limits.max_list_items:
            raise InvalidRequest(f"topics: {total} partitions is more than the limit of {limits.max_list_items}")


class PartitionResult(NamedError):
    partition_index: int
    error: Error = msgspec.field(name="error_code")


class TopicResults(msgspec.Struct, gc=False):
    name: str
    partitions: tuple[PartitionResult, ...]


class OffsetCommitResponse(Answer):
    topics: tuple[TopicResults, ...] = ()

    def errors_by_partition(self) -> dict[TopicPartition, Error]:
        return {(t.name, p.partition_index): p.error for t in self.topics for p in t.partitions}

    @classmethod
    def refusing(cls, request: OffsetCommitRequest, error: Error) -> OffsetCommitResponse:
        """A group-level error: at the top level and on every partition of the request (docs/api.md §11)."""
        return cls(
            error,
            topics=tuple(
                TopicResults(t.name, tuple(PartitionResult(p.partition_index, error) for p in t.partitions))
                for t in request.topics
            ),
        )


# ------------------------------------------------------------------------------------------------------ fetch


class FetchedPartition(NamedError):
    """One partition's committed offset as fetched (``error`` NONE unless the partition could not be read)."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: Annotated[int, Meta(description="-1: none")] = -1
    metadata: str = ""
    error: Error = msgspec.field(default=Error.NONE, name="error_code")

    @property
    def offset(self) -> int:
        return self.committed_offset

    @property
    def leader_epoch(self) -> int | None:
        return self.committed_leader_epoch if self.committed_leader_epoch >= 0 else None


class FetchedTopic(msgspec.Struct, gc=False):
    name: str
    partitions: tuple[FetchedPartition, ...]


class OffsetFetchResponse(Answer):
    topics: tuple[FetchedTopic, ...] = ()
    next: Annotated[
        str | None,
        Meta(description="Berth: the rest of the offsets start after this cursor (pass it as ?after=); null: none"),
    ] = None

    def by_partition(self) -> dict[TopicPartition, FetchedPartition]:
        return {(t.name, p.partition_index): p for t in self.topics for p in t.partitions}

    def followed_by(self, page: OffsetFetchResponse) -> OffsetFetchResponse:
        """This answer with the next page's offsets added (a topic split across pages is one topic again)."""
        merged: dict[str, list[FetchedPartition]] = {t.name: list(t.partitions) for t in self.topics}
        for topic in page.topics:
            merged.setdefault(topic.name, []).extend(topic.partitions)
        topics = tuple(FetchedTopic(name, tuple(partitions)) for name, partitions in merged.items())
        return OffsetFetchResponse(page.error, topics=topics, next=page.next)


#: Partitions in one page of an offset fetch: the default and most a client may ask for (``?limit=``).
FETCH_DEFAULT_LIMIT = 10_000
FETCH_MAX_LIMIT = 100_000

_cursor_encoder = msgspec.json.Encoder()
_cursor_decoder = msgspec.json.Decoder(tuple[str, Annotated[int, Meta(ge=-1, le=INT32_MAX)]])


def fetch_cursor(topic: str, partition: int) -> str:
    """The cursor of the offsets after (``topic``, ``partition``) in a fetch's order (-1: all of ``topic``)."""
    return base64.urlsafe_b64encode(_cursor_encoder.encode((topic, partition))).decode().rstrip("=")


def parse_fetch_cursor(text: str) -> TopicPartition:
    """The (topic, partition) a cursor continues after; ``InvalidRequest`` for what no coordinator made."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return _cursor_decoder.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise InvalidRequest("after: not a cursor an offset fetch answered (pass its next as it is)") from None
