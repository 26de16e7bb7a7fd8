"""The real operator with the Kafka backend on the real control plane, end to end, with real kafka-python and
confluent-kafka consumers (the example programs) as the pods' members on kfake (or BERTH_KAFKA_BOOTSTRAP).

``berth-operator`` runs as the chart's ServiceAccount with the test broker as its default Kafka connection; the
StatefulSet controller creates the pods; the fake kubelet runs one consumer process per pod with the pod's
environment. What must hold (issue 13): a rolling restart costs 0 rebalances; a scale-down sends ONE removal naming
exactly the departed ids, and the survivors own every partition well before the session timeout (the removal, not
the timeout, hands their partitions over: the 2 s goal is measured by benchmarks/kafka_scale_down.py); a
deleted fleet leaves everyone and keeps its group (and offsets); untrusted, unreachable or credential-less clusters
are refused with a condition and an Event, and nothing is sent there.
"""

from __future__ import annotations

import itertools
import json

import pytest
from support.kafka_stage import KafkaStage, kafka_fleet
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.kafka, pytest.mark.slow]

#: The fleets' session timeout (``kafka_fleet``): without the removal, the survivors would own the departed
#: members' partitions only once it expired.
SESSION_TIMEOUT_S = 30.0
_names = itertools.count(1)


def fleet_name(client: str) -> str:
    return f"{'kp' if client == 'kafka-python' else 'ck'}{next(_names)}"


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_a_rolling_restart_costs_no_rebalance_and_a_scale_down_one_removal_of_exactly_the_departed(
    kafka_stage: KafkaStage, client: str
) -> None:
    stage, name = kafka_stage, fleet_name(client)
    ids = [f"{name}-{i}" for i in range(5)]
    stage.apply(kafka_fleet(name, 5, client, stage.topic))
    stage.settled(name, ids)
    wait_until(lambda: stage.condition(name, "Ready").get("status") == "True", "Ready=True", timeout_s=60)
    status = stage.status(name)
    assert status["group"]["members"] == ids
    assert "generation" not in status["group"]  # classic DescribeGroups has none: status shows none, not -1
    assert stage.condition(name, "PreRegistration")["reason"] == "NotSupportedByKafka"
    env = {
        var["name"]: var for var in stage.get("statefulset", name)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["BERTH_KAFKA_BOOTSTRAP_SERVERS"]["value"] == stage.bootstrap
    assert env["BERTH_KAFKA_SECURITY_PROTOCOL"]["value"] == "PLAINTEXT"
    assert "BERTH_COORDINATOR_URL" not in env

    # Rolling restart, highest ordinal first as the StatefulSet controller rolls: each pod deleted, recreated,
    # and its consumer back as the same static member.
    rolled_at = stage.roll(ids)
    ownership = stage.owning_everything(ids)
    # A rebalance reassigns every member; each restarted member's own assignment on rejoining is not one.
    rebalances = max(ownership.assignment_count([pod], after=rolled_at) - 1 for pod in ids)
    print(f"\n{client}: rolling restart of 5 static members: {rebalances} rebalances")
    assert rebalances == 0

    # Scale-down 5 -> 3: ONE removal naming exactly the departed ids, once their pods are gone.
    stage.kubectl("scale", f"cf/{name}", "--replicas=3")
    last = wait_until(lambda: stage.status(name).get("lastScaleDown"), "lastScaleDown", timeout_s=60)
    departed, survivors = ids[3:], ids[:3]
    assert last["removed"] == departed
    assert last["results"] == dict.fromkeys(departed, "NONE")
    # Classic Kafka groups report no generation: the leave claims no rebalance count it could not have measured.
    # The Event is posted after the status write that shows lastScaleDown: no order between them is promised.
    said = wait_until(lambda: stage.messages(name, "LeftGroup"), "the LeftGroup Event")
    assert said == [f"left the group: {', '.join(departed)}"]
    assert "rebalances" not in stage.status(name)["lastScaleDown"]
    gone = max(stage.kubelet.gone_at[pod] for pod in departed)
    ownership = stage.owning_everything(survivors)
    took = ownership.covered_at(survivors, stage.partitions()) - gone
    print(f"{client}: scale-down 5 -> 3: survivors own every partition {took:.2f} s after the departed pods are gone")
    assert took < SESSION_TIMEOUT_S / 3, f"{took:.2f} s: the removal did not hand the partitions over"
    wait_until(lambda: stage.status(name).get("group", {}).get("members") == survivors, "status.group at 3")

    # What the operator observed went into the evidence journal, in the pipeline's format.
    # The evidence names the group by its advice key, kafka://<cluster>/<group> (issue 22, point 6).
    mine = [event for event in stage.evidence() if event["group_id"] == f"kafka://{stage.bootstrap}/{name}"]
    left = [event["group_instance_id"] for event in mine if event["type"] == "member_left"]
    assert left == departed and all(event["via"] == "admin" for event in mine if event["type"] == "member_left")
    replaced = {event["group_instance_id"] for event in mine if event["type"] == "static_member_replaced"}
    assert replaced <= set(ids)
    assert all(event["offline_ms"] >= 0 for event in mine if event["type"] == "static_member_replaced")
    # The same observations are the fleet's count of static restarts (Kafka keeps no journal: the operator sees a
    # restart as an instance id back under a new member id between two describes).
    restarted = sum(1 for event in mine if event["type"] == "static_member_replaced")
    assert restarted >= 1 and stage.status(name)["restarts"]["static"] == restarted
    assert [event["seq"] for event in stage.evidence()] == sorted(event["seq"] for event in stage.evidence())


def test_deleting_a_kafka_fleet_removes_its_members_and_keeps_the_group_with_its_offsets(
    kafka_stage: KafkaStage,
) -> None:
    from kafka.admin import KafkaAdminClient

    stage, name = kafka_stage, fleet_name("kafka-python")
    ids = [f"{name}-0", f"{name}-1"]
    stage.apply(kafka_fleet(name, 2, "kafka-python", stage.topic))
    stage.owning_everything(ids)
    stage.kubectl("delete", "cf", name, "--wait=false")
    wait_until(lambda: stage.get("cf", name) is None, "the fleet released", timeout_s=90)
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap.split(","))
    try:
        described = admin.describe_groups([name])[name]
    finally:
        admin.close()
    # Kept (deleteGroupOnDelete defaults to false on Kafka), and nobody is left in it.
    assert described["group_state"] == "Empty" and described["members"] == []
    finalized = stage.messages(name, "Finalized")
    assert finalized and "kept, with its committed offsets" in finalized[-1]


