"""Stuck-group detection on KIP-848 consumer-protocol groups (issue 30, "What to build 3"): the operator's real pass
(``FleetPass``, with the ``stuck`` contributor, its Events and its gauges) over the real Kafka port, against
``kfake-kip848`` with short group bounds, the fleet's pods played by ``signal_fleet`` and their processes by real
confluent-kafka consumers (``group.protocol=consumer``, configured from the environment the operator planned for each
pod, as the example program is), each polling in a thread of its own.

- A consumer that stops polling (its pod Ready, its process alive): librdkafka leaves the group once
  ``max.poll.interval.ms`` has passed (the fleet's ``rebalanceTimeoutMs``), the broker expires the static member
  after the group's session timeout and the survivors take its partitions. Its Ready pod owns nothing while each
  survivor owns three: ``GroupStuck`` True (``ReadyPodsIdle``, naming it) exactly once it has been idle for the
  threshold, one Warning, the gauges; polling again, it rejoins and all of it clears.
- A fleet larger than its partition count (4 pods, 2 partitions): two Ready pods own nothing while each busy one owns
  one partition — never stuck.

Each test has a broker of its own: kfake's consumer-protocol assignor hands a member the partitions of every topic on
the broker (docs/kafka.md, "What differs on kfake").
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata, TopicPartition
from support.kafka_broker import HOW_TO_GET_KIP848, KafkaBroker, find_kfake
from support.kafka_fixtures import create_topic
from support.kube_fixtures import unavailable
from support.signal_kafka import KafkaPasses, PollingConsumers

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.conditions import parse_time
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupDescription, GroupProtocol
from berth.operator.planners.stuck_group import GROUP_STUCK

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: Longer than a hand-over takes on a busy machine (the silent member's session expires, the survivors hear of it on
#: their next heartbeat): its partitions are unowned meanwhile, which is no stuck group.
THRESHOLD = timedelta(seconds=6)
#: The group's session timeout (the operator sets it as the group's config) and the consumers' max.poll.interval.ms.
SESSION_MS = 6_000
MAX_POLL_MS = 3_000
#: The broker's bounds for consumer-protocol groups, low enough for those (Kafka's minimums are 45 s and 5 s).
BROKER = ("group.consumer.min.session.timeout.ms=5000", "group.consumer.min.heartbeat.interval.ms=1000")


@pytest.fixture
def broker() -> Iterator[str]:
    """A kfake-kip848 of this test's own, with short consumer-group bounds."""
    binary = find_kfake(kip848=True)
    if binary is None:
        unavailable(HOW_TO_GET_KIP848)
    assert binary is not None
    workdir = Path(tempfile.mkdtemp(prefix="berth-kfake-stuck-"))
    process = KafkaBroker(binary, workdir / "kfake.log", configs=BROKER).start()
    try:
        yield process.bootstrap
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def port(broker: str) -> AsyncIterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(broker))
    yield port
    await port.close()


@dataclass
class Confluent:
    """A pod's process: a confluent-kafka consumer (its close is a static member's: epoch -2, no leave)."""

    consumer: Consumer

    def poll(self) -> None:
        self.consumer.poll(0.2)

    def close(self) -> None:
        self.consumer.close()


