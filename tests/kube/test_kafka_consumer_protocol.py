"""The real operator managing KIP-848 consumer-protocol fleets on the real control plane, end to end: real
confluent-kafka consumers (``group.protocol=consumer``, the example program) as the pods' members, on
``kfake-kip848`` with Kafka's defaults for those groups (a 45 s session timeout), or a real Kafka >= 4.0 in
BERTH_KAFKA_BOOTSTRAP.

What must hold (issue 21): a fleet scales 5 -> 3 with ONE removal and the survivors own every partition within
seconds of the departed pods being gone (against the 45 s the broker would wait), restarts without a reassignment,
and has its session timeout set on the group, not in its pods; a crash-restarted pod refused UNRELEASED_INSTANCE_ID
shows as such (a condition and an Event naming it, a metric) and recovers once the release is on; lag shows in
``kubectl get cf``, ``/metrics`` and ``berth-groups``, and a HorizontalPodAutoscaler on it scales the fleet through
``/scale``.

kfake's consumer-protocol assignor hands a member every topic on the broker, so every fleet here reads the module's
one topic (support.kafka_fixtures); the groups settle before anything is measured (the broker README's caution).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from support.kafka_stage import KafkaStage, consumer_protocol_fleet
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.kafka, pytest.mark.slow]

_names = itertools.count(1)
#: Kafka's default session timeout for consumer-protocol groups (group.consumer.session.timeout.ms).
BROKER_TIMEOUT_S = 45


def settled_epoch(stage: KafkaStage, name: str, pods: list[str]) -> dict[str, Any]:
    """status.group once Stable with exactly ``pods``, each owning its share (the group has settled)."""
    stage.settled(name, pods)
    return wait_until(
        lambda: (
            (g := stage.status(name).get("group") or {}).get("state") == "Stable"
            and sorted(g.get("assignment") or {}) == sorted(pods)
            and g
        ),
        f"{name}'s status.group with an assignment for {', '.join(pods)}",
        timeout_s=60,
    )


def group_configs(bootstrap: str, group: str) -> dict[str, str | None]:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-tests")
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, group, None)])
    finally:
        admin.close()
    configs = next(iter(next(iter(described.values())).values()))
    return {key: value.get("value") for key, value in configs.items() if key.startswith("consumer.")}


def test_a_consumer_protocol_fleet_scales_5_to_3_with_one_removal_restarts_without_reassignment_and_keeps_its_timeout_on_the_group(  # noqa: E501
    kip848_stage: KafkaStage,
) -> None:
    stage, name = kip848_stage, f"cp{next(_names)}"
    ids = [f"{name}-{i}" for i in range(5)]
    stage.apply(consumer_protocol_fleet(name, 5, stage.topic))
    group = settled_epoch(stage, name, ids)
    wait_until(lambda: stage.condition(name, "Ready").get("status") == "True", "Ready=True", timeout_s=60)
    status = stage.status(name)
    assert group["generation"] >= 1 and group["assignmentEpoch"] == group["generation"]
    assert stage.condition(name, "GroupProtocol")["reason"] == "AsDeclared"

    # The session timeout is the group's config, sized within the broker's bounds; the pods get none.
    assert status["sessionTimeoutMs"] == 45_000
    assert "group.consumer.min.session.timeout.ms" in status["sessionTimeoutReason"]
    configs = group_configs(stage.bootstrap, name)
    assert configs["consumer.session.timeout.ms"] == "45000"
    # The heartbeat sized for fast notice within the broker's bounds: the operator's preferred 3 s raised to the
    # broker's minimum (Kafka's default 5 s), not a third of the session (15 s): survivors hear of a removal sooner.
    assert configs["consumer.heartbeat.interval.ms"] == "5000"
    assert stage.condition(name, "SessionTimeoutSufficient")["status"] == "True"
    env = {
        var["name"]: var for var in stage.get("statefulset", name)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["BERTH_KAFKA_GROUP_PROTOCOL"]["value"] == "consumer"
    assert "BERTH_SESSION_TIMEOUT_MS" not in env and "BERTH_HEARTBEAT_INTERVAL_MS" not in env

    # Rolling restart, highest ordinal first: each static member leaves with epoch -2, keeps its partitions, and
    # its new process takes them back; nobody else's assignment changes.
    before = stage.owning_everything(ids)
    owned_before = {pod: sorted(before.current(pod) or []) for pod in ids}
    rolled_at = stage.roll(ids)
    after = stage.owning_everything(ids)
    reassigned = {pod for pod in ids if sorted(after.current(pod) or []) != owned_before[pod]}
    # A restarted member's own assignment on rejoining is not a reassignment; anything else would be.
    changes = max(after.assignment_count([pod], after=rolled_at) - 1 for pod in ids)
    print(f"\nconsumer protocol: rolling restart of 5 static members: {changes} reassignments, {reassigned or 'none'}")
    assert (changes, reassigned) == (0, set())
    assert stage.messages(name, "UnreleasedInstanceId") == []  # a clean restart is not mistaken for a stale member

    # Scale-down 5 -> 3: ONE removal naming exactly the departed ids, once their pods are gone.
    stage.kubectl("scale", f"cf/{name}", "--replicas=3")
    last = wait_until(lambda: stage.status(name).get("lastScaleDown"), "lastScaleDown", timeout_s=60)
    departed, survivors = ids[3:], ids[:3]
    assert last["removed"] == departed and last["results"] == dict.fromkeys(departed, "NONE")
    # The Event is posted after the status write that shows lastScaleDown: no order between them is promised.
    said = wait_until(lambda: stage.messages(name, "LeftGroup"), "the LeftGroup Event")
    assert said == [f"left the group: {', '.join(departed)}"]
    gone = max(stage.kubelet.gone_at[pod] for pod in departed)
    ownership = stage.owning_everything(survivors)
    took = ownership.covered_at(survivors, stage.partitions()) - gone
    print(
        f"consumer protocol: scale-down 5 -> 3: survivors own every partition {took:.2f} s after the departed pods"
        f" are gone (the broker's session timeout: {BROKER_TIMEOUT_S} s)"
    )
    assert took < BROKER_TIMEOUT_S / 2, f"{took:.2f} s: the removal, not the session timeout, handed them over"
    # The rebalances it cost are counted from the group's epochs once it is Stable again, not assumed.
    counted = wait_until(
        lambda: (s := stage.status(name).get("lastScaleDown") or {}).get("rebalances") is not None and s,
        "the scale-down's rebalances counted",
        timeout_s=60,
    )
    assert counted["rebalances"] >= 1
    assert stage.status(name)["group"]["generation"] >= counted["fromGeneration"] + counted["rebalances"]
    said = wait_until(lambda: stage.messages(name, "Rebalanced"), "the Rebalanced Event")
    assert f"{counted['rebalances']} rebalance" in said[-1]
    wait_until(lambda: stage.status(name).get("group", {}).get("members") == survivors, "status.group at 3")


def test_a_crash_restarted_pod_stuck_on_unreleased_instance_id_shows_as_such_and_recovers_when_the_release_is_on(
    kip848_stage: KafkaStage,
) -> None:
    stage, name = kip848_stage, f"cp{next(_names)}"
    ids = [f"{name}-{i}" for i in range(3)]
    stage.apply(consumer_protocol_fleet(name, 3, stage.topic))
    settled_epoch(stage, name, ids)
    victim = ids[1]

    # The process dies without a word (no epoch -2) and its pod is replaced, as when a node is lost.
    crashed_at = time.time()
    starts = stage.kubelet.started.count(victim)
    stage.kubelet.kill(victim)
    stage.kubectl("delete", "pod", victim, "--grace-period=0", "--force")
    wait_until(lambda: stage.kubelet.started.count(victim) > starts, f"{victim} started again", timeout_s=60)
    refused = wait_until(
        lambda: [e for e in stage.kubelet.lines(victim) if e.get("event") == "fatal" and e["t"] > crashed_at],
        f"{victim}'s new consumer refused",
        timeout_s=60,
    )
    assert "instance ID is still used" in refused[0]["error"]  # UNRELEASED_INSTANCE_ID, as librdkafka words it

    # Shown as such: a condition and a Warning Event naming the pod, and a metric.
    conflict = wait_until(
        lambda: (c := stage.condition(name, "InstanceIdConflict")).get("status") == "True" and c,
        "InstanceIdConflict=True",
        timeout_s=60,
    )
    assert conflict["reason"] == "UnreleasedInstanceId" and conflict["message"].startswith(f"{victim}: ")
    assert "releaseStaleInstances: true would release" in conflict["message"]
    warned = wait_until(lambda: stage.events(name, "UnreleasedInstanceId"), "the Warning Event")
    assert warned[0]["type"] == "Warning" and warned[0]["message"].startswith(f"{victim}: ")
    assert wait_until(lambda: stage.metric("berth_operator_unreleased_instances", name), "the gauge at 1") == 1
    pod = stage.get("pod", victim)
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"]
    print(f"\n{victim} is Ready={ready} while its consumer is refused")

    # The release on: the stale member is removed, and the restarted pod consumes again.
    stage.kubectl(
        "patch", f"cf/{name}", "--type=merge", "-p", '{"spec":{"coordinator":{"kafka":{"releaseStaleInstances":true}}}}'
    )
    released = wait_until(lambda: stage.messages(name, "StaleInstanceReleased"), "the release", timeout_s=60)
    assert victim in released[0]
    wait_until(
        lambda: any(
            e.get("event") == "assigned" and e["t"] > crashed_at and e["partitions"]
            for e in stage.kubelet.lines(victim)
        ),
        f"{victim} consuming again",
        timeout_s=60,
    )
    back = min(
        e["t"]
        for e in stage.kubelet.lines(victim)
        if e.get("event") == "assigned" and e["t"] > crashed_at and e["partitions"]
    )
    print(
        f"{victim}: consuming again {back - crashed_at:.1f} s after the crash (released; without the release the"
        f" broker keeps its previous member for {BROKER_TIMEOUT_S} s)"
    )
    assert back - crashed_at < BROKER_TIMEOUT_S, "the release, not the session timeout, freed the instance id"
    wait_until(lambda: stage.condition(name, "InstanceIdConflict").get("status") == "False", "the conflict gone")
    wait_until(lambda: stage.metric("berth_operator_unreleased_instances", name) == 0, "the gauge back at 0")
    assert stage.metric("berth_operator_stale_instances_released_total", name) == 1


def produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(count):
        producer.produce(topic, value=b"order", partition=index % 6)
    assert producer.flush(30) == 0


def test_lag_shows_in_kubectl_get_cf_metrics_and_berth_groups_and_a_timeout_beyond_the_brokers_bound_is_a_condition(
    kip848_stage: KafkaStage,
) -> None:
    stage, name = kip848_stage, f"cp{next(_names)}"
    ids = [f"{name}-0", f"{name}-1"]
    fleet = consumer_protocol_fleet(name, 2, stage.topic)
    fleet["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 60  # (60 + 10) x 1.5 = 105 s wanted
    stage.apply(fleet)
    settled_epoch(stage, name, ids)

    # The estimate asks for more than the broker allows: the most it allows, and a condition naming the setting.
    status = stage.status(name)
    assert status["sessionTimeoutMs"] == 60_000
    capped = stage.condition(name, "SessionTimeoutSufficient")
    assert (capped["status"], capped["reason"]) == ("False", "CoordinatorMaximum")
    assert (
        "asks for 105.0 s" in capped["message"] and "raise group.consumer.max.session.timeout.ms" in capped["message"]
    )
    assert group_configs(stage.bootstrap, name)["consumer.session.timeout.ms"] == "60000"

    # Consumed and committed: no lag on any partition.
    produce(stage.bootstrap, stage.topic, 60)
    wait_until(
        lambda: (lag := stage.status(name).get("lag") or {}).get("partitions") == 6 and lag.get("total") == 0,
        "lag 0 over 6 committed partitions",
        timeout_s=90,
    )
    # Nobody consuming: what is produced now is lag.
    stage.kubectl("scale", f"cf/{name}", "--replicas=0")
    wait_until(lambda: (stage.status(name).get("lastScaleDown") or {}).get("removed") == ids, "both removed")
    produce(stage.bootstrap, stage.topic, 120)
    lag = wait_until(
        lambda: (found := stage.status(name).get("lag") or {}).get("total") == 120 and found,
        "status.lag.total 120",
        timeout_s=60,
    )
    assert sum(p["lag"] for p in lag["byPartition"]) == 120 and lag["maxPartition"] == 20

    header, row = stage.kubectl("get", "cf", name).splitlines()
    assert row[header.index(" LAG ") + 1 : header.index(" STATUS ")].strip() == "120", f"{header}\n{row}"
    assert wait_until(lambda: stage.metric("berth_operator_fleet_lag", name) == 120, "the lag gauge at 120")
    assert stage.metric("berth_operator_fleet_lag_max_partition", name) == 20

    import contextlib
    import io

    from berth.coordinator.groups.groups_cli import main as berth_groups

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert berth_groups(["--bootstrap-server", stage.bootstrap, "describe", name]) == 0
    rows = out.getvalue().splitlines()
    lag_column = rows[0].split().index("LAG")
    assert sum(int(row.split()[lag_column]) for row in rows[1:]) == 120, out.getvalue()


def test_an_hpa_on_the_fleets_lag_scales_it_through_the_scale_subresource(
    kip848_stage: KafkaStage, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from kafka.admin import KafkaAdminClient, OffsetSpec
    from kafka.structs import OffsetAndMetadata, TopicPartition
    from support.external_metrics import METRIC, ExternalMetrics

    stage, name = kip848_stage, f"cp{next(_names)}"
    fleet = consumer_protocol_fleet(name, 1, stage.topic)
    # Its pods never run a consumer (the kubelet knows no such program): nothing drains the lag while it scales.
    fleet["spec"]["template"]["spec"]["containers"][0]["args"] = ["exec python /app/not-started.py"]
    stage.apply(fleet)
    # The group is the fleet's before offsets are set on it: a group with committed offsets and no owner is in use
    # by consumers no fleet owns, and a claim after them is refused (GroupInUse).
    wait_until(lambda: stage.condition(name, "SpecValid").get("status") == "True", "the group claimed", timeout_s=60)
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap.split(","), client_id="berth-tests")
    try:
        partitions = [TopicPartition(stage.topic, p) for p in range(6)]
        ends = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        admin.alter_group_offsets(name, {tp: OffsetAndMetadata(ends[tp].offset, "", -1) for tp in partitions})
    finally:
        admin.close()
    produce(stage.bootstrap, stage.topic, 300)
    wait_until(lambda: stage.metric("berth_operator_fleet_lag", name) == 300, "the lag gauge at 300", timeout_s=60)

    external = ExternalMetrics(stage.metrics_url, tmp_path_factory.mktemp("external-metrics")).start()
    try:
        external.register(stage.kube, stage.namespace)
        wait_until(
            lambda: any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (stage.kube.get("apiservice", "v1beta1.external.metrics.k8s.io") or {})
                .get("status", {})
                .get("conditions", [])
            ),
            "the external metrics APIService Available",
            timeout_s=60,
        )
        hpa = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {
                "scaleTargetRef": {"apiVersion": "berth.dev/v1alpha1", "kind": "ConsumerFleet", "name": name},
                "minReplicas": 1,
                "maxReplicas": 5,
                "metrics": [
                    {
                        "type": "External",
                        "external": {
                            "metric": {"name": METRIC, "selector": {"matchLabels": {"fleet": name}}},
                            "target": {"type": "AverageValue", "averageValue": "100"},
                        },
                    }
                ],
            },
        }
        created = time.time()
        stage.apply(hpa)
        # 300 records of lag at 100 per pod: 3 pods, through the fleet's /scale subresource.
        wait_until(
            lambda: stage.get("cf", name)["spec"]["replicas"] == 3, "the HPA scaling the fleet to 3", timeout_s=120
        )
        took = time.time() - created
        conditions = {
            c["type"]: c
            for c in wait_until(lambda: stage.get("hpa", name).get("status", {}).get("conditions"), "HPA conditions")
        }
        assert conditions["AbleToScale"]["status"] == "True"
        assert (conditions["ScalingActive"]["status"], conditions["ScalingActive"]["reason"]) == (
            "True",
            "ValidMetricFound",
        )
        wait_until(
            lambda: stage.get("statefulset", name)["spec"]["replicas"] == 3, "the operator scaling the StatefulSet"
        )
        assert external.asked, "the HPA controller asked the external metrics API"
        print(f"\nHPA on berth_fleet_lag: fleet scaled 1 -> 3 through /scale {took:.1f} s after the HPA was created")
    finally:
        stage.kubectl("delete", "hpa", name, "--ignore-not-found")
        external.unregister(stage.kube, stage.namespace)
        external.stop()