def test_a_fleet_naming_a_cluster_the_operator_does_not_trust_is_refused_and_nothing_is_sent_there(
    kafka_stage: KafkaStage,
) -> None:
    stage = kafka_stage
    fleet = kafka_fleet("elsewhere", 1, "kafka-python", stage.topic)
    fleet["spec"]["coordinator"] = {"kafka": {"bootstrapServers": "kafka.other-team.svc:9092"}}
    stage.apply(fleet)
    ready = wait_until(lambda: (c := stage.condition("elsewhere", "SpecValid")).get("reason") and c, "a refusal")
    assert (ready["status"], ready["reason"]) == ("False", "UntrustedEndpoint")
    assert "kafka.other-team:9092 are not a cluster the operator trusts" in ready["message"]
    warnings = wait_until(lambda: stage.events("elsewhere", "UntrustedEndpoint"), "the Warning Event")
    assert warnings[0]["type"] == "Warning"
    assert stage.get("statefulset", "elsewhere") is None


def test_an_unreachable_trusted_cluster_and_a_missing_credentials_secret_are_conditions_and_events(
    kafka_stage: KafkaStage, unreachable_kafka: str
) -> None:
    stage = kafka_stage
    down = kafka_fleet("down", 1, "kafka-python", stage.topic)
    down["spec"]["coordinator"] = {"kafka": {"bootstrapServers": unreachable_kafka}}
    locked = kafka_fleet("locked", 1, "kafka-python", stage.topic)
    locked["spec"]["coordinator"] = {
        "kafka": {
            "securityProtocol": "SASL_PLAINTEXT",
            "saslMechanism": "SCRAM-SHA-512",
            "credentialsSecretRef": {"name": "locked-kafka"},
        }
    }
    stage.apply(down, locked)
    reachable = wait_until(
        lambda: (c := stage.condition("down", "CoordinatorReachable")).get("status") == "False" and c,
        "CoordinatorReachable=False",
        timeout_s=60,
    )
    assert reachable["reason"] == "Unreachable" and f"kafka://{unreachable_kafka}" in reachable["message"]
    assert (
        wait_until(lambda: stage.events("down", "CoordinatorUnreachable"), "the Warning Event")[0]["type"] == "Warning"
    )
    assert stage.get("statefulset", "down") is None  # nothing is created before the cluster's bounds are known
    refused = wait_until(lambda: (c := stage.condition("locked", "SpecValid")).get("reason") and c, "a refusal")
    assert (refused["reason"], refused["message"]) == (
        "CredentialsMissing",
        f"Secret {stage.namespace}/locked-kafka does not exist",
    )
    # No secret value in status or Events, ever: here there is none to leak, but the shapes are the same.
    assert "password" not in json.dumps(stage.status("locked"))