def consumers_of(topic: str) -> PollingConsumers:
    """Configured as ``deploy/examples/consumers/confluent_kafka_consumer.py`` is, from the pod's environment."""

    def consumer_for(instance_id: str, env: Mapping[str, str]) -> Confluent:
        consumer = Consumer(
            {
                "bootstrap.servers": env["BERTH_KAFKA_BOOTSTRAP_SERVERS"],
                "group.id": env["BERTH_GROUP_ID"],
                "group.protocol": env["BERTH_KAFKA_GROUP_PROTOCOL"],
                "group.instance.id": instance_id,
                "max.poll.interval.ms": int(env["BERTH_REBALANCE_TIMEOUT_MS"]),
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        return Confluent(consumer)

    return PollingConsumers(consumer_for)


def passes(port: KafkaCoordinatorPort, bootstrap: str, name: str, topic: str, replicas: int) -> KafkaPasses:
    spec = {
        "coordinator": {"kafka": {"groupProtocol": "consumer"}},
        "rebalanceTimeoutMs": MAX_POLL_MS,
        "sessionTimeout": {"policy": "Fixed", "fixedMs": SESSION_MS},
    }
    return KafkaPasses(port, bootstrap, name, consumers_of(topic), replicas, spec, stuck_group=THRESHOLD)


def owned_by(described: GroupDescription) -> dict[str, int]:
    return {m.group_instance_id or m.member_id: len(m.assignment) for m in described.members}


def commit_all(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Offsets on every partition while the group is empty (a fleet that ran before)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-tests")
    try:
        admin.alter_group_offsets(
            group, {TopicPartition(topic, p): OffsetAndMetadata(0, "", -1) for p in range(partitions)}
        )
    finally:
        admin.close()


async def test_a_consumer_that_stops_polling_leaves_the_group_and_its_ready_pod_idle(
    port: KafkaCoordinatorPort, broker: str
) -> None:
    group = topic = "stops-polling"
    create_topic(broker, topic, 6)
    stage = passes(port, broker, group, topic, 3)
    await stage.run()  # the group claimed for the fleet, its pods not started yet
    commit_all(broker, group, topic, 6)  # what the fleet's consumers committed before (the group still empty)
    assert await port.committed_partitions(group, None, 4) == tuple(f"{topic}:{p}" for p in range(4))
    assert await port.committed_partitions(group, {"another"}, 10) == ()
    pods = [f"{group}-{n}" for n in range(3)]
    try:
        await stage.until("2 partitions each", lambda: stable_with(port, group, dict.fromkeys(pods, 2)))
        await stage.run()  # a pass that began with the group formed (the last one may have seen it forming)
        described = await port.describe(group)
        assert described.protocol is GroupProtocol.CONSUMER
        # The port's description carries each member's assignment: together the topic's 6 partitions.
        assert sorted(p for m in described.members for p in m.assignment) == sorted(f"{topic}:{p}" for p in range(6))
        assert stage.memory.known_partitions == {f"{topic}:{p}" for p in range(6)}  # the lag read: committed ones
        assert stage.condition(GROUP_STUCK)["status"] == "False" and "stuck" not in stage.status.status
        warned = len(stage.warnings(GROUP_STUCK))  # a formation slower than the threshold (a busy machine) was one

        silent = pods[2]
        stage.players.live[silent].polling.clear()  # stops polling; its pod stays Ready, its process alive
        stopped = len(stage.passes)
        await stage.until("GroupStuck True", lambda: stage.condition(GROUP_STUCK).get("status") == "True", 90)
        described = await port.describe(group)
        assert silent not in owned_by(described) and sorted(owned_by(described).values()) == [3, 3], described
        condition = stage.condition(GROUP_STUCK)
        assert condition["reason"] == "ReadyPodsIdle" and silent in condition["message"], condition
        assert stage.status.status["stuck"]["idleReadyPods"] == [silent]
        since = parse_time(stage.status.status["stuck"]["idleSince"])
        assert since is not None
        stage.turned_on_time(GROUP_STUCK, since, THRESHOLD, first=stopped)  # within the threshold, not before
        warnings = stage.warnings(GROUP_STUCK)
        assert len(warnings) == warned + 1 and silent in warnings[-1]
        gauges = stage.gauges()
        assert (gauges["berth_operator_fleet_idle_ready_pods"], gauges["berth_operator_fleet_group_stuck"]) == (1, 1)

        stage.players.live[silent].polling.set()  # polling again: it rejoins and is given partitions
        await stage.until("GroupStuck False", lambda: stage.condition(GROUP_STUCK).get("status") == "False")
        assert "stuck" not in stage.status.status
        assert len(stage.warnings(GROUP_STUCK)) == stage.episodes(GROUP_STUCK)  # one Warning each time it turned True
        gauges = stage.gauges()
        assert (gauges["berth_operator_fleet_idle_ready_pods"], gauges["berth_operator_fleet_group_stuck"]) == (0, 0)
    finally:
        stage.players.close()


async def test_a_fleet_larger_than_its_partition_count_is_never_stuck(port: KafkaCoordinatorPort, broker: str) -> None:
    group = topic = "wider"
    create_topic(broker, topic, 2)
    stage = passes(port, broker, group, topic, 4)
    pods = [f"{group}-{n}" for n in range(4)]
    try:
        await stage.until("4 members over 2 partitions", lambda: spread_over(port, group, pods))
        watched = time.monotonic()
        while time.monotonic() - watched < THRESHOLD.total_seconds() + 2:
            await asyncio.sleep(0.5)
            await stage.run()
            condition = stage.condition(GROUP_STUCK)
            assert condition["status"] == "False" and "stuck" not in stage.status.status, condition
        assert await spread_over(port, group, pods)  # still two idle Ready pods, each busy one owning one partition
        assert stage.warnings(GROUP_STUCK) == []
        assert stage.gauges()["berth_operator_fleet_group_stuck"] == 0
    finally:
        stage.players.close()


async def stable_with(port: KafkaCoordinatorPort, group: str, counts: dict[str, int]) -> bool:
    """Stable, these members owning this many partitions each, each at the group's epoch."""
    described = await port.describe(group)
    at_epoch = all(m.member_epoch == described.generation for m in described.members)
    return described.state == "Stable" and owned_by(described) == counts and at_epoch


async def spread_over(port: KafkaCoordinatorPort, group: str, pods: list[str]) -> bool:
    described = await port.describe(group)
    counts = owned_by(described)
    return described.state == "Stable" and set(counts) == set(pods) and sorted(counts.values()) == [0, 0, 1, 1]
