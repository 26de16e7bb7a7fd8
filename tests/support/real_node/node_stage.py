"""Berth installed on the real node, and one fleet's world on it, read as scenarios.

- :func:`install_release` does what docs/install.md says, word for word: ``helm install berth charts/berth
  --namespace berth --create-namespace``, ``kubectl rollout status`` of the operator and the coordinator, then a
  token for ``orders`` groups (``helm upgrade --reuse-values --set auth.groupTokens...``, which restarts the
  coordinator). :class:`Release` keeps the transcript and reads the coordinator's API (admin token from the chart's
  Secret) on its pod's address, which this machine routes to: over HTTPS (the chart's default since issue 22),
  verified against the CA the chart generated; the address is the pod's IP, not a name the certificate carries, so
  the chain is checked and the name is not.
- :class:`FleetStage` is a test namespace with the group token copied in as docs/install.md §3 does, a fleet made
  from ``deploy/examples/orders.yaml`` (its own name and group), and a :class:`PodWatch` recording when each pod
  was really gone (the DELETED event: its containers ended and the kubelet confirmed).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from support.fleet_stage import admin_leaves, rebalances
from support.kube import Kube, wait_until

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "deploy" / "examples"
CHART = REPO / "charts" / "berth"
RELEASE, RELEASE_NAMESPACE = "berth", "berth"
GROUP_TOKEN = "orders"
ROLLOUT_TIMEOUT = "--timeout=300s"


@dataclass
class Release:
    kube: Kube
    transcript: str
    name: str = RELEASE
    namespace: str = RELEASE_NAMESPACE

    def secret_value(self, key: str) -> str:
        secret = self.kube.get("secret", f"{self.name}-coordinator-tokens", namespace=self.namespace)
        return base64.b64decode(secret["data"][key]).decode()

    @property
    def admin_token(self) -> str:
        return self.secret_value("admin-token")

    def coordinator_pod(self) -> Obj:
        pod: Obj = self.kube.get("pod", f"{self.name}-coordinator-0", namespace=self.namespace)
        return pod

    def serving_pod(self, timeout_s: float = 120) -> Obj:
        """The Ready coordinator pod: the only one with a single replica, the active one with coordinator.ha."""
        selector = f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component=coordinator"

        def found() -> Obj | None:
            pods = self.kube.get("pods", namespace=self.namespace, selector=selector)["items"]
            return next((p for p in pods if _ready(p) and not p["metadata"].get("deletionTimestamp")), None)

        return wait_until(found, "a Ready coordinator pod", timeout_s=timeout_s, every_s=0.2)

    def tls(self) -> ssl.SSLContext | None:
        """The context that verifies the coordinator against the release's CA (None: the release serves http)."""
        secret = self.kube.get("secret", f"{self.name}-coordinator-tls", namespace=self.namespace)
        if secret is None:
            return None
        context = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
        context.check_hostname = False  # reached by the pod's IP; the certificate names the Service
        return context

    def coordinator_url(self) -> str:
        scheme = "https" if self.tls() is not None else "http"
        return f"{scheme}://{self.serving_pod()['status']['podIP']}:9094"

    def coordinator_get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.coordinator_url() + path, headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        with urllib.request.urlopen(request, timeout=10, context=self.tls()) as answer:
            return json.loads(answer.read())

    def journal(self, group: str | None = None) -> list[Obj]:
        events: list[Obj] = self.coordinator_get("/v1/journal?after=0&limit=10000")["events"]
        return [e for e in events if group is None or e["group_id"] == group]

    def groups(self) -> list[str]:
        return sorted(g["group_id"] for g in self.coordinator_get("/v1/groups")["groups"])

    def rollout(self) -> None:
        self.kube.kubectl(
            "-n", self.namespace, "rollout", "status", f"deployment/{self.name}-operator", ROLLOUT_TIMEOUT
        )
        self.kube.kubectl(
            "-n", self.namespace, "rollout", "status", f"statefulset/{self.name}-coordinator", ROLLOUT_TIMEOUT
        )

    def pods_wide(self) -> str:
        return self.kube.kubectl("get", "pods", "-n", self.namespace, "-o", "wide").stdout


def _ready(pod: Obj) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def install_release(kube: Kube, chart: Path) -> Release:
    """docs/install.md §2a and §3 (a token for the ``orders`` groups), on the node."""
    transcript = kube.helm("install", RELEASE, str(chart), "--namespace", RELEASE_NAMESPACE, "--create-namespace")
    release = Release(
        kube, "$ helm install berth charts/berth --namespace berth --create-namespace\n" + transcript.stdout
    )
    release.rollout()
    kube.helm(
        "upgrade", RELEASE, str(chart), "-n", RELEASE_NAMESPACE, "--reuse-values",
        "--set", f"auth.groupTokens[0].name={GROUP_TOKEN}",
        "--set", "auth.groupTokens[0].groups={orders,orders-*}",
    )  # fmt: skip
    release.rollout()
    return release


