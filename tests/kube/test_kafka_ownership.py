"""Kafka groups have owners now (issue 22, points 3, 4 and 9), on the real control plane with real consumers on the
Kafka-protocol broker (kfake, or BERTH_KAFKA_BOOTSTRAP).

The broker keeps no owner, so the operator keeps the record itself: one Lease per (cluster, group) in the namespace
the chart grants it (``--group-owners-namespace``), created atomically. Team A's consumers — plain ones, or a fleet
of another operator sharing the records — run in a group named like team B's fleet, whose ``replicas: 0`` used to
remove A's running consumers on every pass and whose deletion (``deleteGroupOnDelete: true``) wiped A's committed
offsets (6 partitions -> none). Now B's fleet is refused (``GroupInUse``, ``GroupOwned``), or, created first and
squatting, removes none of them and keeps their group: removals 0, offsets lost 0. A fleet deleting its own group
says so, without a failure (a successful deletion was reported as one).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_kubelet import FakeKubelet
from support.kafka_consumers import ConsumerProcess, Ownership, program_for_pod, read_lines
from support.kafka_stage import KafkaStage, kafka_fleet
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.kafka, pytest.mark.slow]

_names = itertools.count(1)
#: Passes the hostile fleet gets to do harm before the test looks (the stage's operator passes every second).
WATCH_S = 6.0


def team_a_consumers(stage: KafkaStage, group: str, names: list[str], logs: Path) -> list[ConsumerProcess]:
    """Team A's plain consumers (no fleet): kafka-python, static members named like team B's pods would be."""
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        "BERTH_KAFKA_BOOTSTRAP_SERVERS": stage.bootstrap,
        "BERTH_GROUP_ID": group,
        "BERTH_SESSION_TIMEOUT_MS": "30000",
        "BERTH_HEARTBEAT_INTERVAL_MS": "500",
        "KAFKA_TOPIC": stage.topic,
    }
    return [ConsumerProcess("kafka-python", name, env, logs).start() for name in names]


def commit_offsets(bootstrap: str, group: str, topic: str) -> None:
    """Team A's committed offsets (the group is Empty: a simple commit, as Kafka's admin tools make)."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.alter_group_offsets(group, {TopicPartition(topic, p): OffsetAndMetadata(5, "", -1) for p in range(6)})
    finally:
        admin.close()


def committed_partitions(bootstrap: str, group: str) -> int:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        return len(admin.list_group_offsets({group: None}).get(group) or {})
    except GroupIdNotFoundError:
        return 0
    finally:
        admin.close()


def members_of(bootstrap: str, group: str) -> set[str]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    return {m["group_instance_id"] for m in described["members"]}


def assignments_since(logs: Path, names: list[str], since: float) -> int:
    """Assignments team A's consumers received after ``since``: every removal (or rebalance) makes some."""
    return sum(
        1
        for name in names
        for event in read_lines(logs / f"{name}.out")
        if event.get("event") == "assigned" and event.get("t", 0) > since
    )


def removals(stage: KafkaStage, fleet: str) -> list[str]:
    """Every removal team B's fleet made: its LeftGroup and NotInGroup Events."""
    return [*stage.messages(fleet, "LeftGroup"), *stage.messages(fleet, "NotInGroup")]


def started_consumers(stage: KafkaStage, group: str, names: list[str], logs: Path) -> list[ConsumerProcess]:
    commit_offsets(stage.bootstrap, group, stage.topic)
    consumers = team_a_consumers(stage, group, names, logs)
    wait_until(
        lambda: Ownership({n: read_lines(logs / f"{n}.out") for n in names}).covers(names, stage.partitions()),
        "team A's consumers owning every partition",
        timeout_s=90,
    )
    return consumers


