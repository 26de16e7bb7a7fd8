"""The chart's ``coordinator.ha`` option on the real node: the session's release moved to it as
docs/high-availability.md says, its replicas as pods, and the failures the tests inflict on them.

- :func:`move_to_ha` runs the steps of "Moving a single-replica install to HA" word for word on the session's
  release (the single coordinator stopped, etcd and the copy Job on the old coordinator's volume, the Job's tally,
  then the replicas), plus ``coordinator.ha.etcd.image`` set to the etcd image built here from Debian's
  ``etcd-server`` (the chart's default comes from a registry the node cannot reach). It returns a :class:`Move`
  with the transcript and what the fleet looked like just before.
- :class:`Replicas` reads the coordinator's pods: the active one (the only Ready one), the standbys, a pod's
  container, its ``/metrics``; and inflicts the failures: the pod deleted, its container killed in place (``ctr
  tasks kill -s SIGKILL``), its container frozen and thawed (``ctr tasks pause``/``resume``: the cgroup freezer).
- :class:`FirstJoin` times the first join answered through the coordinator's Service after a failure (``python
  -m support.node_probe`` in the node's network namespace, through kube-proxy's rules as a member's connection).
"""

from __future__ import annotations

import base64
import re
import select
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import yaml
from support.kube import wait_until
from support.node import Cluster, Node, support_env
from support.node_images import ETCD_REPOSITORY, ETCD_TAG
from support.node_stage import CHART, EXAMPLES, GROUP_TOKEN, FleetStage, PodWatch, Release

Obj = dict[str, Any]
COORDINATOR = "app.kubernetes.io/instance=berth,app.kubernetes.io/component=coordinator"
ETCD = "app.kubernetes.io/instance=berth,app.kubernetes.io/component=etcd"
OLD_CLAIM = "data-berth-coordinator-0"
COPY_JOB = "berth-coordinator-copy-to-etcd"
REPLICAS = 2
#: The example consumer's topic: named like the group, 12 partitions.
PARTITIONS = 12


def ready(pod: Obj) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


@dataclass
class Move:
    transcript: str
    tally: str
    seconds: float
    #: Just before the move: the release's groups, the fleet's group described, its committed offsets, the journal.
    groups: list[str]
    described: Obj
    offsets: dict[tuple[str, int], int]
    journal: list[Obj]
    started_at: float


def move_to_ha(release: Release, fleet: FleetStage) -> Move:
    """docs/high-availability.md "Moving a single-replica install to HA", on the session's release."""
    kube, chart = release.kube, str(CHART)
    groups, described, offsets = release.groups(), fleet.describe(), fleet.offsets()
    journal = release.journal()
    lines: list[str] = []

    def step(shown: str, result: subprocess.CompletedProcess[str]) -> str:
        lines.append(f"$ {shown}\n{result.stdout.strip()}")
        return result.stdout

    started_at, started = time.time(), time.monotonic()
    step(
        "kubectl -n berth delete statefulset berth-coordinator --wait",
        kube.kubectl("-n", "berth", "delete", "statefulset", "berth-coordinator", "--wait"),
    )
    step(
        "kubectl -n berth wait --for=delete pod/berth-coordinator-0 --timeout=2m",
        kube.kubectl("-n", "berth", "wait", "--for=delete", "pod/berth-coordinator-0", "--timeout=120s", check=False),
    )
    etcd_image = [
        "--set", f"coordinator.ha.etcd.image.repository={ETCD_REPOSITORY}",
        "--set", f"coordinator.ha.etcd.image.tag={ETCD_TAG}",
    ]  # fmt: skip
    step(
        "helm upgrade berth charts/berth -n berth --reuse-values --set coordinator.ha.enabled=true "
        f"--set coordinator.ha.replicas=0 --set coordinator.ha.copyFromClaim={OLD_CLAIM} {' '.join(etcd_image)}",
        kube.helm(
            "upgrade", "berth", chart, "-n", "berth", "--reuse-values", "--set", "coordinator.ha.enabled=true",
            "--set", "coordinator.ha.replicas=0", "--set", f"coordinator.ha.copyFromClaim={OLD_CLAIM}", *etcd_image,
        ),
    )  # fmt: skip
    step(
        f"kubectl -n berth wait --for=condition=complete job/{COPY_JOB} --timeout=5m",
        kube.kubectl("-n", "berth", "wait", "--for=condition=complete", f"job/{COPY_JOB}", "--timeout=300s"),
    )
    tally = (kube.kubectl("-n", "berth", "logs", f"job/{COPY_JOB}").stdout.strip().splitlines() or [""])[-1]
    lines.append(f"$ kubectl -n berth logs job/{COPY_JOB} | tail -1\n{tally}")
    step(
        f"helm upgrade berth charts/berth -n berth --reuse-values --set coordinator.ha.replicas={REPLICAS} "
        "--set coordinator.ha.copyFromClaim=",
        kube.helm(
            "upgrade", "berth", chart, "-n", "berth", "--reuse-values",
            "--set", f"coordinator.ha.replicas={REPLICAS}", "--set", "coordinator.ha.copyFromClaim=",
        ),
    )  # fmt: skip
    replicas = Replicas(release)
    replicas.active(timeout_s=300)
    wait_until(lambda: len(replicas.standbys()) == REPLICAS - 1, "the standby running", timeout_s=300, every_s=1)
    seconds = time.monotonic() - started
    return Move("\n".join(lines), tally, seconds, groups, described, offsets, journal, started_at)


