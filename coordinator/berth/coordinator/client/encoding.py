"""The member library's subscription and assignment bytes (protocol type ``consumer``, docs/formats.md).

Owns ``Subscription`` (a join's ``protocols[].metadata``) and ``Assignment`` (a sync's ``assignments[].assignment``)
and their encoding: compact UTF-8 JSON (``separators=(",", ":")``, ``sort_keys=True``, non-ASCII kept as UTF-8),
``version`` 1. Rules:

- Values are normalised when built: topics and partition numbers sorted and de-duplicated (they are sets), the
  per-topic mappings read-only. So equal values encode to equal bytes and decode(encode(x)) == x.
- Readers accept any ``version >= 1`` that carries the fields and ignore fields they do not know, so a newer
  writer can add fields without breaking older members.
- Bytes that are not this encoding raise ``EncodingError``: callers count them as "unknown", never guess. The one
  exception: empty bytes are an empty assignment, because that is what the coordinator hands a member the leader
  gave nothing (or whose sync was answered before any assignment existed).
- Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TypeGuard

#: The version this library writes. Readers accept this and anything newer.
ENCODING_VERSION: Final = 1


class EncodingError(ValueError):
    """Bytes that are not the member library's subscription or assignment encoding."""


@dataclass(frozen=True)
class Subscription:
    """What a member asks for in a join: its topics and, for the sticky assignor, the partitions it holds now."""

    topics: tuple[str, ...]
    owned_partitions: Mapping[str, tuple[int, ...]]
    user_data: str | None = None

    def __post_init__(self) -> None:
        # frozen: normalise through object.__setattr__, the documented way for frozen dataclasses.
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))
        object.__setattr__(self, "owned_partitions", _frozen_partitions(self.owned_partitions))

    def __hash__(self) -> int:
        return hash((self.topics, tuple(self.owned_partitions.items()), self.user_data))

    def __repr__(self) -> str:
        return (
            f"Subscription(topics={self.topics!r}, owned_partitions={dict(self.owned_partitions)!r}, "
            f"user_data={self.user_data!r})"
        )


@dataclass(frozen=True)
class Assignment:
    """The partitions the leader gives one member, per topic."""

    partitions: Mapping[str, tuple[int, ...]]
    user_data: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _frozen_partitions(self.partitions))

    def __hash__(self) -> int:
        return hash((tuple(self.partitions.items()), self.user_data))

    def __repr__(self) -> str:
        return f"Assignment(partitions={dict(self.partitions)!r}, user_data={self.user_data!r})"

    @property
    def partition_count(self) -> int:
        return sum(len(numbers) for numbers in self.partitions.values())


def encode_subscription(subscription: Subscription) -> bytes:
    return _dump(
        {
            "version": ENCODING_VERSION,
            "topics": list(subscription.topics),
            "owned_partitions": _partitions_document(subscription.owned_partitions),
            "user_data": subscription.user_data,
        }
    )


def encode_assignment(assignment: Assignment) -> bytes:
    return _dump(
        {
            "version": ENCODING_VERSION,
            "partitions": _partitions_document(assignment.partitions),
            "user_data": assignment.user_data,
        }
    )


def decode_subscription(data: bytes) -> Subscription:
    document = _load(data, "subscription")
    topics = document.get("topics")
    if not isinstance(topics, list) or not all(isinstance(topic, str) for topic in topics):
        raise EncodingError("not a Berth subscription: 'topics' must be a list of strings")
    return Subscription(
        topics=tuple(topics),
        owned_partitions=_read_partitions(document, "owned_partitions", "subscription"),
        user_data=_read_user_data(document, "subscription"),
    )


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment(partitions={})
    document = _load(data, "assignment")
    return Assignment(
        partitions=_read_partitions(document, "partitions", "assignment"),
        user_data=_read_user_data(document, "assignment"),
    )


def _frozen_partitions(partitions: Mapping[str, Iterable[int]]) -> Mapping[str, tuple[int, ...]]:
    normalised: dict[str, tuple[int, ...]] = {}
    for topic in sorted(partitions):
        numbers = tuple(sorted(set(partitions[topic])))
        if numbers and numbers[0] < 0:
            raise ValueError(f"partition numbers are never negative: {topic!r} has {numbers[0]}")
        normalised[topic] = numbers
    return MappingProxyType(normalised)


def _partitions_document(partitions: Mapping[str, tuple[int, ...]]) -> dict[str, list[int]]:
    return {topic: list(numbers) for topic, numbers in partitions.items()}


def _dump(document: dict[str, object]) -> bytes:
    text = json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate in a topic or user_data: not representable in UTF-8
        raise EncodingError(f"text is not encodable as UTF-8: {error}") from error


def _load(data: bytes, kind: str) -> dict[str, object]:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise EncodingError(f"not a Berth {kind}: not UTF-8 JSON ({error})") from error
    if not isinstance(document, dict):
        raise EncodingError(f"not a Berth {kind}: expected a JSON object, got {type(document).__name__}")
    version = document.get("version")
    if not _is_int(version) or version < ENCODING_VERSION:
        raise EncodingError(f"not a Berth {kind}: 'version' must be an integer >= {ENCODING_VERSION}, got {version!r}")
    return document


def _read_partitions(document: Mapping[str, object], field: str, kind: str) -> dict[str, tuple[int, ...]]:
    value = document.get(field)
    if not isinstance(value, dict):
        raise EncodingError(f"not a Berth {kind}: {field!r} must be an object of topic to partition list")
    partitions: dict[str, tuple[int, ...]] = {}
    for topic, numbers in value.items():
        if not isinstance(numbers, list) or not all(_is_int(number) and number >= 0 for number in numbers):
            raise EncodingError(f"not a Berth {kind}: {field}[{topic!r}] must be a list of partition numbers >= 0")
        partitions[topic] = tuple(numbers)
    return partitions


def _read_user_data(document: Mapping[str, object], kind: str) -> str | None:
    if "user_data" not in document:
        raise EncodingError(f"not a Berth {kind}: 'user_data' is missing (null when unused)")
    user_data = document["user_data"]
    if user_data is not None and not isinstance(user_data, str):
        raise EncodingError(f"not a Berth {kind}: 'user_data' must be a string or null")
    return user_data


def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass in Python, but true/false are not partition numbers or versions.
    return isinstance(value, int) and not isinstance(value, bool)


def read_subscription(data: bytes) -> Subscription | None:
    """A subscription as described by the coordinator, or None when it is not the Berth encoding (never guessed)."""
    try:
        return decode_subscription(data)
    except EncodingError:
        return None


def read_assignment(data: bytes) -> Assignment | None:
    """An assignment as described by the coordinator (empty before the first sync), or None when it is not the
    Berth encoding."""
    try:
        return decode_assignment(data)
    except EncodingError:
        return None