def test_a_fleet_named_like_another_teams_kafka_group_is_refused_and_its_deletion_takes_no_offsets(
    kafka_stage: KafkaStage, tmp_path: Path
) -> None:
    stage, name = kafka_stage, f"ko{next(_names)}"
    names = [f"{name}-0", f"{name}-1"]  # what team B's pods would be called
    consumers = started_consumers(stage, name, names, tmp_path / "team-a")
    try:
        before = committed_partitions(stage.bootstrap, name)
        applied_at = time.time()
        stage.apply(kafka_fleet(name, 0, "kafka-python", stage.topic, deleteGroupOnDelete=True))
        refused = wait_until(lambda: (c := stage.condition(name, "SpecValid")).get("reason") and c, "a refusal")
        assert (refused["status"], refused["reason"]) == ("False", "GroupInUse"), refused
        assert "the administrator's decision" in refused["message"]
        time.sleep(WATCH_S)
        stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=60s")
        lost = before - committed_partitions(stage.bootstrap, name)
        removed = removals(stage, name)
        print(f"\nKafka takeover by name: {len(removed)} removals, {lost} of {before} partitions' offsets lost")
        assert removed == [] and before == 6 and lost == 0
        assert assignments_since(tmp_path / "team-a", names, applied_at) == 0  # not one rebalance caused
        assert members_of(stage.bootstrap, name) == set(names)
        assert stage.get("statefulset", name) is None
    finally:
        for consumer in consumers:
            consumer.stop()


def test_a_fleet_created_first_squats_but_removes_nobody_and_keeps_the_group_it_did_not_fill(
    kafka_stage: KafkaStage, tmp_path: Path
) -> None:
    """Issue 22, point 4, on Kafka: the squatter claims the vacant group; the real team's consumers come later."""
    stage, name = kafka_stage, f"ks{next(_names)}"
    stage.apply(kafka_fleet(name, 0, "kafka-python", stage.topic, deleteGroupOnDelete=True))
    wait_until(lambda: stage.messages(name, "GroupClaimed"), "the claim")
    names = [f"{name}-0", f"{name}-1"]
    joined_at = time.time()
    consumers = started_consumers(stage, name, names, tmp_path / "team-a")
    try:
        before = committed_partitions(stage.bootstrap, name)
        # The operator describes the group once a pass: the first consumer may be reported before the second joined.
        wait_until(
            lambda: stage.status(name).get("foreignMembers") == names, f"status.foreignMembers {names}", timeout_s=60
        )
        time.sleep(WATCH_S)
        settled_at = max(e["t"] for n in names for e in read_lines(tmp_path / "team-a" / f"{n}.out") if "t" in e)
        stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=60s")
        finalized = stage.messages(name, "Finalized")
        assert finalized and "it has members this fleet did not create" in finalized[-1], finalized
        lost = before - committed_partitions(stage.bootstrap, name)
        removed = removals(stage, name)
        print(f"\nKafka squatter: {len(removed)} removals, {lost} of {before} partitions' offsets lost")
        assert removed == [] and lost == 0 and members_of(stage.bootstrap, name) == set(names)
        assert assignments_since(tmp_path / "team-a", names, max(joined_at, settled_at)) == 0
        warned = stage.messages(name, "ForeignMembers")
        assert any(f"{name}-0, {name}-1" in message for message in warned), warned
    finally:
        for consumer in consumers:
            consumer.stop()


@pytest.fixture
def team_a_operator(
    kafka_stage: KafkaStage, kube: Kube, operator_identity: Kube, tmp_path: Path
) -> Iterator[tuple[str, FakeKubelet]]:
    """Team A's namespace with its own operator (a namespace-scoped install) sharing the records with team B's."""
    namespace = kube.create_namespace(f"{kafka_stage.namespace[:40]}-a")
    args = list(kafka_stage.operator_args)
    args[args.index("--namespace") + 1] = namespace
    args[args.index("--evidence-dir") + 1] = str(tmp_path / "evidence-a")
    kubelet = FakeKubelet(kube.kubeconfig, namespace, tmp_path / "pods-a", program=program_for_pod).start()
    operator = OperatorProcess(operator_identity.kubeconfig, tmp_path / "operator-a.log", args).start()
    try:
        yield namespace, kubelet
    finally:
        operator.stop()
        kubelet.stop()
    assert not operator.forbidden(), operator.log()


