"""The Kafka coordinator port on KIP-848 consumer-protocol groups (``kfake-kip848`` with Kafka's defaults for them, or
a real Kafka >= 4.0 in BERTH_KAFKA_BOOTSTRAP), with real confluent-kafka consumers (``group.protocol=consumer``,
the example program) as static members, and lag read off the broker.

What the operator relies on: ConsumerGroupDescribe shows the group's epoch and each member's epoch and partitions
(a static member that closed shows epoch -2 and keeps its partitions); ONE removal by instance id hands the departed
member's partitions to the survivors within seconds, where waiting out the session timeout takes 45 s; the session
timeout is the group's config, set within the broker's group.consumer.* bounds and refused outside them; a group
the broker does not know describes as not existing; lag is the log end offset minus the committed one.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from support.kafka_consumers import ConsumerProcess, ownership
from support.kube import wait_until

from berth.coordinator.client import kafka_groups
from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupProtocol
from berth.operator.ports import CoordinatorUnavailable

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_groups = itertools.count(1)
PARTITIONS = 6


@pytest.fixture
async def port(kip848_bootstrap: str) -> AsyncIterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(kip848_bootstrap))
    yield port
    await port.close()


def members(names: list[str], group: str, topic: str, bootstrap: str, logs: Path) -> list[ConsumerProcess]:
    env = {
        "BERTH_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "BERTH_KAFKA_GROUP_PROTOCOL": "consumer",
        "BERTH_GROUP_ID": group,
        "KAFKA_TOPIC": topic,
    }
    return [ConsumerProcess("confluent-kafka", name, env, logs).start() for name in names]


async def settled(port: KafkaCoordinatorPort, group: str, names: list[str]) -> None:
    """Stable, exactly these members, each at the group's epoch (its assignment reconciled): only then measure."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = await port.describe(group)
        if (
            described.state == "Stable"
            and described.static_instance_ids() == frozenset(names)
            and all(m.member_epoch == described.generation for m in described.members)
        ):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"group {group} did not settle with {names}: {await port.describe(group)}")


async def test_a_consumer_protocol_group_describes_with_its_epoch_and_each_members_partitions(
    port: KafkaCoordinatorPort, kip848_bootstrap: str, kip848_topic: str, tmp_path: Path
) -> None:
    group = f"cp-describe-{next(_groups)}"
    topic = kip848_topic
    names = ["d-0", "d-1"]
    fleet = members(names, group, topic, kip848_bootstrap, tmp_path)
    try:
        wait_until(lambda: ownership(fleet).covers(names, partitions(topic)), "two members owning 6 partitions")
        await settled(port, group, names)
        described = await port.describe(group)
        assert (described.protocol, described.exists, described.state) == (GroupProtocol.CONSUMER, True, "Stable")
        assert described.generation >= 1 and described.assignment_epoch == described.generation
        owned = sorted(p for m in described.members for p in m.assignment)
        assert owned == sorted(partitions(topic))  # topic names resolved even where the broker sends only ids

        fleet[1].stop()  # SIGTERM: a static member leaves with epoch -2 and keeps its partitions
        wait_until(lambda: epochs(kip848_bootstrap, group).get("d-1") == -2, "d-1 at epoch -2")
    finally:
        for member in fleet:
            member.stop()


async def test_one_removal_by_instance_id_hands_the_departed_partitions_to_the_survivors_within_seconds(
    port: KafkaCoordinatorPort, kip848_bootstrap: str, kip848_topic: str, tmp_path: Path
) -> None:
    group = f"cp-remove-{next(_groups)}"
    topic = kip848_topic
    everyone = ["r-0", "r-1", "r-2"]
    fleet = members(everyone, group, topic, kip848_bootstrap, tmp_path)
    try:
        wait_until(lambda: ownership(fleet).covers(everyone, partitions(topic)), "three members owning 6 partitions")
        await settled(port, group, everyone)
        fleet[2].stop()
        removed_at = time.time()
        assert await port.leave_instances(group, ["r-2", "never-joined"]) == {
            "r-2": "NONE",
            "never-joined": "UNKNOWN_MEMBER_ID",
        }
        survivors = ["r-0", "r-1"]
        wait_until(lambda: ownership(fleet).covers(survivors, partitions(topic)), "the survivors owning everything")
        took = ownership(fleet).covered_at(survivors, partitions(topic)) - removed_at
        print(f"\nconsumer protocol: survivors own all 6 partitions {took:.2f} s after one removal (45 s timeout)")
        assert took < 30, "the removal, not the 45 s session timeout, must have handed the partitions over"
        assert (await port.describe(group)).static_instance_ids() == frozenset(survivors)
    finally:
        for member in fleet:
            member.stop()


