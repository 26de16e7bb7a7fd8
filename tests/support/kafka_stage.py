"""The Kafka tier's world on the control plane: one namespace served by an operator whose default Kafka connection
is the test broker, a fake kubelet running the example consumers, and ways to read what happened.

``kafka_fleet`` builds a fleet whose pods run one of the example consumer programs (deploy/examples/consumers/),
with the container exactly as the example fleets have it, so the fake kubelet runs that program from this
checkout with the pod's environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.fake_kubelet import FakeKubelet
from support.kafka_consumers import CLIENTS, Ownership, read_lines
from support.kube import Kube, wait_until

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
