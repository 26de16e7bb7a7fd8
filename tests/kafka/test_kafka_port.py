"""The Kafka coordinator port against a Kafka-protocol broker (kfake, or BERTH_KAFKA_BOOTSTRAP), with real
kafka-python and confluent-kafka consumers as static members.

What the operator relies on: describe shows members by instance id; ONE removal by instance id has the survivors
owning every partition about as fast as they hear of the rebalance; results are matched by instance id (ids that
were not members are UNKNOWN_MEMBER_ID); an empty list is refused before anything is sent; the session bounds come
from the broker's config; a KIP-848 group is recognised; an unreachable cluster is a CoordinatorUnavailable.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kafka_consumers import ConsumerProcess, ownership
from support.kube import wait_until

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupProtocol
from berth.operator.ports import CoordinatorUnavailable

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_groups = itertools.count(1)


@pytest.fixture
async def port(kafka_bootstrap: str) -> Iterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(kafka_bootstrap))
    yield port
    await port.close()


def consumers(
    client: str, names: list[str], group: str, topic: str, bootstrap: str, logs: Path
) -> list[ConsumerProcess]:
    env = {
        "BERTH_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "BERTH_GROUP_ID": group,
        "BERTH_SESSION_TIMEOUT_MS": "30000",
        "BERTH_HEARTBEAT_INTERVAL_MS": "500",
        "KAFKA_TOPIC": topic,
    }
    return [ConsumerProcess(client, name, env, logs).start() for name in names]


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
async def test_one_removal_by_instance_id_hands_the_departed_partitions_to_the_survivors(
    port: KafkaCoordinatorPort, kafka_bootstrap: str, kafka_topic: str, tmp_path: Path, client: str
) -> None:
    group = f"port-{client}-{next(_groups)}"
    partitions = {f"{kafka_topic}:{p}" for p in range(6)}
    members = consumers(client, ["f-0", "f-1", "f-2"], group, kafka_topic, kafka_bootstrap, tmp_path)
    try:
        everyone = ["f-0", "f-1", "f-2"]
        wait_until(lambda: ownership(members).covers(everyone, partitions), "three members owning 6 partitions")
        described = await port.describe(group)
        assert described.state in ("Stable", "PreparingRebalance", "CompletingRebalance")
        assert described.static_instance_ids() == frozenset(everyone)

        members[2].stop()
        left_at = time.time()
        results = await port.leave_instances(group, ["f-2", "f-9"])
        assert results == {"f-2": "NONE", "f-9": "UNKNOWN_MEMBER_ID"}
        survivors = ["f-0", "f-1"]
        wait_until(lambda: ownership(members).covers(survivors, partitions), "the survivors owning everything")
        took = ownership(members).covered_at(survivors, partitions) - left_at
        assert took < 5.0, f"{took:.1f} s after the removal"  # ~ one heartbeat and a rejoin, not a session timeout
        assert (await port.describe(group)).static_instance_ids() == frozenset(survivors)
    finally:
        for member in members:
            member.stop()


async def test_an_empty_removal_is_refused_before_anything_is_sent(port: KafkaCoordinatorPort) -> None:
    with pytest.raises(ValueError, match="at least one"):
        await port.leave_instances("anything", [])


async def test_session_bounds_come_from_the_brokers_config(port: KafkaCoordinatorPort) -> None:
    bounds = await port.get_config()
    assert bounds.min_session_timeout_ms <= 6000 <= bounds.max_session_timeout_ms


async def test_an_unknown_group_is_dead_and_deleting_it_says_not_found(port: KafkaCoordinatorPort) -> None:
    described = await port.describe("never-was")
    assert (described.state, described.members, described.protocol) == ("Dead", (), GroupProtocol.CLASSIC)
    assert await port.delete_group("never-was") == "GROUP_ID_NOT_FOUND"


async def test_a_removal_from_a_group_that_never_was_removes_nobody(port: KafkaCoordinatorPort) -> None:
    """Regression (found by the Kafka signal lab): a fleet scaled 4 -> 0 before any pod joined asked kfake to remove
    its ids from a group that did not exist; the broker's GROUP_ID_NOT_FOUND became "cannot reach the coordinator"
    on every pass, and the fleet never converged."""
    results = await port.leave_instances("never-was-left", ["never-was-left-0", "never-was-left-1"])
    assert results == {"never-was-left-0": "UNKNOWN_MEMBER_ID", "never-was-left-1": "UNKNOWN_MEMBER_ID"}


async def test_deleting_an_empty_group_with_offsets_answers_none_and_the_offsets_go_with_it(
    port: KafkaCoordinatorPort, kafka_bootstrap: str, kafka_topic: str
) -> None:
    """Issue 22, point 9: kafka-python 3 answers a deleted group with "OK", which the port read as an unknown
    answer and raised: a successful deletion was reported as a failure and retried."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError
    from kafka.structs import OffsetAndMetadata, TopicPartition

    group = f"delete-{next(_groups)}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap.split(","))
    try:
        admin.alter_group_offsets(group, {TopicPartition(kafka_topic, 0): OffsetAndMetadata(5, "", -1)})
        assert admin.list_group_offsets({group: None})[group]
        assert await port.delete_group(group) == "NONE"
        with pytest.raises(GroupIdNotFoundError):  # its offsets went with it
            admin.list_group_offsets({group: None})
    finally:
        admin.close()
    assert (await port.describe(group)).state == "Dead"


async def test_a_kip_848_group_is_recognised(
    port: KafkaCoordinatorPort, kafka_bootstrap: str, kafka_topic: str
) -> None:
    from confluent_kafka import Consumer

    group = f"kip848-{next(_groups)}"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "group.instance.id": "a-0",
        }
    )
    try:
        consumer.subscribe([kafka_topic])
        wait_until(lambda: consumer.poll(0.1) is None and consumer.assignment(), "the KIP-848 member's assignment")
        described = await port.describe(group)
        assert described.protocol is GroupProtocol.CONSUMER
    finally:
        consumer.close()


async def test_an_unreachable_cluster_is_reported_as_such() -> None:
    port = KafkaCoordinatorPort(KafkaConnection("127.0.0.1:9"), timeout_ms=1500)
    try:
        with pytest.raises(CoordinatorUnavailable) as raised:
            await port.describe("orders")
        assert raised.value.reason == "Unreachable"
        assert "kafka://127.0.0.1:9" in str(raised.value)
    finally:
        await port.close()
