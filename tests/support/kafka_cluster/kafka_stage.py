"""The Kafka tier's world on the control plane: one namespace served by an operator whose default Kafka connection
is the test broker, a fake kubelet running the example consumers, and ways to read what happened.

``kafka_fleet`` builds a fleet whose pods run one of the example consumer programs (deploy/examples/consumers/),
with the container exactly as the example fleets have it, so the fake kubelet runs that program from this
checkout with the pod's environment (``consumer_protocol_fleet``: confluent-kafka on KIP-848's consumer protocol).
``grant_secret_reads`` binds the chart's ClusterRole for Kafka fleets' Secrets in a namespace, as an administrator
does for each namespace of Kafka fleets (the chart grants no cluster-wide Secret read).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.fake_kubelet import FakeKubelet
from support.kafka_consumers import CLIENTS, Ownership, program_for_pod, read_lines
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

Obj = dict[str, Any]


def kafka_fleet(name: str, replicas: int, client: str, topic: str, **spec: Any) -> Obj:
    program = CLIENTS[client]
    consumer = {
        "name": "consumer",
        "image": "python:3.12-slim",
        "command": ["sh", "-c"],
        "args": [f"exec python /app/{program}"],
        # The client's own log goes to the pod's .err file (the fake kubelet keeps it).
        "env": [{"name": "KAFKA_TOPIC", "value": topic}, {"name": "LOG_LEVEL", "value": "INFO"}],
    }
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "coordinator": {"kafka": {}},
            "sessionTimeout": {"policy": "Fixed", "fixedMs": 30000},
            "podManagementPolicy": "Parallel",
            "template": {"spec": {"terminationGracePeriodSeconds": 5, "containers": [consumer]}},
            **spec,
        },
    }


def consumer_protocol_fleet(name: str, replicas: int, topic: str, **spec: Any) -> Obj:
    """A fleet of confluent-kafka consumers on KIP-848's consumer protocol, its session timeout sized (Auto)."""
    fleet = kafka_fleet(name, replicas, "confluent-kafka", topic, **spec)
    fleet["spec"]["coordinator"]["kafka"] = {"groupProtocol": "consumer", **fleet["spec"]["coordinator"]["kafka"]}
    if "sessionTimeout" not in spec:
        fleet["spec"].pop("sessionTimeout")
    return fleet


def grant_secret_reads(kube: Kube, namespace: str, *, release: str = "berth", release_namespace: str = "berth") -> None:
    """The RoleBinding the chart makes for each of operator.kafka.secretNamespaces, made for ``namespace``."""
    role = f"{release}-operator-kafka-secrets"
    kube.kubectl(
        "create",
        "rolebinding",
        role,
        "-n",
        namespace,
        f"--clusterrole={role}",
        f"--serviceaccount={release_namespace}:{release}-operator",
    )


