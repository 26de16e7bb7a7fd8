"""A drain on three nodes of a Kafka fleet (deploy/examples/kafka-python-orders.yaml, kafka-python consumers with
static membership) on the test broker: each evicted consumer comes back on another node as itself, and no
consumer that stayed is handed a new assignment (no rebalance).

The broker (kfake) listens on, and advertises, 127.0.0.1 on the first node; every other node relays its loopback to
it (``Cluster.loopback_everywhere``), so the consumers, on their nodes' networks (``hostNetwork``, as in
test_kafka_fleet), reach it at the address it advertises wherever they run; so does the operator (one replica on the
node's network, as there; restored afterwards)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
import yaml
from support.kafka_broker import BROKER_CONFIGS, find_kfake
from support.kube import wait_until
from support.kube_fixtures import unavailable
from support.node import Cluster
from support.node_stage import CHART, EXAMPLES, FleetStage, Release

pytestmark = [pytest.mark.soak, pytest.mark.node, pytest.mark.kafka, pytest.mark.timeout(900)]

ON_NODE_NETWORK = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
PARTITIONS = 8
REPLICAS = 4


@pytest.fixture(scope="module")
def bootstrap_everywhere(three_nodes: Cluster, berth_release: Release) -> Iterator[str]:
    kfake = find_kfake()
    if kfake is None:
        unavailable("the Kafka drain needs kfake (../shared/tools/kafka/bin/kfake beside the repository)")
    assert kfake is not None
    first = three_nodes.nodes[0]
    bootstrap = first.start_kfake(kfake, BROKER_CONFIGS)
    three_nodes.loopback_everywhere(first, int(bootstrap.rsplit(":", 1)[1]))
    kube = berth_release.kube
    operator = ["-n", "berth", "deployment/berth-operator"]
    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
              "--set", f"operator.kafka.bootstrapServers={bootstrap}", "--set", "operator.replicas=1")  # fmt: skip
    kube.kubectl(
        "patch", *operator, "--type=merge", "-p", json.dumps({"spec": {"template": {"spec": ON_NODE_NETWORK}}})
    )
    berth_release.rollout()
    yield bootstrap
    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
              "--set", "operator.kafka.bootstrapServers=", "--set", "operator.replicas=2")  # fmt: skip
    back = {"spec": {"template": {"spec": {"hostNetwork": None, "dnsPolicy": "ClusterFirst"}}}}
    kube.kubectl("patch", *operator, "--type=merge", "-p", json.dumps(back))
    berth_release.rollout()


def assignments(stage: FleetStage, pod: str) -> list[list[str]]:
    log = stage.kubectl("logs", pod)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [line["partitions"] for line in lines if line.get("event") == "assigned"]


def test_a_drained_kafka_fleet_comes_back_as_itself_and_no_consumer_that_stayed_is_reassigned(
    stage: FleetStage, three_nodes: Cluster, bootstrap_everywhere: str
) -> None:
    topic = f"orders-{stage.name}"
    create = (
        "from support.kafka_fixtures import create_topic;"
        f" create_topic({bootstrap_everywhere!r}, {topic!r}, {PARTITIONS})"
    )
    three_nodes.nodes[0].run_inside(sys.executable, "-c", create)
    fleet = yaml.safe_load((EXAMPLES / "kafka-python-orders.yaml").read_text())
    fleet["metadata"]["name"] = stage.name
    fleet["spec"] |= {"groupId": stage.name, "replicas": REPLICAS}
    fleet["spec"]["template"]["spec"] |= ON_NODE_NETWORK
    (container,) = fleet["spec"]["template"]["spec"]["containers"]
    container["env"] = [{"name": "KAFKA_TOPIC", "value": topic}]
    container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", "3"]}}}
    stage.kube.apply(fleet, namespace=stage.namespace)
    ids = [f"{stage.name}-{i}" for i in range(REPLICAS)]
    wait_until(
        lambda: (
            stage.condition("Ready").get("status") == "True"
            and (stage.status().get("group") or {}).get("members") == ids
        ),
        f"{REPLICAS} consumer pods in the group",
        timeout_s=300,
        every_s=1,
    )

    def owned() -> set[str]:
        return {p for pod in ids for p in (assignments(stage, pod) or [[]])[-1]}

    wait_until(lambda: owned() == {f"{topic}:{p}" for p in range(PARTITIONS)}, "every partition owned", timeout_s=120)

    pods = {pod: stage.kube.get("pod", pod, namespace=stage.namespace) for pod in ids}
    placed = Counter(p["spec"]["nodeName"] for p in pods.values())
    coordinator_node = stage.release.coordinator_pod()["spec"]["nodeName"]
    drained = next(name for name, _ in placed.most_common() if name != coordinator_node)
    on_it = sorted(pod for pod, p in pods.items() if p["spec"]["nodeName"] == drained)
    stayed = [pod for pod in ids if pod not in on_it]
    before = {pod: len(assignments(stage, pod)) for pod in stayed}
    print(f"\nKafka fleet of {REPLICAS} on three nodes: {dict(placed)}; draining {drained} ({on_it})")

    result = stage.kube.kubectl(
        "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=600s", check=False
    )
    try:
        assert result.returncode == 0, result.stderr
        wait_until(
            lambda: all(
                (p := stage.kube.get("pod", pod, namespace=stage.namespace))
                and p["metadata"]["uid"] != pods[pod]["metadata"]["uid"]
                and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
                for pod in on_it
            ),
            "the evicted consumers back",
            timeout_s=300,
            every_s=1,
        )
        for pod in on_it:
            assert stage.kube.get("pod", pod, namespace=stage.namespace)["spec"]["nodeName"] != drained
        wait_until(lambda: owned() == {f"{topic}:{p}" for p in range(PARTITIONS)}, "every partition owned again",
                   timeout_s=120)  # fmt: skip
        wait_until(lambda: (stage.status().get("group") or {}).get("members") == ids, "the same members",
                   timeout_s=120)  # fmt: skip
        after = {pod: len(assignments(stage, pod)) for pod in stayed}
        print(f"assignments of the consumers that stayed, before and after: {before} -> {after}")
        assert after == before  # none was handed a new assignment: no rebalance
        restarts = stage.status().get("restarts")
        print(f"status.restarts: {restarts}")
    finally:
        stage.kube.kubectl("uncordon", drained)
