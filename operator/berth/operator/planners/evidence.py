"""What the operator observes of a Kafka fleet's group, per instance id, as journal events the pipeline reads.

Kafka keeps no membership journal, so the operator writes one (docs/formats.md, "Kafka evidence"): from one
describe to the next it sees static members come back under a new member id (a restart: ``static_member_replaced``
with ``offline_ms``), members appear (``member_joined``) or vanish without its removal (``member_expired``), the
group rebalance (``rebalance_started``), and it records its own removals (``member_left`` via ``admin``). Rules:

- Pure: a state and an observation in, the next state and events out; time is a parameter (ms since the epoch).
- ``offline_ms`` is what the platform recorded of the restart when it knows it: from the end of the member's
  previous process (a restarted container's ``finishedAt``, else the replacement pod's creation, by which the
  previous pod had gone) to the start of its current one (``startedAt``), at Kubernetes' 1 s resolution and
  without the new process's own time to rejoin; where the pod's times do not describe this restart (none given,
  or the pod started before the old member was last seen), it is measured between the last describe that showed
  the old member id and the first that shows the new one, which over-estimates a restart by up to one
  observation interval. A ``member_expired`` carries ``offline_ms`` as the upper bound the describes give, where the
  session timeout is known: from a session timeout before the last describe that listed it (its session was alive
  then). Events carry generation -1 (classic Kafka groups have none to give).
- A rebalance seen comes right after the member event that caused it (the first member that came or went in the
  same describe), as in the coordinator's journal; with no member change seen, its cause is ``unknown`` and it names
  nobody.
- Events are the coordinator journal's (``berth.coordinator.formats.journal``, declared once for the core, this
  module and the pipeline), marked ``source: operator``; they carry no ``seq``: the journal that stores them
  numbers them. Their ``group_id`` is the group's advice key (``planners.advice.group_key``:
  ``kafka://<cluster>/<group>``), never the bare group id, so another coordinator's group of the same name is
  never mistaken for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Unpack

from berth.coordinator.formats.journal import (
    EventFields,
    EventHeader,
    EventSource,
    EventType,
    ExpiryPhase,
    JournalEvent,
    LeaveVia,
    ObservedCause,
    RebalanceCause,
)
from berth.operator.planners.observations import GroupDescription, PodTimes

#: One journal event as the operator writes it: the coordinator's declaration (docs/formats.md).
EvidenceEvent = JournalEvent

REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance"})


@dataclass(frozen=True, slots=True)
class Seen:
    member_id: str
    last_seen_ms: int


@dataclass(frozen=True, slots=True)
class EvidenceState:
    """What the last observation of one group showed (kept in memory per fleet)."""

    members: Mapping[str, Seen] = field(default_factory=dict)  # instance id -> its member id, when last seen
    rebalancing: bool = False
    observed: bool = False  # at least one describe was seen (the first one only sets the baseline)


def observe_group(
    state: EvidenceState,
    description: GroupDescription,
    *,
    now_ms: int,
    key: str,
    pods: Mapping[str, PodTimes] | None = None,
    session_timeout_ms: int | None = None,
) -> tuple[EvidenceState, list[EvidenceEvent]]:
    """Compare one describe with the last; the events it shows (``key``: what the events name the group; ``pods``:
    the fleet's pods' times, by name; ``session_timeout_ms``: the members' session timeout, where known)."""
    group = key
    current = {m.group_instance_id: m.member_id for m in description.members if m.group_instance_id}
    events: list[EvidenceEvent] = []
    causes: list[tuple[RebalanceCause, int]] = []  # each cause seen, and where its event is in ``events``
    if state.observed:
        for instance_id, member_id in sorted(current.items()):
            before = state.members.get(instance_id)
            if before is None:
                joined = _event(
                    group, now_ms, EventType.MEMBER_JOINED, instance_id, member_id, static=True, client_id=""
                )
                causes.append((RebalanceCause.NEW_MEMBER, len(events)))
                events.append(joined)
            elif before.member_id != member_id:
                events.append(
                    _event(
                        group,
                        now_ms,
                        EventType.STATIC_MEMBER_REPLACED,
                        instance_id,
                        member_id,
                        old_member_id=before.member_id,
                        offline_ms=offline_ms(before, (pods or {}).get(instance_id), now_ms),
                        rebalance=False,
                    )
                )
        for instance_id, before in sorted(state.members.items()):
            if instance_id not in current:
                expired = _event(
                    group, now_ms, EventType.MEMBER_EXPIRED, instance_id, before.member_id, phase=ExpiryPhase.SESSION
                )
                if session_timeout_ms is not None:
                    # Its session was alive at the last describe that listed it: heard from within one session
                    # timeout before that, at the earliest.
                    expired["offline_ms"] = now_ms - before.last_seen_ms + session_timeout_ms
                causes.append((RebalanceCause.MEMBER_EXPIRED, len(events)))
                events.append(expired)
    rebalancing = description.state in REBALANCING
    if rebalancing and not state.rebalancing and state.observed:
        # Right after the event of its first cause, as the coordinator writes it (``planners.restarts`` attributes
        # a rebalance to the member event before it); at the end when no member change was seen.
        cause, at = causes[0] if causes else (ObservedCause.UNKNOWN, len(events) - 1)
        events.insert(at + 1, _group_event(group, now_ms, EventType.REBALANCE_STARTED, cause=cause))
    members = {instance_id: Seen(member_id, now_ms) for instance_id, member_id in current.items()}
    return EvidenceState(members, rebalancing, True), events


def removal_events(
    state: EvidenceState, group_id: str, results: Mapping[str, str], *, everyone: bool, now_ms: int
) -> tuple[EvidenceState, list[EvidenceEvent]]:
    """The operator's batch removal: ``member_left`` via admin per removed id, and the rebalance it causes."""
    removed = sorted(instance_id for instance_id, outcome in results.items() if outcome == "NONE")
    events = [
        _event(
            group_id,
            now_ms,
            EventType.MEMBER_LEFT,
            instance_id,
            state.members[instance_id].member_id if instance_id in state.members else "",
            via=LeaveVia.ADMIN,
        )
        for instance_id in removed
    ]
    remaining = {i: seen for i, seen in state.members.items() if i not in removed}
    rebalancing = state.rebalancing
    if removed and not everyone and remaining:
        events.append(_group_event(group_id, now_ms, EventType.REBALANCE_STARTED, cause=RebalanceCause.MEMBER_LEFT))
        rebalancing = True
    if removed and not remaining:
        events.append(_group_event(group_id, now_ms, EventType.GROUP_EMPTIED))
    return EvidenceState(remaining, rebalancing, state.observed), events


def offline_ms(before: Seen, times: PodTimes | None, now_ms: int) -> int:
    """How long the instance id was without a process across the restart just seen (see the module's rules)."""
    if times is not None:
        started, ended = _ms(times.started), _ms(times.previous_end)
        # 1 s of slack: Kubernetes truncates its times to the second.
        if started >= before.last_seen_ms - 1_000 and started <= now_ms + 1_000 and ended <= started:
            return started - ended
    return max(0, now_ms - before.last_seen_ms)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _group_event(group_id: str, ts_ms: int, kind: EventType, **extra: Unpack[EventFields]) -> EvidenceEvent:
    header: EventHeader = {"ts_ms": ts_ms, "group_id": group_id, "type": kind, "generation_id": -1}
    return {**header, "source": EventSource.OPERATOR, **extra}


def _event(
    group_id: str, ts_ms: int, kind: EventType, instance_id: str, member: str, **extra: Unpack[EventFields]
) -> EvidenceEvent:
    event = _group_event(group_id, ts_ms, kind, **extra)
    event["member_id"] = member
    event["group_instance_id"] = instance_id
    return event


def numbered(events: Sequence[EvidenceEvent], after_seq: int) -> list[EvidenceEvent]:
    """The events with ``seq`` after ``after_seq``, in order (a journal's numbering)."""
    return [{"seq": after_seq + index, **event} for index, event in enumerate(events, start=1)]


def encode_line(event: EvidenceEvent) -> str:
    """One event as a journal line (without its newline): compact JSON, keys sorted."""
    return json.dumps(event, separators=(",", ":"), sort_keys=True)