class Replicas:
    """The coordinator's pods in HA mode, and the failures inflicted on them."""

    def __init__(self, release: Release, cluster: Cluster | None = None) -> None:
        self.release = release
        self.kube = release.kube
        self.cluster = cluster

    def pods(self) -> list[Obj]:
        items: list[Obj] = self.kube.get("pods", namespace="berth", selector=COORDINATOR)["items"]
        return sorted(items, key=lambda pod: pod["metadata"]["name"])

    def active(self, *, other_than: str | None = None, timeout_s: float = 120) -> Obj:
        """The Ready replica (the one the Service sends clients to); ``other_than``: a pod uid it must not have."""

        def found() -> Obj | None:
            ready_pods = [p for p in self.pods() if ready(p) and not p["metadata"].get("deletionTimestamp")]
            if len(ready_pods) == 1 and ready_pods[0]["metadata"]["uid"] != other_than:
                return ready_pods[0]
            return None

        return wait_until(found, "one Ready coordinator replica", timeout_s=timeout_s, every_s=0.2)

    def standbys(self) -> list[Obj]:
        """Replicas running and not Ready (a standby's /readyz is 503 "standby")."""
        return [
            p
            for p in self.pods()
            if not ready(p)
            and not p["metadata"].get("deletionTimestamp")
            and all(s.get("started") for s in p["status"].get("containerStatuses") or [{}])
        ]

    @staticmethod
    def container_id(pod: Obj) -> str:
        (status,) = pod["status"]["containerStatuses"]
        return str(status["containerID"]).split("://", 1)[1]

    @staticmethod
    def restarts(pod: Obj) -> int:
        return int(pod["status"]["containerStatuses"][0]["restartCount"])

    def metrics(self, pod: Obj) -> dict[str, float]:
        """The replica's unlabelled /metrics samples (on its probe port, straight to the pod)."""
        url = f"http://{pod['status']['podIP']}:9095/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        found = {}
        for line in text.splitlines():
            if match := re.fullmatch(r"([a-z_]+) ([0-9.e+-]+)", line):
                found[match.group(1)] = float(match.group(2))
        return found

    def log(self, pod: Obj, *, previous: bool = False) -> str:
        args = ["-n", "berth", "logs", pod["metadata"]["name"], *(["--previous"] if previous else [])]
        return self.kube.kubectl(*args, check=False).stdout

    # ----------------------------------------------------------------------------------------- failures

    def delete(self, pod: Obj) -> None:
        self.kube.kubectl("-n", "berth", "delete", "pod", pod["metadata"]["name"], "--wait=false")

    def _ctr(self, pod: Obj, *args: str) -> None:
        """``ctr tasks ARGS`` on the containerd of the pod's node."""
        assert self.cluster is not None
        self.cluster.node_of(pod).ctr_tasks(*args)

    def kill(self, pod: Obj) -> None:
        self._ctr(pod, "kill", "--signal", "SIGKILL", self.container_id(pod))

    def freeze(self, pod: Obj) -> None:
        self._ctr(pod, "pause", self.container_id(pod))

    def thaw(self, pod: Obj) -> None:
        self._ctr(pod, "resume", self.container_id(pod))