def test_two_operators_sharing_the_records_never_run_two_fleets_on_one_kafka_group(
    kafka_stage: KafkaStage, team_a_operator: tuple[str, FakeKubelet]
) -> None:
    stage, name = kafka_stage, f"kt{next(_names)}"
    team_a, kubelet = team_a_operator
    stage.kube.apply(kafka_fleet(name, 2, "kafka-python", stage.topic), namespace=team_a)
    ids = [f"{name}-0", f"{name}-1"]
    wait_until(lambda: members_of(stage.bootstrap, name) == set(ids), "team A's fleet in its group", timeout_s=90)
    before = wait_until(
        lambda: committed_partitions(stage.bootstrap, name) == 6 and 6, "team A's offsets", timeout_s=60
    )

    stage.apply(kafka_fleet(name, 0, "kafka-python", stage.topic, deleteGroupOnDelete=True))
    refused = wait_until(lambda: (c := stage.condition(name, "SpecValid")).get("reason") and c, "a refusal")
    assert (refused["status"], refused["reason"]) == ("False", "GroupOwned"), refused
    assert f"belongs to fleet {team_a}/{name}" in refused["message"]
    starts = {pod: kubelet.started.count(pod) for pod in ids}
    time.sleep(WATCH_S)
    stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=60s")
    assert removals(stage, name) == [] and members_of(stage.bootstrap, name) == set(ids)
    assert committed_partitions(stage.bootstrap, name) == before
    assert {pod: kubelet.started.count(pod) for pod in ids} == starts
    # Team A's fleet is still its group's: deleting it releases the record (no fleet owns the group any more), and
    # the group it leaves keeps team A's offsets (Kafka fleets keep their group by default): in use, so a later
    # fleet of another team is refused GroupInUse, no longer GroupOwned (issue 30: it took the group over).
    stage.kube.kubectl("delete", "cf", name, "-n", team_a, "--wait=true", "--timeout=90s")
    assert committed_partitions(stage.bootstrap, name) == before
    stage.apply(kafka_fleet(name, 0, "kafka-python", stage.topic))
    wait_until(
        lambda: stage.condition(name, "SpecValid").get("reason") == "GroupInUse",
        "the later fleet refused: the group is in use (its offsets), owned by no fleet",
    )
    assert stage.messages(name, "GroupClaimed") == []
    stage.kubectl("delete", "cf", name, "--wait=true", "--timeout=60s")
    assert committed_partitions(stage.bootstrap, name) == before


def test_deleting_a_kafka_fleet_that_deletes_its_group_reports_the_deletion_not_a_failure(
    kafka_stage: KafkaStage,
) -> None:
    """Issue 22, point 9: kafka-python 3 answers a deleted group "OK", which the operator took for a failure: a
    CoordinatorUnreachable Warning and retries of a deletion that had happened."""
    stage, name = kafka_stage, f"kd{next(_names)}"
    ids = [f"{name}-0"]
    stage.apply(kafka_fleet(name, 1, "kafka-python", stage.topic, deleteGroupOnDelete=True))
    stage.owning_everything(ids)
    stage.kubectl("delete", "cf", name, "--wait=false")
    wait_until(lambda: stage.get("cf", name) is None, "the fleet released", timeout_s=90)
    assert stage.messages(name, "GroupDeleted") == [f"deleted group {name}"]
    finalized = stage.messages(name, "Finalized")
    assert finalized and f"left and deleted group {name}" in finalized[-1]
    assert stage.events(name, "CoordinatorUnreachable") == []
    assert members_of(stage.bootstrap, name) == set() and committed_partitions(stage.bootstrap, name) == 0
