"""What a member does when it leads a rebalance: decode the members' subscriptions and run the chosen assignor.

Owns ``subscription_for`` (what this member sends in its join) and ``assign_as_leader``. Rules:

- The leader knows partition counts only for the topics it is configured with (a Berth member is told them, as a
  Kafka leader learns them from broker metadata); the assignors skip topics without a count, as Kafka does.
- A member whose metadata is not the Berth encoding (another client's, or garbage) is assigned nothing and
  logged, never guessed at (docs/formats.md).
- Pure apart from logging: no I/O, no clock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from berth.coordinator.client.assignors import Assignor, AssignorMember
from berth.coordinator.client.encoding import (
    Assignment,
    EncodingError,
    Subscription,
    decode_subscription,
    encode_assignment,
)
from berth.coordinator.protocol import JoinMember

log = logging.getLogger("berth.client")


def subscription_for(topics: Mapping[str, int], owned: Assignment) -> Subscription:
    """The subscription a member joins with: its topics, and the partitions it held (sticky input)."""
    return Subscription(topics=tuple(topics), owned_partitions=dict(owned.partitions))


def assign_as_leader(
    assignor: Assignor, members: Sequence[JoinMember], partitions_per_topic: Mapping[str, int]
) -> dict[str, bytes]:
    """Every member's encoded assignment, keyed by member id, as the leader's sync carries them."""
    assignor_members = [
        AssignorMember(member.member_id, member.group_instance_id, _decoded_subscription(member)) for member in members
    ]
    assignments = assignor.assign(assignor_members, partitions_per_topic)
    return {member_id: encode_assignment(assignment) for member_id, assignment in assignments.items()}


def _decoded_subscription(member: JoinMember) -> Subscription:
    try:
        return decode_subscription(member.metadata)
    except EncodingError as error:
        log.warning(
            "member %s sent a subscription this library cannot read; it gets no partitions: %s", member.member_id, error
        )
        return Subscription(topics=(), owned_partitions={})