class PodWatch:
    """When each pod of a namespace was last really gone (by name), and when each pod (by uid) was first seen being
    deleted and first seen Ready, from a watch."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        self.core = kubernetes.client.CoreV1Api(self.client)
        self.namespace = namespace
        self.gone_at: dict[str, float] = {}
        self.deleting_at: dict[str, float] = {}
        #: By pod uid (a pod recreated under its name is another pod): first seen deleting, first seen Ready.
        self.uid_deleting_at: dict[str, float] = {}
        self.uid_ready_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"pod-watch-{namespace}")
        self._thread.start()

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                for event in kubernetes.watch.Watch().stream(
                    self.core.list_namespaced_pod, self.namespace, resource_version=version, timeout_seconds=2
                ):
                    pod, now = event["object"], time.time()
                    version = pod.metadata.resource_version
                    if event["type"] == "DELETED":
                        self.gone_at[pod.metadata.name] = now
                    elif pod.metadata.deletion_timestamp is not None:
                        self.deleting_at.setdefault(pod.metadata.name, now)
                        self.uid_deleting_at.setdefault(pod.metadata.uid, now)
                    else:
                        self.deleting_at.pop(pod.metadata.name, None)
                        if any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []):
                            self.uid_ready_at.setdefault(pod.metadata.uid, now)
            except kubernetes.client.ApiException as error:
                if error.status == 410:
                    version = ""
            except Exception:  # a dropped connection: watch again
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.client.close()


@dataclass
class FleetStage:
    """A namespace with one fleet from deploy/examples/orders.yaml on the release's coordinator."""

    release: Release
    namespace: str
    name: str
    watch: PodWatch
    _marks: dict[str, int] = field(default_factory=dict)

    @property
    def kube(self) -> Kube:
        return self.release.kube

    def kubectl(self, *args: str) -> str:
        return self.kube.kubectl(*args, "-n", self.namespace).stdout

    def apply_example(self, replicas: int, **spec: Any) -> Obj:
        fleet: Obj = yaml.safe_load((EXAMPLES / "orders.yaml").read_text())
        fleet["metadata"]["name"] = self.name
        fleet["spec"] |= {"groupId": self.name, "replicas": replicas, **spec}
        self.kube.apply(fleet, namespace=self.namespace)
        return fleet

    def journal(self) -> list[Obj]:
        return self.release.journal(self.name)

    def mark(self, label: str) -> None:
        """Remember where the group's journal is now, to read what happens after."""
        self._marks[label] = len(self.journal())

    def since(self, label: str) -> list[Obj]:
        return self.journal()[self._marks[label] :]

    def rebalances_since(self, label: str) -> list[str]:
        return rebalances(self.since(label))

    def leaves_since(self, label: str) -> list[list[str]]:
        return admin_leaves(self.since(label))

    def describe(self) -> Obj:
        described: Obj = self.release.coordinator_get(f"/v1/groups/{self.name}")
        return described

    def offsets(self) -> dict[tuple[str, int], int]:
        """The group's committed offsets of its topic (the example consumer's default: named like the group)."""
        answer = self.release.coordinator_get(f"/v1/groups/{self.name}/offsets?topic={self.name}")
        return {
            (topic["name"], p["partition_index"]): p["committed_offset"]
            for topic in answer["topics"]
            for p in topic["partitions"]
            if p["committed_offset"] >= 0
        }

    def members(self) -> set[str]:
        return {member["group_instance_id"] for member in self.describe()["members"]}

    def status(self) -> Obj:
        return (self.kube.get("cf", self.name, namespace=self.namespace) or {}).get("status") or {}

    def condition(self, kind: str) -> Obj:
        return next((dict(c) for c in self.status().get("conditions") or [] if c["type"] == kind), {})

    def messages(self, reason: str) -> list[str]:
        events = self.kube.events(self.namespace, kind="ConsumerFleet", name=self.name)
        return [event["message"] for event in events if event["reason"] == reason]

    def pod(self, ordinal: int) -> Obj:
        pod: Obj = self.kube.get("pod", f"{self.name}-{ordinal}", namespace=self.namespace)
        return pod

    def ready_and_stable(self, replicas: int, timeout_s: float = 240) -> Obj:
        """Every pod Ready, the fleet Ready=True, and each instance a member of the Stable group."""
        ids = {f"{self.name}-{i}" for i in range(replicas)}

        def settled() -> bool:
            pods = self.kube.get("pods", namespace=self.namespace, selector=f"berth.dev/fleet={self.name}")["items"]
            ready = {
                p["metadata"]["name"]
                for p in pods
                if not p["metadata"].get("deletionTimestamp")
                and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
            }
            if ready != ids or self.condition("Ready").get("status") != "True":
                return False
            described = self.describe()
            return (
                described["group_state"] == "Stable" and {m["group_instance_id"] for m in described["members"]} == ids
            )

        wait_until(settled, f"{replicas} Ready pods in the Stable group", timeout_s=timeout_s, every_s=1)
        return self.describe()
