"""Synthetic journals for benchmarks: thousands of groups, millions of events, the coordinator's segment files.

Owns a small simulation of consumer fleets, one per group, merged in time order into JSON Lines segments named
like the coordinator's (``segment-<first seq, 20 digits>.jsonl``, rotated by size). Rules:
- Deterministic: the same ``SyntheticSpec`` writes the same bytes (each group draws from its own seeded RNG).
- Realistic enough to exercise every transform: mostly static fleets (10 % dynamic) whose members crash and come
  back after a log-normal gap (replaced in place when back within the session timeout, else expired and rejoined),
  rolling deployments, scale-ups and admin scale-downs, occasional static leaves; every rebalance is
  ``rebalance_started`` -> ``rebalance_completed`` -> ``assignment_stored`` with range assignments encoded as the
  member library does (docs/formats.md).
- For benchmarks only (``benchmarks/pipeline_bench.py``), so it lives with them and ships in no wheel; unit tests use
  small explicit journals instead.

``python -m benchmarks.synthetic --events 1000000 --groups 2000 --seed 1 --out DIR``
"""

from __future__ import annotations

import argparse
import base64
import heapq
import itertools
import json
import os
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
TOPICS = ("orders", "payments", "shipments", "clicks", "audit", "inventory")
PARTITION_COUNTS = (6, 12, 12, 24, 32, 48, 64)
# Mostly sized well, a few fleets on a tight 10 s timeout (where the advice pays off).
SESSION_TIMEOUTS_MS = (10_000, 30_000, 45_000, 45_000, 60_000)
HEARTBEAT_MS = 3_000

Event = dict[str, Any]


@dataclass(frozen=True)
class SyntheticSpec:
    events: int = 1_000_000
    groups: int = 2_000
    seed: int = 1
    dynamic_share: float = 0.1
    segment_bytes: int = 64 * 1024 * 1024


@dataclass
class _Slot:
    """One place in a fleet: a pod ordinal for static groups, a process for dynamic ones."""

    instance_id: str | None
    member_id: str
    alive: bool = True  # the process runs
    in_group: bool = True  # the coordinator counts it as a member (a crashed static member, until it expires)


@dataclass
class _Fleet:
    group_id: str
    rng: random.Random
    static: bool
    session_timeout_ms: int
    restart_median_ms: float
    crash_every_ms: float
    topics: dict[str, int]
    slots: list[_Slot] = field(default_factory=list)
    generation: int = 0
    last_ts: int = 0
    encoded: dict[tuple[str, ...], list[str]] = field(default_factory=dict)


@dataclass(order=True)
class _Action:
    ts: int
    tie: int
    name: str = field(compare=False)
    slot: int = field(default=-1, compare=False)
    gap_ms: int = field(default=0, compare=False)


class _Agenda:
    """The fleet's future: actions in time order."""

    def __init__(self) -> None:
        self._heap: list[_Action] = []
        self._tie = itertools.count()

    def at(self, ts: float, name: str, slot: int = -1, gap_ms: int = 0) -> None:
        heapq.heappush(self._heap, _Action(int(ts), next(self._tie), name, slot, gap_ms))

    def next(self) -> _Action:
        return heapq.heappop(self._heap)


def generate_events(spec: SyntheticSpec) -> Iterator[Event]:
    """The first ``spec.events`` events of all fleets, in time order, each with its ``seq``."""
    timelines = [_fleet_timeline(spec, g) for g in range(spec.groups)]
    merged = heapq.merge(*timelines)  # (ts, group index, n, event): ties never reach the dicts
    for seq, (_ts, _g, _n, event) in enumerate(itertools.islice(merged, spec.events), start=1):
        yield {"seq": seq, **event}


