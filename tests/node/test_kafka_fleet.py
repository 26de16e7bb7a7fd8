"""A Kafka fleet from deploy/examples/kafka-python-orders.yaml on real pods, its consumers on a Kafka-protocol broker.

How pods reach the broker here: kfake listens on, and advertises, 127.0.0.1 only, so it runs inside the node's
network namespace, and the pods that talk to it use the node's network (``hostNetwork: true`` with
``dnsPolicy: ClusterFirstWithHostNet``, so Services still resolve): the example's consumer pods, and the chart's
operator (``operator.kafka.bootstrapServers`` set with ``helm upgrade --reuse-values``, the Deployment patched onto
the node's network; both undone afterwards). A real Kafka cluster advertises addresses pods reach, and needs none
of this (docs/install.md, "Tested on").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
import yaml
from support.kafka_broker import BROKER_CONFIGS, find_kfake
from support.kube import wait_until
from support.kube_fixtures import unavailable
from support.node import Node
from support.node_stage import CHART, EXAMPLES, FleetStage, Release

pytestmark = [pytest.mark.node, pytest.mark.kafka, pytest.mark.timeout(900)]

ON_NODE_NETWORK = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
PARTITIONS = 6


@pytest.fixture(scope="module")
def node_bootstrap(node: Node, berth_release: Release) -> Iterator[str]:
    """kfake on the node's network, and the release's operator using it as its default Kafka connection."""
    kfake = find_kfake()
    if kfake is None:
        unavailable("the node's Kafka fleet needs kfake (../shared/tools/kafka/bin/kfake beside the repository)")
    assert kfake is not None
    bootstrap = node.start_kfake(kfake, BROKER_CONFIGS)
    kube = berth_release.kube
    operator = ["-n", "berth", "deployment/berth-operator"]
    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
              "--set", f"operator.kafka.bootstrapServers={bootstrap}")  # fmt: skip
    kube.kubectl(
        "patch", *operator, "--type=merge", "-p", json.dumps({"spec": {"template": {"spec": ON_NODE_NETWORK}}})
    )
    berth_release.rollout()
    yield bootstrap
    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
              "--set", "operator.kafka.bootstrapServers=")  # fmt: skip
    back = {"spec": {"template": {"spec": {"hostNetwork": None, "dnsPolicy": "ClusterFirst"}}}}
    kube.kubectl("patch", *operator, "--type=merge", "-p", json.dumps(back))
    berth_release.rollout()


def assignments(stage: FleetStage, pod: str) -> list[list[str]]:
    log = stage.kubectl("logs", pod)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [line["partitions"] for line in lines if line.get("event") == "assigned"]


def test_kafka_python_consumer_pods_reach_the_broker_and_a_scale_down_removes_the_departed_once(
    stage: FleetStage, node: Node, node_bootstrap: str
) -> None:
    topic = f"orders-{stage.name}"
    create = (
        f"from support.kafka_fixtures import create_topic; create_topic({node_bootstrap!r}, {topic!r}, {PARTITIONS})"
    )
    node.run_inside(sys.executable, "-c", create)
    fleet = yaml.safe_load((EXAMPLES / "kafka-python-orders.yaml").read_text())
    fleet["metadata"]["name"] = stage.name
    fleet["spec"]["groupId"] = stage.name
    fleet["spec"]["template"]["spec"] |= ON_NODE_NETWORK
    fleet["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "KAFKA_TOPIC", "value": topic}]
    stage.kube.apply(fleet, namespace=stage.namespace)

    ids = [f"{stage.name}-{i}" for i in range(3)]
    wait_until(
        lambda: (
            stage.condition("Ready").get("status") == "True"
            and (stage.status().get("group") or {}).get("members") == ids
        ),
        "three consumer pods in the group",
        timeout_s=300,
        every_s=1,
    )

    def owned() -> set[str]:
        return {p for pod in ids for p in (assignments(stage, pod) or [[]])[-1]}

    wait_until(lambda: owned() == {f"{topic}:{p}" for p in range(PARTITIONS)}, "every partition owned", timeout_s=120)

    stage.kubectl("scale", f"cf/{stage.name}", "--replicas=2")
    last = wait_until(lambda: stage.status().get("lastScaleDown"), "the batch removal", timeout_s=180)
    assert last["removed"] == [ids[2]]
    assert ids[2] in stage.watch.gone_at
    wait_until(lambda: (stage.status().get("group") or {}).get("members") == ids[:2], "two members", timeout_s=120)