@dataclass
class KafkaStage:
    kube: Kube
    namespace: str
    kubelet: FakeKubelet
    bootstrap: str
    topic: str
    evidence_dir: Path
    directory: Path  # the stage's own scratch directory
    operator_args: list[str]  # what its operator runs with (another team's operator may share them)
    metrics_url: str = ""

    def apply(self, *fleets: Obj) -> None:
        self.kube.apply(*fleets, namespace=self.namespace)

    def kubectl(self, *args: str) -> str:
        return self.kube.kubectl(*args, "-n", self.namespace).stdout

    def get(self, kind: str, name: str) -> Any:
        return self.kube.get(kind, name, namespace=self.namespace)

    def status(self, name: str) -> Obj:
        return ((self.get("cf", name) or {}).get("status")) or {}

    def condition(self, name: str, kind: str) -> Obj:
        for found in self.status(name).get("conditions") or []:
            if found["type"] == kind:
                return dict(found)
        return {}

    def events(self, name: str, reason: str) -> list[Obj]:
        found = self.kube.events(self.namespace, kind="ConsumerFleet", name=name)
        return [event for event in found if event["reason"] == reason]

    def messages(self, name: str, reason: str) -> list[str]:
        return [event["message"] for event in self.events(name, reason)]

    def ownership(self, pods: list[str]) -> Ownership:
        return Ownership({pod: read_lines(self.kubelet.log_dir / f"{pod}.out") for pod in pods})

    def partitions(self, count: int = 6) -> set[str]:
        return {f"{self.topic}:{p}" for p in range(count)}

    def evidence(self) -> list[Obj]:
        return [event for path in sorted(self.evidence_dir.glob("segment-*.jsonl")) for event in read_lines(path)]

    def metric(self, family: str, fleet: str) -> float | None:
        """The operator's ``family`` sample for ``fleet`` (in this stage's namespace) on its /metrics; None: none, or
        the endpoint not listening yet (a test run alone may ask before the operator's start-up got that far)."""
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.metrics_url, timeout=10) as answer:
                text = answer.read().decode()
        except urllib.error.URLError:
            return None
        wanted = {"namespace": self.namespace, "fleet": fleet}
        for line in text.splitlines():
            found = re.fullmatch(rf"{re.escape(family)}\{{(.*)\}} (\S+)", line)
            if found and dict(re.findall(r'(\w+)="([^"]*)"', found.group(1))) == wanted:
                return float(found.group(2))
        return None

    def settled(self, name: str, pods: list[str]) -> Ownership:
        """The fleet's group Stable with exactly ``pods`` as members, each owning its share of every partition."""
        wait_until(
            lambda: (
                (group := self.status(name).get("group") or {}).get("state") == "Stable"
                and group.get("members") == pods
            ),
            f"group {name} Stable with {', '.join(pods)}",
            timeout_s=90,
        )
        return self.owning_everything(pods)

    def owning_everything(self, pods: list[str]) -> Ownership:
        return wait_until(
            lambda: (found := self.ownership(pods)).covers(pods, self.partitions()) and found,
            f"{', '.join(pods)} to own every partition",
            timeout_s=90,
        )

    def roll(self, pods: list[str]) -> float:
        """A rolling restart as the StatefulSet controller does one (highest ordinal first): each pod deleted,
        started again, and its consumer assigned again before the next; when it began (``time.time()``)."""
        rolled_at = time.time()
        for pod in reversed(pods):
            starts = self.kubelet.started.count(pod)
            self.kubectl("delete", "pod", pod, "--wait=true")
            wait_until(lambda p=pod, n=starts: self.kubelet.started.count(p) > n, f"{pod} started again", timeout_s=60)
            wait_until(
                lambda p=pod: self.ownership([p]).assignment_count([p], after=self.kubelet.gone_at[p]) >= 1,
                f"{pod}'s consumer assigned again",
                timeout_s=60,
            )
        return rolled_at


@contextmanager
def operated_namespace(
    kube: Kube,
    identity: Kube,
    namespace: str,
    directory: Path,
    args: Sequence[str],
    *,
    bootstrap: str,
    topic: str,
    metrics_url: str = "",
    records_namespace: str = "berth-group-owners",
) -> Iterator[KafkaStage]:
    """``berth-operator --namespace NAMESPACE --group-owners-namespace RECORDS_NAMESPACE --evidence-dir ... ARGS`` as
    ``identity`` (the chart's ServiceAccount; its owner records of Kafka groups are Leases where the chart's Role
    grants them, the chart's default ``berth-group-owners``) and a fake kubelet running the example consumers for
    the namespace's pods; stopped afterwards, and the operator must have been refused nothing by the API server."""
    evidence = directory / "evidence"
    full = [
        *("--namespace", namespace, "--group-owners-namespace", records_namespace),
        *("--evidence-dir", str(evidence), *args),
    ]
    kubelet = FakeKubelet(kube.kubeconfig, namespace, directory / "pods", program=program_for_pod).start()
    operator = OperatorProcess(identity.kubeconfig, directory / "operator.log", full).start()
    try:
        yield KafkaStage(kube, namespace, kubelet, bootstrap, topic, evidence, directory, full, metrics_url)
        assert operator.process is not None and operator.process.poll() is None, operator.log()
    finally:
        operator.stop()
        kubelet.stop()
    assert kubelet.error is None, f"the fake kubelet failed: {kubelet.error!r}"
    forbidden = operator.forbidden()
    assert not forbidden, "the API server refused the operator something:\n" + "\n".join(forbidden)