def write_segments(events: Iterator[Event], out_dir: str, segment_bytes: int) -> list[str]:
    """Write events as JSON Lines segments, rotated once a segment reaches ``segment_bytes``."""
    os.makedirs(out_dir, exist_ok=True)
    written: list[str] = []
    current = None
    size = 0
    try:
        for event in events:
            line = json.dumps(event, separators=(",", ":")) + "\n"
            if current is None or size >= segment_bytes:
                if current is not None:
                    current.close()
                path = os.path.join(out_dir, f"segment-{event['seq']:020d}.jsonl")
                current = open(path, "w", encoding="utf-8")  # noqa: SIM115 (rotated by hand)
                written.append(path)
                size = 0
            current.write(line)
            size += len(line)
    finally:
        if current is not None:
            current.close()
    return written


def _fleet_timeline(spec: SyntheticSpec, index: int) -> Iterator[tuple[int, int, int, Event]]:
    rng = random.Random(f"{spec.seed}:{index}")
    fleet = _Fleet(
        group_id=f"fleet-{index:05d}",
        rng=rng,
        static=rng.random() >= spec.dynamic_share,
        session_timeout_ms=rng.choice(SESSION_TIMEOUTS_MS),
        restart_median_ms=rng.uniform(4_000, 20_000),
        crash_every_ms=rng.uniform(6, 48) * HOUR,
        topics={t: rng.choice(PARTITION_COUNTS) for t in rng.sample(TOPICS, rng.randint(1, 3))},
    )
    counter = itertools.count()
    for ts, event in _simulate(fleet, start_ms=START_MS + rng.randrange(HOUR)):
        yield ts, index, next(counter), event


def _simulate(fleet: _Fleet, start_ms: int) -> Iterator[tuple[int, Event]]:
    """An endless life of one fleet; the merge stops reading once it has enough events."""
    rng = fleet.rng
    agenda = _Agenda()
    fleet.last_ts = start_ms
    yield from _emit(fleet, start_ms, "group_created")
    yield from _add_members(fleet, start_ms, rng.choice((2, 3, 4, 6, 8, 12, 16, 24, 32)))
    agenda.at(start_ms + rng.expovariate(len(fleet.slots) / fleet.crash_every_ms), "crash")
    agenda.at(start_ms + rng.uniform(12, 72) * HOUR, "deploy")
    agenda.at(start_ms + rng.uniform(48, 240) * HOUR, "scale")
    while True:
        action = agenda.next()
        ts, slot = action.ts, action.slot
        member = fleet.slots[slot] if 0 <= slot < len(fleet.slots) else None
        if action.name == "crash":
            alive = [i for i, s in enumerate(fleet.slots) if s.alive]
            if alive:
                yield from _go_away(fleet, ts, rng.choice(alive), agenda)
            agenda.at(ts + rng.expovariate(max(len(fleet.slots), 1) / fleet.crash_every_ms), "crash")
        elif action.name == "restart" and member is not None and member.alive:
            yield from _go_away(fleet, ts, slot, agenda)
        elif action.name == "replace" and member is not None and not member.alive and member.in_group:
            yield from _replace(fleet, ts, member, action.gap_ms)
        elif action.name == "expire" and member is not None and not member.alive and member.in_group:
            # Its session ran out a session timeout after it was last heard from, when it stopped.
            yield from _remove(
                fleet, ts, [member], "member_expired", phase="session", offline_ms=fleet.session_timeout_ms
            )
        elif action.name == "rejoin" and member is not None and not member.alive:
            yield from _rejoin(fleet, ts, member)
        elif action.name == "deploy":
            step = fleet.restart_median_ms + 10_000  # the next pod rolls once the previous one is ready
            for i in range(len(fleet.slots)):
                agenda.at(ts + i * step, "restart", i)
            agenda.at(ts + rng.uniform(12, 72) * HOUR, "deploy")
        elif action.name == "scale":
            yield from _scale(fleet, ts)
            agenda.at(ts + rng.uniform(48, 240) * HOUR, "scale")


