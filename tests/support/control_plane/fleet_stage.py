"""One end-to-end test's world on the control-plane tier, and ways to read what happened in it.

A :class:`Stage` is a test namespace with its fake kubelet, the operator and coordinator the test module shares, and
a consumer group of its own; its methods read the fleet's status, conditions and Events from the API server and the
group's description and journal from the coordinator, so that tests read as scenarios.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from support.coordinator import CoordinatorProcess, coordinator_get
from support.fake_kubelet import FakeKubelet
from support.kube import Kube, wait_until

Obj = dict[str, Any]
ADMIN_TOKEN = "admin-token-for-the-kube-tier"
MEMBER_TOKEN = "member-token-for-the-kube-tier"
#: The Secret (in each test namespace) the fleets' tokenSecretRef names.
MEMBER_TOKEN_SECRET = "member-token"


def write_tokens(path: Path) -> Path:
    """A coordinator tokens file with the operator's admin token and the members' token, both for every group."""
    tokens = [
        {"token": ADMIN_TOKEN, "groups": ["*"], "admin": True},
        {"token": MEMBER_TOKEN, "groups": ["*"], "admin": False},
    ]
    path.write_text(yaml.safe_dump({"tokens": tokens}))
    return path


def fleet_body(name: str, replicas: int, group: str, **spec: Any) -> Obj:
    """A fleet whose pods run the member library (12 partitions of topic orders), with a sidecar container too."""
    consumer = {"name": "consumer", "image": "berth:0.1.0", "env": [{"name": "BERTH_TOPICS", "value": "orders:12"}]}
    sidecar = {"name": "sidecar", "image": "busybox:1.36"}
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "replicas": replicas,
            "coordinator": {"tokenSecretRef": {"name": MEMBER_TOKEN_SECRET, "key": "token"}},
            "template": {"spec": {"terminationGracePeriodSeconds": 5, "containers": [consumer, sidecar]}},
            **spec,
        },
    }


# --- one fleet's world, and reading what happened in it -----------------------------------------------------------


@dataclass
class Stage:
    """One test's namespace with its fake kubelet, the shared operator and coordinator, and a group of its own."""

    kube: Kube
    namespace: str
    kubelet: FakeKubelet
    coordinator: CoordinatorProcess
    group: str
    operator_metrics_url: str = ""  # the module operator's GET /metrics

    def metric(self, name: str, name_label: str | None = "orders") -> float | None:
        """One sample of the operator's metrics for this stage's fleet ``name_label`` (None: the operator's own,
        unlabelled); None when absent."""
        with urllib.request.urlopen(self.operator_metrics_url, timeout=10) as answer:
            text = answer.read().decode()
        wanted = name if name_label is None else f'{name}{{fleet="{name_label}",namespace="{self.namespace}"}}'
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return None

    def journal(self) -> list[Obj]:
        events = coordinator_get(self.coordinator, "/v1/journal?after=0&limit=10000", ADMIN_TOKEN)["events"]
        return [event for event in events if event["group_id"] == self.group]

    def describe(self, group: str | None = None) -> Obj:
        described: Obj = coordinator_get(self.coordinator, f"/v1/groups/{group or self.group}", ADMIN_TOKEN)
        return described

    def members(self) -> set[str]:
        return {member["group_instance_id"] for member in self.describe()["members"]}

    def status(self, name: str = "orders") -> Obj:
        found = self.kube.get("cf", name, namespace=self.namespace)
        return (found or {}).get("status") or {}

    def condition(self, kind: str, name: str = "orders") -> Obj:
        for found in self.status(name).get("conditions") or []:
            if found["type"] == kind:
                return dict(found)
        return {}

    def events(self, reason: str, name: str = "orders") -> list[Obj]:
        return [e for e in self.kube.events(self.namespace, kind="ConsumerFleet", name=name) if e["reason"] == reason]

    def messages(self, reason: str, name: str = "orders") -> list[str]:
        return [event["message"] for event in self.events(reason, name)]

    def get(self, kind: str, name: str) -> Any:
        return self.kube.get(kind, name, namespace=self.namespace)

    def terminating(self, pod: str) -> bool:
        return bool(((self.get("pod", pod) or {}).get("metadata") or {}).get("deletionTimestamp"))

    def apply(self, *fleets: Obj) -> None:
        self.kube.apply(*fleets, namespace=self.namespace)

    def kubectl(self, *args: str) -> str:
        return self.kube.kubectl(*args, "-n", self.namespace).stdout

    def ready_and_stable(self, replicas: int) -> Obj:
        """Wait for Ready=True with every instance a member of the Stable group; the group's description."""
        ids = {f"orders-{i}" for i in range(replicas)}
        wait_until(lambda: self.condition("Ready").get("status") == "True", "Ready=True", timeout_s=90)
        wait_until(
            lambda: self.members() == ids and self.describe()["group_state"] == "Stable",
            f"{replicas} members in the Stable group",
        )
        return self.describe()


def rebalances(events: list[Obj]) -> list[str]:
    return [event["cause"] for event in events if event["type"] == "rebalance_started"]


def admin_leaves(events: list[Obj]) -> list[list[str]]:
    """The instance ids of each admin (batch) leave: adjacent ``member_left via admin`` events are one request."""
    batches: list[list[str]] = []
    previous = None
    for index, event in enumerate(events):
        if event["type"] == "member_left" and event.get("via") == "admin":
            if previous == index - 1:
                batches[-1].append(event["group_instance_id"])
            else:
                batches.append([event["group_instance_id"]])
            previous = index
    return batches
