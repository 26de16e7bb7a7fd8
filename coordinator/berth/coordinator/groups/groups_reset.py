"""``berth-groups reset-offsets``: which partitions a reset names, and the offsets it moves them to.

Owns ``parse_topic`` (``T`` or ``T:0,1,4-7``), ``ResetMethod`` and ``plan_reset``. Rules (docs/member-library.md,
"Resetting offsets"):

- Berth's coordinator keeps committed offsets, not the logs they point into, so the log's start and end are not
  known here. ``--to-earliest`` is offset 0, the lowest offset any log has (a Kafka topic whose retention dropped
  its first segments starts later: a consumer given 0 there gets OFFSET_OUT_OF_RANGE and applies its
  ``auto.offset.reset``). ``--to-latest`` is refused (``LATEST_REFUSAL``): the log-end offset is not knowable here,
  and no stand-in (such as the highest committed offset) would be the log's end.
- ``--shift-by N`` moves each committed offset by N and clamps at 0, as Kafka clamps to the log's start (it would
  also clamp to the log's end; that end is not known here, so a positive shift is not capped).
- ``--shift-by`` and ``--to-current`` need a committed offset on every partition they name (Kafka refuses a shift
  without one too, and takes the log's end for ``--to-current``, which is not known here).
- A topic without partitions names the partitions the group has committed offsets for (Kafka asks the cluster for
  the topic's partitions; the coordinator does not know them): name partitions to reset ones never committed.
- Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from berth.coordinator.protocol import TopicPartition

Method = Literal["to-earliest", "to-latest", "to-offset", "shift-by", "to-current"]

#: The offset ``--to-earliest`` commits: the lowest a log has; see the module's rules.
EARLIEST_OFFSET: Final = 0
#: The highest offset a commit carries (int64).
MAX_OFFSET: Final = 2**63 - 1

LATEST_REFUSAL: Final = (
    "--to-latest: Berth's coordinator keeps committed offsets, not the logs, so a partition's latest (log-end) "
    "offset is not known here; look it up where the log is (kafka-get-offsets.sh --time -1) and use --to-offset N"
)


class ResetError(ValueError):
    """A reset that cannot be planned: one line for the user."""


@dataclass(frozen=True)
class TopicSelection:
    """``--topic T`` (``partitions`` None: the committed ones) or ``--topic T:0,1``."""

    topic: str
    partitions: tuple[int, ...] | None


@dataclass(frozen=True)
class ResetMethod:
    method: Method
    value: int = 0  # the offset of --to-offset, the delta of --shift-by


@dataclass(frozen=True)
class PlannedReset:
    """One partition's move: its committed offset (None: none yet) and the one the reset commits."""

    topic: str
    partition: int
    current: int | None
    new: int


def parse_topic(text: str) -> TopicSelection:
    """``orders``, ``orders:0,1,2`` or ``orders:0-3,7`` (Kafka's ``--topic`` form, with ranges)."""
    topic, colon, spec = text.partition(":")
    if not topic:
        raise ResetError(f"--topic {text!r}: no topic name (expected TOPIC or TOPIC:0,1,2)")
    if not colon:
        return TopicSelection(topic, None)
    numbers: set[int] = set()
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ResetError(f"--topic {text!r}: partitions are numbers, e.g. {topic}:0,1,2 or {topic}:0-3")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise ResetError(f"--topic {text!r}: the range {part.strip()} is empty")
        if high - low >= 100_000:
            raise ResetError(f"--topic {text!r}: the range {part.strip()} is over 100,000 partitions")
        numbers.update(range(low, high + 1))
    return TopicSelection(topic, tuple(sorted(numbers)))


def selected_partitions(
    selections: Sequence[TopicSelection] | None, committed: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    """The partitions to reset: ``selections`` (None: every committed partition, ``--all-topics``)."""
    if selections is None:
        if not committed:
            raise ResetError("--all-topics: the group has no committed offsets (name partitions: --topic T:0,1)")
        return sorted(committed)
    chosen: set[TopicPartition] = set()
    for selection in selections:
        if selection.partitions is not None:
            chosen.update((selection.topic, p) for p in selection.partitions)
            continue
        of_topic = {tp for tp in committed if tp[0] == selection.topic}
        if not of_topic:
            raise ResetError(
                f"--topic {selection.topic}: the group has no committed offsets for this topic, and the coordinator "
                f"does not know its partitions: name them, e.g. --topic {selection.topic}:0,1,2"
            )
        chosen.update(of_topic)
    return sorted(chosen)


def plan_reset(
    partitions: Sequence[TopicPartition], committed: Mapping[TopicPartition, int], how: ResetMethod
) -> list[PlannedReset]:
    """The new offset of every partition, or ``ResetError`` naming the partitions that have none."""
    if how.method == "to-latest":
        raise ResetError(LATEST_REFUSAL)
    if how.method in ("shift-by", "to-current"):
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            names = ", ".join(f"{topic}:{partition}" for topic, partition in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise ResetError(f"--{how.method}: no committed offset to start from on {names}{more}")
    return [
        PlannedReset(topic, partition, committed.get((topic, partition)), _new(committed.get((topic, partition)), how))
        for topic, partition in partitions
    ]


def _new(current: int | None, how: ResetMethod) -> int:
    if how.method == "to-earliest":
        return EARLIEST_OFFSET
    if how.method == "to-offset":
        return how.value
    assert current is not None  # plan_reset refused partitions without one
    if how.method == "shift-by":
        return min(MAX_OFFSET, max(EARLIEST_OFFSET, current + how.value))
    return current  # to-current
