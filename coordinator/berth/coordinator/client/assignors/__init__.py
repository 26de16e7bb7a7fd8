"""The partition assignors a group leader runs: ``range``, ``roundrobin`` and ``sticky``.

All order members by ``group.instance.id`` first (KIP-345), so static members keep their partitions across
restarts; see ``base`` for the shared rules and each module for its algorithm. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from berth.coordinator.client.assignors.base import (
    Assignor,
    AssignorMember,
    MemberId,
    TopicPartition,
    kip345_order_key,
    order_members,
)
from berth.coordinator.client.assignors.range_assignor import RangeAssignor
from berth.coordinator.client.assignors.round_robin import RoundRobinAssignor
from berth.coordinator.client.assignors.sticky import StickyAssignor

#: Every assignor by its protocol name.
ASSIGNORS: Final[Mapping[str, Assignor]] = MappingProxyType(
    {assignor.name: assignor for assignor in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor())}
)


def assignor_by_name(name: str) -> Assignor:
    """The assignor whose protocol name is ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; known: {', '.join(sorted(ASSIGNORS))}") from None


__all__ = [
    "ASSIGNORS",
    "Assignor",
    "AssignorMember",
    "MemberId",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "TopicPartition",
    "assignor_by_name",
    "kip345_order_key",
    "order_members",
]
