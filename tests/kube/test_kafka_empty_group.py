"""A Kafka group whose consumers all stopped, their offsets kept, is in use (issue 30), on the real control plane with
the real operator and real Kafka clients on the Kafka-protocol broker.

Reproduced before the fix (2 of 2 runs): team A's consumers commit six partitions and stop, the group is Empty; a
fleet of another namespace named like the group claimed it (an Empty group did not count as in use) and its
deletion with ``deleteGroupOnDelete: true`` deleted the group and its offsets (6 committed partitions ->
GroupIdNotFound). Now the group is in use: the fleet is refused ``GroupInUse`` and its deletion takes nothing; with
the administrator's adoption (``--adopt-groups``) the fleet runs on it, and its deletion still keeps the group and
its offsets, because a fleet deletes only a Kafka group it created.

Team A is plain kafka-python consumers without an instance id (they leave the group when they close, so it is Empty
at once, as after a deployment scaled to zero); they consume messages produced here and commit them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from support.kafka_fixtures import create_topic
from support.kafka_stage import KafkaStage, grant_secret_reads, kafka_fleet, operated_namespace
from support.kube import Kube, wait_until

pytestmark = [pytest.mark.kube, pytest.mark.kafka, pytest.mark.slow]

_names = itertools.count(1)
PARTITIONS = 6
MESSAGES = 60
#: Passes the fleet gets to do harm before the test looks (the operator passes every second).
WATCH_S = 5.0


@pytest.fixture(scope="module")
def adopting_stage(
    kube: Kube, operator_identity: Kube, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaStage]:
    """A namespace of its own whose operator lets its fleets adopt groups named ``adopted-*`` (the administrator's
    ``--adopt-groups``), records shared in the release namespace as every Kafka test's."""
    namespace = kube.create_namespace(f"kafka-empty-{next(_names)}")
    grant_secret_reads(kube, namespace)
    directory = tmp_path_factory.mktemp("kafka-empty")
    args = [
        *("--kafka-bootstrap-servers", kafka_bootstrap, "--adopt-groups", f"{namespace}=adopted-*"),
        *("--liveness-port", "0", "--metrics-port", "0", "--reconcile-interval-s", "1"),
    ]
    topic = create_topic(kafka_bootstrap, f"empty-{namespace}", PARTITIONS)
    with operated_namespace(
        kube, operator_identity, namespace, directory, args, bootstrap=kafka_bootstrap, topic=topic
    ) as stage:
        yield stage


def stopped_team(bootstrap: str, group: str) -> tuple[str, dict[tuple[str, int], int]]:
    """Team A: messages produced to a topic of its own, two real consumers that consume and commit them, then close
    (the group Empty); the topic, and the offsets they committed as the broker answers them."""
    from kafka import KafkaConsumer, KafkaProducer

    topic = create_topic(bootstrap, f"team-a-{group}", PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","))
    for i in range(MESSAGES):
        producer.send(topic, f"order-{i}".encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    consumers = [
        KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap.split(","),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )
        for _ in range(2)
    ]
    consumed = 0
    deadline = time.monotonic() + 90
    while consumed < MESSAGES and time.monotonic() < deadline:
        for consumer in consumers:
            consumed += sum(len(batch) for batch in consumer.poll(timeout_ms=200).values())
            consumer.commit()
    assert consumed == MESSAGES, f"team A consumed {consumed} of {MESSAGES}"
    for consumer in consumers:
        consumer.commit()
        consumer.close()
    state = wait_until(lambda: (s := describe(bootstrap, group)[0]) == "Empty" and s, "team A's group Empty")
    assert state == "Empty"
    return topic, committed(bootstrap, group)


def describe(bootstrap: str, group: str) -> tuple[str, int]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    return str(described["group_state"]), len(described["members"])


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        found = admin.list_group_offsets({group: None}).get(group) or {}
    except GroupIdNotFoundError:
        return {}
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items() if meta.offset >= 0}


def test_an_empty_group_with_committed_offsets_is_in_use_and_its_takeover_is_refused(
    adopting_stage: KafkaStage,
) -> None:
    stage, name = adopting_stage, f"ke{next(_names)}"
    topic, before = stopped_team(stage.bootstrap, name)
    assert len(before) == PARTITIONS and sum(before.values()) == MESSAGES

    stage.apply(kafka_fleet(name, 1, "kafka-python", topic, deleteGroupOnDelete=True))
    refused = wait_until(lambda: (c := stage.condition(name, "SpecValid")).get("reason") and c, "a refusal")
    assert (refused["status"], refused["reason"]) == ("False", "GroupInUse"), refused
    assert stage.get("statefulset", name) is None
    time.sleep(WATCH_S)
    stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=60s")
    after = committed(stage.bootstrap, name)
    print(f"\nEmpty-group takeover: {len(before) - len(after)} of {len(before)} partitions' offsets lost")
    assert after == before
    assert stage.messages(name, "GroupDeleted") == [] and stage.messages(name, "GroupClaimed") == []


def test_an_adopted_empty_group_runs_the_fleet_and_is_kept_when_the_fleet_is_deleted(
    adopting_stage: KafkaStage,
) -> None:
    stage, name = adopting_stage, f"adopted-{next(_names)}"
    topic, before = stopped_team(stage.bootstrap, name)

    stage.apply(kafka_fleet(name, 1, "kafka-python", topic, deleteGroupOnDelete=True))
    claimed = wait_until(lambda: stage.messages(name, "GroupClaimed"), "the adoption")
    assert "(adopted: it was in use)" in claimed[0]
    assert stage.status(name)["ownedGroups"][0].get("created") is None
    wait_until(lambda: describe(stage.bootstrap, name) == ("Stable", 1), "the fleet's consumer in the group")
    stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=90s")
    finalized = stage.messages(name, "Finalized")
    assert finalized and "a fleet deletes only a Kafka group it created" in finalized[-1], finalized
    assert stage.messages(name, "GroupDeleted") == []
    after = committed(stage.bootstrap, name)
    # Kept, with team A's progress (the fleet's consumer resumed from it: nothing more to read, nothing went back).
    assert set(after) == set(before) and all(after[p] >= before[p] for p in before), (before, after)


def test_a_fleet_that_creates_its_kafka_group_still_deletes_it_as_its_spec_says(adopting_stage: KafkaStage) -> None:
    stage, name = adopting_stage, f"kc{next(_names)}"
    stage.apply(kafka_fleet(name, 1, "kafka-python", stage.topic, deleteGroupOnDelete=True))
    claimed = wait_until(lambda: stage.messages(name, "GroupClaimed"), "the claim")
    assert "adopted" not in claimed[0]
    assert stage.status(name)["ownedGroups"][0]["created"] is True
    wait_until(lambda: describe(stage.bootstrap, name) == ("Stable", 1), "the fleet's consumer in the group")
    stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=90s")
    assert stage.messages(name, "GroupDeleted") == [f"deleted group {name}"]
    assert committed(stage.bootstrap, name) == {}