async def test_the_session_timeout_is_the_groups_config_within_the_brokers_consumer_bounds(
    port: KafkaCoordinatorPort, kip848_bootstrap: str
) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    bounds = await port.get_config()
    assert bounds.consumer is not None
    consumer = bounds.consumer
    assert consumer.min_session_timeout_ms <= consumer.max_session_timeout_ms
    group = f"cp-config-{next(_groups)}"
    await port.set_group_session_timeout(group, consumer.max_session_timeout_ms, consumer.min_heartbeat_interval_ms)
    admin = KafkaAdminClient(bootstrap_servers=kip848_bootstrap.split(","), client_id="berth-tests")
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, group, None)])
        configs = next(iter(next(iter(described.values())).values()))
        assert configs["consumer.session.timeout.ms"]["value"] == str(consumer.max_session_timeout_ms)
        assert configs["consumer.heartbeat.interval.ms"]["value"] == str(consumer.min_heartbeat_interval_ms)
    finally:
        admin.close()
    fresh = KafkaCoordinatorPort(port.connection)  # another port: nothing cached, the broker decides
    try:
        with pytest.raises(CoordinatorUnavailable) as raised:
            await fresh.set_group_session_timeout(group, consumer.max_session_timeout_ms + 10_000, 5_000)
        assert raised.value.reason == "ConfigRefused"
        assert "consumer.session.timeout.ms" in str(raised.value) or "group configs" in str(raised.value)
    finally:
        await fresh.close()


async def test_a_group_the_broker_does_not_know_does_not_exist(port: KafkaCoordinatorPort) -> None:
    described = await port.describe(f"cp-never-{next(_groups)}")
    assert (described.exists, described.known, described.members) == (False, False, ())


async def test_lag_is_the_log_end_offset_minus_the_committed_offset_per_partition(
    port: KafkaCoordinatorPort, kip848_bootstrap: str, kip848_topic: str
) -> None:
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient, OffsetSpec
    from kafka.structs import OffsetAndMetadata, TopicPartition

    group, topic = f"cp-lag-{next(_groups)}", kip848_topic
    producer = Producer({"bootstrap.servers": kip848_bootstrap})
    for partition in range(PARTITIONS):
        for _ in range(10):
            producer.produce(topic, value=b"x", partition=partition)
    assert producer.flush(30) == 0
    admin = KafkaAdminClient(bootstrap_servers=kip848_bootstrap.split(","), client_id="berth-tests")
    try:
        ends = admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.LATEST for p in (0, 1)})
        end0, end1 = (ends[TopicPartition(topic, p)].offset for p in (0, 1))
        committed = {
            TopicPartition(topic, 0): OffsetAndMetadata(end0 - 6, "", -1),
            TopicPartition(topic, 1): OffsetAndMetadata(end1, "", -1),
        }
        admin.alter_group_offsets(group, committed)
        described = await port.describe(group)
        lag = await port.group_lag(group, described)
        assert lag is not None
        by_partition = {(p.topic, p.partition): (p.committed, p.log_end, p.lag) for p in lag.partitions}
        assert by_partition == {(topic, 0): (end0 - 6, end0, 6), (topic, 1): (end1, end1, 0)}
        assert lag.total == 6
        # berth-groups reads the same, the way kafka-consumer-groups.sh does.
        assert [(p.partition, p.lag) for p in kafka_groups.group_lag(admin, group)] == [(0, 6), (1, 0)]
    finally:
        admin.close()


def partitions(topic: str) -> set[str]:
    return {f"{topic}:{p}" for p in range(PARTITIONS)}


def epochs(bootstrap: str, group: str) -> dict[str | None, int | None]:
    """Each member's epoch by instance id, read the way the port reads it (for ``wait_until``)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-tests")
    try:
        return {m.instance_id: m.member_epoch for m in kafka_groups.describe_group(admin, group).members}
    finally:
        admin.close()