def _go_away(fleet: _Fleet, ts: int, slot: int, agenda: _Agenda) -> Iterator[tuple[int, Event]]:
    """A member stops for a log-normal while; what the coordinator sees depends on how long and who it is."""
    rng = fleet.rng
    member = fleet.slots[slot]
    gap_ms = int(fleet.restart_median_ms * rng.lognormvariate(0, 0.45) * (4 if rng.random() < 0.02 else 1))
    member.alive = False
    if not fleet.static or rng.random() < 0.03:  # dynamic members, and now and then a static one, say goodbye
        yield from _remove(fleet, ts, [member], "member_left", via="leave")
        agenda.at(ts + gap_ms, "rejoin", slot)
    elif gap_ms < fleet.session_timeout_ms:
        agenda.at(ts + gap_ms, "replace", slot, gap_ms)
    else:
        agenda.at(ts + fleet.session_timeout_ms, "expire", slot)
        agenda.at(ts + gap_ms, "rejoin", slot)


def _replace(fleet: _Fleet, ts: int, member: _Slot, gap_ms: int) -> Iterator[tuple[int, Event]]:
    old_member_id = member.member_id
    member.member_id = _new_member_id(fleet, member.instance_id)
    member.alive = True
    rebalance = fleet.rng.random() < 0.03  # the restarted pod came back with new subscription metadata
    yield from _emit(
        fleet,
        ts,
        "static_member_replaced",
        member_id=member.member_id,
        group_instance_id=member.instance_id,
        old_member_id=old_member_id,
        # Last heard from at its last heartbeat, somewhat before it stopped.
        offline_ms=gap_ms + fleet.rng.randrange(HEARTBEAT_MS),
        rebalance=rebalance,
    )
    if rebalance:
        yield from _rebalance(fleet, ts, "static_replacement")


def _rejoin(fleet: _Fleet, ts: int, member: _Slot) -> Iterator[tuple[int, Event]]:
    yield from _join(fleet, ts, member)
    yield from _rebalance(fleet, ts, "new_member")


def _join(fleet: _Fleet, ts: int, member: _Slot) -> Iterator[tuple[int, Event]]:
    member.member_id = _new_member_id(fleet, member.instance_id)
    member.alive = member.in_group = True
    if member.instance_id is None:  # KIP-394: a dynamic member first gets its id handed out
        yield from _emit(fleet, ts, "member_id_required", member_id=member.member_id, group_instance_id=None)
    yield from _emit(
        fleet,
        ts,
        "member_joined",
        member_id=member.member_id,
        group_instance_id=member.instance_id,
        static=member.instance_id is not None,
        client_id="consumer",
    )


def _remove(
    fleet: _Fleet, ts: int, members: list[_Slot], event_type: str, **fields: Any
) -> Iterator[tuple[int, Event]]:
    for member in members:
        member.in_group = False
        yield from _emit(
            fleet, ts, event_type, member_id=member.member_id, group_instance_id=member.instance_id, **fields
        )
    cause = "member_expired" if event_type == "member_expired" else "member_left"
    yield from _rebalance(fleet, ts, cause)


def _add_members(fleet: _Fleet, ts: int, count: int) -> Iterator[tuple[int, Event]]:
    for _ in range(count):
        ordinal = len(fleet.slots)
        member = _Slot(f"{fleet.group_id}-{ordinal}" if fleet.static else None, "")
        fleet.slots.append(member)
        yield from _join(fleet, ts, member)
    yield from _rebalance(fleet, ts, "new_member")


def _scale(fleet: _Fleet, ts: int) -> Iterator[tuple[int, Event]]:
    rng = fleet.rng
    k = rng.randint(1, 3)
    if rng.random() < 0.5 and len(fleet.slots) + k <= 48:
        yield from _add_members(fleet, ts, k)
    elif len(fleet.slots) - k >= 2:
        departing = [s for s in fleet.slots[-k:] if s.in_group]
        del fleet.slots[-k:]  # the pods are gone before the operator's batch leave (docs/architecture.md, "Scaling")
        if departing:
            yield from _remove(fleet, ts, departing, "member_left", via="admin")


