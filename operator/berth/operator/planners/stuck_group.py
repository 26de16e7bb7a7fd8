"""Stuck-group detection: partitions of the group's topics that nobody owns, or Ready pods that own nothing while
others own several, for longer than a threshold (issue 30, "What to build 3").

A group can be silently stuck: no error anywhere, pods Ready, and partitions that nobody consumes (a rebalance that
never completes an assignment, a consumer that stopped polling and was dropped, an assignor that starves members).
Lag shows it late and only on Kafka; ownership shows it at once. Rules:

- Pure: the pass hands in the members' assignments (``GroupDescription``: ``topic:partition`` per member), the
  partitions known to exist (the group's committed partitions: Kafka's lag read, or on Berth's coordinator, which
  keeps offsets but no partition log, its committed offsets of the topics the members subscribe to
  (:func:`subscribed_topics`), at most :data:`KNOWN_MAX`), the Ready pods, the time and the threshold.
- **Unowned**: a known partition no member's assignment names, while the fleet has a member or a Ready pod (a fleet
  scaled to zero owns nothing and is not stuck). **Idle**: a Ready pod whose instance id holds no
  partition while another member holds two or more (a fleet larger than its partition count, where every busy
  member holds one, is not stuck: there is nothing to give the idle ones).
- Each has its own ``since`` (kept in ``status.stuck``, so a restarted operator goes on counting); a situation that
  clears resets it. ``GroupStuck`` is True once either has lasted ``threshold``, with the partitions or pods named
  (at most :data:`NAMED` of each); False otherwise (``PartitionsOwned``, or ``Unknown`` with ``NoAssignment`` while
  the group has no members to look at). ``again_at`` is when a pass must look again for the threshold to be seen
  on time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berth.operator.planners.conditions import Condition, format_time, parse_time
from berth.operator.planners.observations import GroupDescription

GROUP_STUCK = "GroupStuck"
STUCK = "stuck"
#: At most this many partitions or pods are named in status and messages.
NAMED = 10
#: At most this many committed partitions are read as known per pass where the coordinator keeps no partition log
#: (Berth's: one page of its offset fetch, the first by topic and partition); a group with more is judged on those.
KNOWN_MAX = 10_000


@dataclass(frozen=True, slots=True)
class StuckVerdict:
    unowned: tuple[str, ...]  # partitions nobody owns, sorted
    idle: tuple[str, ...]  # Ready pods that own nothing while others own several, sorted
    busiest: int  # the most partitions one member holds
    stuck: bool
    condition: Condition
    status: dict[str, Any] | None  # status.stuck (None: nothing to keep)
    again_at: datetime | None  # when the threshold is reached, if it is not yet


def owners(description: GroupDescription) -> dict[str, tuple[str, ...]]:
    """Each member's partitions by its instance id (or member id)."""
    return {(m.group_instance_id or m.member_id): tuple(m.assignment) for m in description.members}


def subscribed_topics(description: GroupDescription) -> frozenset[str] | None:
    """The topics the group's members subscribe to, where the coordinator says (None: no member's is known); the
    committed partitions of other topics (a topic the group no longer consumes) are not the group's to own."""
    topics = frozenset(topic for member in description.members for topic in member.subscribed)
    return topics or None


def membership(description: GroupDescription) -> tuple[int, str, frozenset[str]]:
    """What must change for a partition to lose its owner: the group's generation, its state (a member expired or
    left starts a rebalance at the same generation) and its members. The committed partitions (where a coordinator
    has no partition log) are read again only when this changes: a partition committed since was committed by its
    owner, and stays owned until it does."""
    return description.generation, description.state, frozenset(m.member_id for m in description.members)


def judge(
    description: GroupDescription,
    known_partitions: Iterable[str],
    ready_pods: Iterable[str],
    previous: Mapping[str, Any] | None,
    *,
    now: datetime,
    threshold: timedelta,
) -> StuckVerdict:
    held = owners(description)
    ready = set(ready_pods)
    owned = {p for partitions in held.values() for p in partitions}
    # Nobody to own them (no member, no Ready pod: scaled to zero, or not up): other conditions say why.
    unowned = tuple(sorted(set(known_partitions) - owned)) if held or ready else ()
    busiest = max((len(partitions) for partitions in held.values()), default=0)
    idle = tuple(sorted(pod for pod in ready if not held.get(pod))) if busiest >= 2 else ()
    before = previous or {}
    unowned_since = _since(before.get("unownedSince"), now) if unowned else None
    idle_since = _since(before.get("idleSince"), now) if idle else None
    due = [since + threshold for since in (unowned_since, idle_since) if since is not None]
    stuck = any(at <= now for at in due)
    again_at = min((at for at in due if at > now), default=None)
    if not description.members and not unowned:
        condition = Condition(GROUP_STUCK, "Unknown", "NoAssignment", "the group has no members to look at")
    elif stuck:
        condition = Condition(GROUP_STUCK, "True", _reason(unowned, idle), _message(unowned, idle, busiest, threshold))
    else:
        condition = Condition(GROUP_STUCK, "False", "PartitionsOwned", _calm(unowned, idle, threshold))
    status: dict[str, Any] | None = None
    if unowned or idle:
        status = {
            "unowned": list(unowned[:NAMED]),
            "unownedCount": len(unowned),
            "unownedSince": None if unowned_since is None else format_time(unowned_since),
            "idleReadyPods": list(idle[:NAMED]),
            "idleSince": None if idle_since is None else format_time(idle_since),
        }
    return StuckVerdict(unowned, idle, busiest, stuck, condition, status, again_at)


def _since(value: object, now: datetime) -> datetime:
    parsed = parse_time(value)
    return parsed if parsed is not None and parsed <= now else now


def _reason(unowned: tuple[str, ...], idle: tuple[str, ...]) -> str:
    return "PartitionsUnowned" if unowned else "ReadyPodsIdle"


def _named(items: tuple[str, ...]) -> str:
    shown = ", ".join(items[:NAMED])
    return shown + (f" and {len(items) - NAMED} more" if len(items) > NAMED else "")


def _message(unowned: tuple[str, ...], idle: tuple[str, ...], busiest: int, threshold: timedelta) -> str:
    parts = []
    if unowned:
        parts.append(f"{len(unowned)} partitions have had no owner for over {_seconds(threshold)}: {_named(unowned)}")
    if idle:
        parts.append(
            f"{len(idle)} Ready pods have owned no partition for over {_seconds(threshold)} while a member owns"
            f" {busiest}: {_named(idle)}"
        )
    return "; ".join(parts) + " (the group is stuck: see docs/monitoring.md#berthgroupstuck)"


def _calm(unowned: tuple[str, ...], idle: tuple[str, ...], threshold: timedelta) -> str:
    if not unowned and not idle:
        return "every known partition has an owner, and no Ready pod is idle while others own several"
    return f"partitions unowned or Ready pods idle for less than {_seconds(threshold)} so far"


def _seconds(threshold: timedelta) -> str:
    return f"{threshold.total_seconds():g} s"