class FirstJoin:
    """``python -m support.node_probe`` in the node's network namespace, against the coordinator's ClusterIP."""

    def __init__(self, node: Node, release: Release, group: str) -> None:
        service = release.kube.get("service", "berth-coordinator", namespace="berth")
        tls, ca_file = release.tls(), node.workdir / "coordinator-ca.crt"
        scheme = "https" if tls is not None else "http"
        url = f"{scheme}://{service['spec']['clusterIP']}:9094"
        argv = [sys.executable, "-m", "support.node_probe", url, release.admin_token, group]
        if tls is not None:  # TLS is the chart's default: verified against the CA the release generated
            secret = release.kube.get("secret", f"{release.name}-coordinator-tls", namespace=release.namespace)
            ca_file.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
            argv.append(str(ca_file))
        self.process = subprocess.Popen(
            node.network.inside(*argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=support_env(),
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def measure(self, since: float, timeout_s: float = 120) -> float:
        """Seconds from ``since`` (``time.monotonic()`` when the failure was inflicted) to the first join answered."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{since}\n")
        self.process.stdin.flush()
        readable, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        assert readable, f"no join answered through the Service within {timeout_s:g} s"
        return float(self.process.stdout.readline())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


#: The HA fleet's consumers commit this often, so that a failover always finds commits in flight.
COMMIT_INTERVAL_S = "0.5"
FLEET_REPLICAS = 3


@dataclass
class HaStage:
    """The session's release on coordinator.ha, moved there with a fleet of example consumers running."""

    release: Release
    fleet: FleetStage
    move: Move
    replicas: Replicas


def moved_to_ha(release: Release, cluster: Cluster) -> HaStage:
    """A fleet of example consumers committing every half second on the single-replica release, then the move."""
    kube = release.kube
    # The fleets of earlier tests gone first (their finalizers delete their groups): the move's before and after
    # are then the same set of groups.
    wait_until(lambda: not kube.get("cf", all_namespaces="true")["items"], "earlier fleets deleted", timeout_s=300)
    namespace = kube.create_namespace("ha-shop")
    token = release.secret_value(f"token-{GROUP_TOKEN}")
    kube.kubectl("-n", namespace, "create", "secret", "generic", "orders-token", f"--from-literal=token={token}")
    fleet = FleetStage(release, namespace, "orders-ha", PodWatch(kube.kubeconfig, namespace))
    manifest: Obj = yaml.safe_load((EXAMPLES / "orders.yaml").read_text())
    manifest["metadata"]["name"] = fleet.name
    manifest["spec"] |= {"groupId": fleet.name, "replicas": FLEET_REPLICAS}
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    container["env"] = [{"name": "BERTH_EXAMPLE_COMMIT_INTERVAL_S", "value": COMMIT_INTERVAL_S}]
    kube.apply(manifest, namespace=namespace)
    fleet.ready_and_stable(FLEET_REPLICAS)
    wait_until(lambda: len(fleet.offsets()) == PARTITIONS, "every partition committed", timeout_s=60, every_s=1)
    move = move_to_ha(release, fleet)
    return HaStage(release, fleet, move, Replicas(release, cluster))