def _rebalance(fleet: _Fleet, ts: int, cause: str) -> Iterator[tuple[int, Event]]:
    rng = fleet.rng
    present = [s for s in fleet.slots if s.in_group]
    yield from _emit(fleet, ts, "rebalance_started", cause=cause)
    if not present:
        yield from _emit(fleet, ts, "group_emptied")
        return
    fleet.generation += 1
    joined_at = ts + int(rng.lognormvariate(5.5, 1.0))  # a few hundred ms for everyone to rejoin
    members = [{"member_id": s.member_id, "group_instance_id": s.instance_id} for s in present]
    yield from _emit(
        fleet,
        joined_at,
        "rebalance_completed",
        leader=present[0].member_id,
        protocol_name="range",
        members=members,
    )
    yield from _emit(
        fleet,
        joined_at + rng.randint(5, 120),
        "assignment_stored",
        member_id=present[0].member_id,
        assignments=_assignments(fleet, present),
    )


def _assignments(fleet: _Fleet, present: list[_Slot]) -> list[dict[str, Any]]:
    owners = sorted(present, key=lambda s: s.instance_id or s.member_id)
    keys = tuple(s.instance_id or s.member_id for s in owners)
    if keys not in fleet.encoded:
        fleet.encoded[keys] = _range_assignment(fleet.topics, len(keys))
    return [
        {"member_id": s.member_id, "group_instance_id": s.instance_id, "assignment": encoded}
        for s, encoded in zip(owners, fleet.encoded[keys], strict=True)
    ]


def _range_assignment(topics: dict[str, int], members: int) -> list[str]:
    """Kafka's range assignor over sorted owners, encoded as the member library does (base64 of compact JSON)."""
    per_member: list[dict[str, list[int]]] = [{} for _ in range(members)]
    for topic in sorted(topics):
        partitions = topics[topic]
        share, extra = divmod(partitions, members)
        start = 0
        for i in range(members):
            n = share + (1 if i < extra else 0)
            if n:
                per_member[i][topic] = list(range(start, start + n))
            start += n
    return [
        base64.b64encode(
            json.dumps(
                {"partitions": p, "user_data": None, "version": 1}, separators=(",", ":"), sort_keys=True
            ).encode()
        ).decode("ascii")
        for p in per_member
    ]


def _new_member_id(fleet: _Fleet, instance_id: str | None) -> str:
    return f"{instance_id or 'consumer'}-{fleet.rng.getrandbits(64):016x}"


def _emit(fleet: _Fleet, ts: int, event_type: str, **fields: Any) -> Iterator[tuple[int, Event]]:
    # Events of one group never go back in time, even when a burst overlaps the next scheduled action.
    fleet.last_ts = max(fleet.last_ts, ts)
    event: Event = {
        "ts_ms": fleet.last_ts,
        "group_id": fleet.group_id,
        "type": event_type,
        "generation_id": fleet.generation,
    }
    event.update(fields)
    yield fleet.last_ts, event


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a deterministic synthetic Berth journal (JSON Lines).")
    parser.add_argument("--events", type=int, default=SyntheticSpec.events)
    parser.add_argument("--groups", type=int, default=SyntheticSpec.groups)
    parser.add_argument("--seed", type=int, default=SyntheticSpec.seed)
    parser.add_argument("--segment-bytes", type=int, default=SyntheticSpec.segment_bytes)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    spec = SyntheticSpec(args.events, args.groups, args.seed, segment_bytes=args.segment_bytes)
    files = write_segments(generate_events(spec), args.out, spec.segment_bytes)
    print(
        f"wrote {spec.events:,} events for {spec.groups:,} groups in {len(files)} segments to {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
