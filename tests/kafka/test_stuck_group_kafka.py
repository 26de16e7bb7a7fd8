"""Stuck-group detection on a Kafka-protocol broker (kfake, classic groups) with real kafka-python consumers as static
members (issue 30, "What to build 3"): what the Kafka port reads (each member's assignment, the group's committed
partitions) judged by ``planners.stuck_group``, as the ``stuck`` contributor does on every pass.

- A consumer that stops polling holds a rebalance up (the classic protocol waits for every member to rejoin, up to
  its max.poll.interval.ms): while it does, the broker reports no member's assignment and every committed partition
  is unowned — the group is stuck, then not once the consumer polls again.
- A fleet larger than its partition count (4 consumers, 2 partitions) leaves two Ready consumers with nothing while
  each busy one owns one partition: not stuck.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata
from support.kafka_fixtures import create_topic

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.stuck_group import StuckVerdict, judge

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_names = itertools.count(1)
THRESHOLD = timedelta(seconds=3)


@dataclass
class Consumer:
    """A static member polling in a thread of its own; ``polling`` cleared: it stops polling (and stays open)."""

    instance_id: str
    consumer: KafkaConsumer
    polling: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            if self.polling.is_set():
                self.consumer.poll(timeout_ms=200)
            else:
                time.sleep(0.1)

    def start(self) -> Consumer:
        self.polling.set()
        self.thread = threading.Thread(target=self.run, daemon=True, name=f"consumer-{self.instance_id}")
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        self.consumer.close(autocommit=False)


@pytest.fixture
def consumers(kafka_bootstrap: str) -> Iterator[list[Consumer]]:
    made: list[Consumer] = []
    yield made
    for consumer in made:
        consumer.close()


def member(bootstrap: str, group: str, topic: str, instance_id: str) -> Consumer:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_instance_id=instance_id,
        client_id=instance_id,
        enable_auto_commit=False,
        session_timeout_ms=30_000,
        heartbeat_interval_ms=1_000,
        max_poll_interval_ms=60_000,  # the rebalance timeout: how long a consumer that stops polling holds one up
        partition_assignment_strategy=(RoundRobinPartitionAssignor,),
    )
    return Consumer(instance_id, consumer).start()


def commit_all(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Offsets committed on every partition while the group is empty (what a fleet that ran before leaves)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.commit({tp: OffsetAndMetadata(0, "", -1) for tp in assigned})
    finally:
        consumer.close(autocommit=False)


async def look(port: KafkaCoordinatorPort, group: str) -> tuple[GroupDescription, frozenset[str]]:
    """What a pass reads: the group described and its committed partitions (the lag read)."""
    description = await port.describe(group)
    lag = await port.group_lag(group, description)
    known = frozenset() if lag is None else frozenset(f"{p.topic}:{p.partition}" for p in lag.partitions)
    return description, known


async def wait_for(
    port: KafkaCoordinatorPort, group: str, what: str, ok: Callable[[GroupDescription], bool], timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        description, _ = await look(port, group)
        if ok(description):
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"group {group}: {what} not seen within {timeout_s:.0f} s: {await port.describe(group)}")


async def verdict_over(
    port: KafkaCoordinatorPort, group: str, ready: set[str], seconds: float
) -> tuple[StuckVerdict, GroupDescription]:
    """The group judged as passes do, once now and again ``seconds`` later (the clock kept in between in status)."""
    description, known = await look(port, group)
    start = datetime.now(UTC)
    first = judge(description, known, ready, None, now=start, threshold=THRESHOLD)
    await asyncio.sleep(seconds)
    description, known = await look(port, group)
    now = start + timedelta(seconds=seconds)
    return judge(description, known, ready, first.status, now=now, threshold=THRESHOLD), description


@pytest.fixture
async def port(kafka_bootstrap: str) -> AsyncIterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(kafka_bootstrap))
    yield port
    await port.close()


def stable_with(names: set[str], partitions: int) -> Callable[[GroupDescription], bool]:
    def ok(d: GroupDescription) -> bool:
        owned = sum(len(m.assignment) for m in d.members)
        return d.state == "Stable" and d.static_instance_ids() == frozenset(names) and owned == partitions

    return ok


async def test_a_consumer_that_stops_polling_holds_a_rebalance_up_and_the_group_is_stuck(
    port: KafkaCoordinatorPort, kafka_bootstrap: str, consumers: list[Consumer]
) -> None:
    n = next(_names)
    group, topic = f"stuck-poll-{n}", create_topic(kafka_bootstrap, f"stuck-poll-{n}", 6)
    commit_all(kafka_bootstrap, group, topic, 6)
    names = {"s-0", "s-1", "s-2"}
    consumers.extend(member(kafka_bootstrap, group, topic, name) for name in sorted(names))
    await wait_for(port, group, "3 members owning 6 partitions", stable_with(names, 6))
    calm, _ = await verdict_over(port, group, names, THRESHOLD.total_seconds() + 1)
    assert (calm.unowned, calm.idle, calm.stuck) == ((), (), False), calm

    consumers[2].polling.clear()  # s-2 stops polling (its process stays, heartbeating)
    consumers.append(member(kafka_bootstrap, group, topic, "s-3"))  # a new member: a rebalance s-2 never joins
    await wait_for(port, group, "a rebalance", lambda d: d.state in ("PreparingRebalance", "CompletingRebalance"))
    stuck, described = await verdict_over(port, group, names | {"s-3"}, THRESHOLD.total_seconds() + 1)
    assert described.state == "PreparingRebalance", described
    assert stuck.stuck and stuck.condition.reason == "PartitionsUnowned", stuck
    assert stuck.unowned == tuple(sorted(f"{topic}:{p}" for p in range(6)))

    consumers[2].polling.set()  # polling again: it rejoins, the rebalance completes
    await wait_for(port, group, "4 members owning 6 partitions", stable_with(names | {"s-3"}, 6))
    recovered, _ = await verdict_over(port, group, names | {"s-3"}, 0)
    assert (recovered.unowned, recovered.stuck) == ((), False), recovered


async def test_a_fleet_larger_than_its_partition_count_is_not_stuck(
    port: KafkaCoordinatorPort, kafka_bootstrap: str, consumers: list[Consumer]
) -> None:
    n = next(_names)
    group, topic = f"stuck-wide-{n}", create_topic(kafka_bootstrap, f"stuck-wide-{n}", 2)
    commit_all(kafka_bootstrap, group, topic, 2)
    names = {"w-0", "w-1", "w-2", "w-3"}
    consumers.extend(member(kafka_bootstrap, group, topic, name) for name in sorted(names))
    await wait_for(port, group, "4 members owning 2 partitions", stable_with(names, 2))
    verdict, described = await verdict_over(port, group, names, THRESHOLD.total_seconds() + 1)
    idle = {m.group_instance_id for m in described.members if not m.assignment}
    assert len(idle) == 2  # two Ready consumers own nothing: there is nothing to give them
    assert (verdict.unowned, verdict.idle, verdict.stuck) == ((), (), False), verdict
    assert verdict.condition.reason == "PartitionsOwned"
