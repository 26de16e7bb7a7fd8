"""A world for the operator's leadership under faults: ``berth-operator`` replicas, each in a network namespace of its
own on a private network (``support.netlab``), a real control plane and a real coordinator on that network, one
fleet whose pods run real member processes.

- The lab is made first; the control plane serves on the lab's gateway address (this machine's address on the lab),
  so a replica reaches the API server over the lab's bridge and a partition of its host is a real one: its packets
  dropped (``Host.block``), its connections hanging, nothing reset. The coordinator listens there too.
- The API server audits the requests of the release namespace's ServiceAccounts, Lease writes once answered
  (``support.kube_cluster``'s ``audit_lease_writes``), which ``support.leader_history`` reads.
- The chart is installed as release ``robust`` in namespace ``berth-robust`` (``operator.scope=namespace``): its
  ServiceAccount and Role are the identity the replicas run as (a token each, ``kubectl create token``), its Lease
  ``robust-operator`` the one they elect on. Its own pods never run (the fake kubelet runs only the fleet's).
- Each replica is named ``op-NNNN`` (``POD_NAME``: its Lease identity is that name and a suffix) and has a
  coordinator admin token of that name, so the coordinator's journal names the replica behind each admin write.
- :meth:`LeaderWorld.tend` plays the Deployment: it replaces replicas that exited (a crash, a kill, a lost
  leadership) until ``wanted`` run, and notes each exit.

Everything runs on this machine's clock. Needs root (network namespaces, iptables), the control plane's binaries and
helm/kubectl; :func:`missing` names what is not there.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from support.coordinator import CoordinatorProcess, coordinator_get
from support.fake_kubelet import FakeKubelet, run_member
from support.fleet_stage import MEMBER_TOKEN, MEMBER_TOKEN_SECRET, fleet_body
from support.kube import Kube, find_tool, wait_until
from support.kube_cluster import HOW_TO_GET, REPO, ControlPlane, find_binaries, kubeconfig_text
from support.netlab import Host, Lab, missing_tools, reap_stale
from support.operator_process import OperatorProcess

NAMESPACE = "berth-robust"
RELEASE = "robust"
LEASE = f"{RELEASE}-operator"
SERVICE_ACCOUNT = f"{RELEASE}-operator"
ADMIN = "robust-admin"
FLEET = "orders"
GROUP = "robust-orders"
METRICS_PORT = 8081  # each replica has a network namespace of its own
EXIT_LOST_LEADERSHIP = 1


@dataclass(frozen=True)
class Timing:
    lease_s: float = 4.0
    renew_deadline_s: float = 3.0
    retry_s: float = 0.5

    def flags(self) -> list[str]:
        return [
            *("--leader-elect-lease-duration-s", f"{self.lease_s:g}"),
            *("--leader-elect-renew-deadline-s", f"{self.renew_deadline_s:g}"),
            *("--leader-elect-retry-period-s", f"{self.retry_s:g}"),
        ]


@dataclass
class Replica:
    name: str
    host: Host
    process: OperatorProcess
    started_at: float
    env: dict[str, str]

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host.ip}:{METRICS_PORT}/metrics"

    @property
    def alive(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None

    def leading(self) -> bool:
        """Whether it says it acts (``berth_operator_leader 1``); False when gone, frozen or cut off."""
        if not self.alive:
            return False
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=1) as answer:
                return "\nberth_operator_leader 1.0\n" in "\n" + answer.read().decode()
        except OSError:
            return False

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.signal(sig)


@dataclass(frozen=True)
class Exit:
    name: str
    at: float
    code: int


def missing() -> str | None:
    """Why this world cannot be made here, or None."""
    lacking = missing_tools()
    if lacking:
        return (
            f"the operator's leadership campaign needs {', '.join(lacking)} (network namespaces on a private network)"
        )
    if find_binaries() is None:
        return HOW_TO_GET
    if find_tool("kubectl") is None or find_tool("helm") is None:
        return "helm and kubectl are not in .tools/bin or on PATH: run `make tools`"
    if shutil.which("openssl") is None:
        return "the control plane makes its PKI with openssl, which is not on PATH"
    return None


@dataclass
class LeaderWorld:
    workdir: Path
    timing: Timing = field(default_factory=Timing)
    #: Coordinator admin tokens made at the start, one per replica that may ever run.
    max_replicas: int = 200
    wanted: int = 2
    lab: Lab = field(default_factory=Lab)
    plane: ControlPlane | None = None
    kube: Kube | None = None
    coordinator: CoordinatorProcess | None = None
    kubelet: FakeKubelet | None = None
    replicas: list[Replica] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    #: Hosts under a fault: no new replica starts there until it is taken back.
    busy_hosts: set[str] = field(default_factory=set)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _journal_after: int = 0

    # ------------------------------------------------------------------------------------------- set-up

    def __enter__(self) -> LeaderWorld:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        reap_stale()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.lab.create()
        binaries = find_binaries()
        assert binaries is not None, HOW_TO_GET
        self.plane = ControlPlane(
            binaries,
            self.workdir / "plane",
            address=self.lab.gateway,
            audited_groups=(f"system:serviceaccounts:{NAMESPACE}",),
            audit_lease_writes=True,
        )
        self.plane.start()
        kubectl, helm = find_tool("kubectl"), find_tool("helm")
        assert kubectl is not None and helm is not None
        plane = self.plane
        kube = self.kube = Kube(kubectl, helm, plane.kubeconfig, plane.server, plane.pki / "ca.crt", self.workdir)
        kube.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
        kube.wait_established("consumerfleets.berth.dev")
        wait_until(lambda: kube.get("serviceaccount", "default", namespace="default"), "the default ServiceAccount")
        kube.create_namespace(NAMESPACE)
        self.install()
        kube.kubectl(
            "create", "secret", "generic", MEMBER_TOKEN_SECRET, "-n", NAMESPACE, f"--from-literal=token={MEMBER_TOKEN}"
        )
        tokens = self.workdir / "tokens.yaml"
        entries = [{"name": ADMIN, "token": f"{ADMIN}-token", "groups": ["*"], "admin": True}]
        entries.append({"name": "members", "token": MEMBER_TOKEN, "groups": ["*"], "admin": False})
        entries += [
            {"name": self.replica_name(n), "token": f"{self.replica_name(n)}-token", "groups": ["*"], "admin": True}
            for n in range(1, self.max_replicas + 1)
        ]
        tokens.write_text(yaml.safe_dump({"tokens": entries}))
        self.coordinator = CoordinatorProcess(
            self.workdir / "coordinator",
            *("--host", self.lab.gateway, "--tokens-file", str(tokens), "--log-level", "warning"),
            *("--group-initial-rebalance-delay-ms", "100"),
            manual_clock=False,
        )
        self.coordinator.start()
        self.kubelet = FakeKubelet(kube.kubeconfig, NAMESPACE, self.workdir / "pods", program=fleet_pods_only).start()

    def install(self) -> None:
        assert self.kube is not None
        self.kube.helm("install", RELEASE, str(REPO / "charts" / "berth"), "-n", NAMESPACE, *CHART_VALUES)

    def uninstall(self) -> None:
        assert self.kube is not None
        self.kube.helm("uninstall", RELEASE, "-n", NAMESPACE)

    def close(self) -> None:
        for replica in self.replicas:
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGKILL)
        self.replicas.clear()
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.coordinator is not None and self.coordinator.proc is not None and self.coordinator.proc.poll() is None:
            self.coordinator.kill()
        if self.plane is not None:
            self.plane.stop()
        self.lab.delete()

    # ------------------------------------------------------------------------------------------ replicas

    @staticmethod
    def replica_name(number: int) -> str:
        return f"op-{number:04d}"

    def start_replica(self, env: dict[str, str] | None = None, *, wait: bool = True) -> Replica:
        """A new replica in a host no live replica uses, as the release's ServiceAccount (a token of its own)."""
        assert self.kube is not None and self.coordinator is not None
        number = next(self._names)
        if number > self.max_replicas:
            raise RuntimeError(f"more than {self.max_replicas} replicas: the coordinator has no token for more")
        name = self.replica_name(number)
        host = self._free_host()
        token = self.kube.kubectl("create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=48h").stdout.strip()
        kubeconfig = self.workdir / f"{name}.kubeconfig"
        kubeconfig.write_text(_kubeconfig(self.kube, token))
        admin_token = self.workdir / f"{name}.token"
        admin_token.write_text(f"{name}-token")
        args = [
            *("--namespace", NAMESPACE, "--coordinator-url", self.coordinator.url),
            *("--token-file", str(admin_token), "--liveness-port", "0", "--metrics-port", str(METRICS_PORT)),
            *("--reconcile-interval-s", "2", "--log-format", "text"),
            *("--leader-elect", "--leader-election-namespace", NAMESPACE, "--leader-election-lease", LEASE),
            *self.timing.flags(),
        ]
        environment = {"POD_NAME": name, "POD_NAMESPACE": NAMESPACE, **(env or {})}
        process = OperatorProcess(
            kubeconfig, self.workdir / f"{name}.log", args, dict(environment), prefix=host.argv()
        ).start(wait=wait)
        replica = Replica(name, host, process, time.time(), dict(env or {}))
        self.replicas.append(replica)
        return replica

    def _free_host(self) -> Host:
        used = {r.host.name for r in self.replicas if r.alive} | self.busy_hosts
        for host in self.lab.hosts.values():
            if host.name not in used:
                host.heal()
                return host
        return self.lab.host(f"op{len(self.lab.hosts) + 1}")

    def tend(self) -> None:
        """Note the replicas that exited and start new ones until ``wanted`` are alive (a Deployment's part)."""
        for replica in list(self.replicas):
            if not replica.alive:
                assert replica.process.process is not None
                self.exits.append(Exit(replica.name, time.time(), replica.process.process.returncode))
                self.replicas.remove(replica)
        while len(self.replicas) < self.wanted:
            self.start_replica(wait=False)

    def leader(self) -> Replica | None:
        leading = [r for r in self.replicas if r.leading()]
        return leading[0] if len(leading) == 1 else None

    def standby(self) -> Replica | None:
        leader = self.leader()
        others = [r for r in self.replicas if r is not leader and r.alive]
        return others[0] if others else None

    def wait_for_leader(self, timeout_s: float = 90.0) -> Replica:
        """One replica leading, and the Lease naming it."""

        def found() -> Replica | None:
            self.tend()
            leader = self.leader()
            if leader is None or not (self.holder() or "").startswith(f"{leader.name}_"):
                return None
            return leader

        return wait_until(found, "a leader", timeout_s=timeout_s, every_s=0.2)

    def stop_replica(self, replica: Replica, sig: signal.Signals = signal.SIGTERM) -> None:
        replica.signal(signal.SIGCONT)
        replica.signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            replica.process.wait(timeout_s=30)
        if replica.alive:
            replica.signal(signal.SIGKILL)
            replica.process.wait(timeout_s=10)

    def cut_from_api(self, replica: Replica) -> None:
        """Drop every packet between ``replica``'s host and the API server's port, both ways: its calls there hang
        as on a partition, neither answered nor refused, and the coordinator stays reachable. ``host.heal()`` takes
        it back."""
        assert self.plane is not None
        gateway, port = self.lab.gateway, self.plane.server.rsplit(":", 1)[1]
        replica.host.sh("iptables", "-I", "OUTPUT", "-d", gateway, "-p", "tcp", "--dport", port, "-j", "DROP")
        replica.host.sh("iptables", "-I", "INPUT", "-s", gateway, "-p", "tcp", "--sport", port, "-j", "DROP")

    # -------------------------------------------------------------------------------------------- reading

    def holder(self) -> str | None:
        assert self.kube is not None
        lease = self.kube.get("lease", LEASE, namespace=NAMESPACE)
        return ((lease or {}).get("spec") or {}).get("holderIdentity")

    def journal(self) -> list[dict[str, Any]]:
        """The coordinator's journal events since the last call (every group)."""
        assert self.coordinator is not None
        events: list[dict[str, Any]] = []
        while True:
            page = coordinator_get(
                self.coordinator, f"/v1/journal?after={self._journal_after}&limit=10000", f"{ADMIN}-token"
            )["events"]
            if not page:
                return events
            events += page
            self._journal_after = int(page[-1]["seq"])

    def fleet(self) -> dict[str, Any]:
        assert self.kube is not None
        return self.kube.get("cf", FLEET, namespace=NAMESPACE) or {}

    def group(self) -> dict[str, Any]:
        assert self.coordinator is not None
        described: dict[str, Any] = coordinator_get(self.coordinator, f"/v1/groups/{GROUP}", f"{ADMIN}-token")
        return described

    def apply_fleet(self, replicas: int) -> None:
        assert self.kube is not None
        self.kube.apply(fleet_body(FLEET, replicas, GROUP), namespace=NAMESPACE)

    def scale(self, replicas: int) -> None:
        assert self.kube is not None
        self.kube.kubectl("scale", f"cf/{FLEET}", f"--replicas={replicas}", "-n", NAMESPACE)

    def converged(self, replicas: int) -> bool:
        """Ready, nothing departing, every instance a member of the Stable group, and no other member."""
        status = self.fleet().get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        if not ready or status.get("departing") or status.get("replicas") != replicas:
            return False
        group = self.group()
        members = {m["group_instance_id"] for m in group["members"]}
        return group["group_state"] == "Stable" and members == {f"{FLEET}-{i}" for i in range(replicas)}

    def wait_converged(self, replicas: int, what: str, *, timeout_s: float, tend: bool = True) -> None:
        """Wait until :meth:`converged` (tending the replicas meanwhile unless ``tend`` is False); on a timeout, fail
        with :meth:`dump`."""

        def done() -> bool:
            if tend:
                self.tend()
            return self.converged(replicas)

        try:
            wait_until(done, what, timeout_s=timeout_s)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.dump()}") from None

    def dump(self) -> str:
        """What to look at when a run fails: the fleet's status, the group, the pods running, the last exits and the
        replicas' log tails."""
        parts = []
        with contextlib.suppress(Exception):
            status = self.fleet().get("status") or {}
            conditions = [
                f"{c['type']}={c['status']} ({c.get('reason')}: {c.get('message')})"
                for c in status.get("conditions") or []
            ]
            kept = ("replicas", "readyReplicas", "departing", "lastScaleDown", "group", "instanceIds")
            parts.append(f"status: { ({k: status.get(k) for k in kept}) }; {'; '.join(conditions)}")
        with contextlib.suppress(Exception):
            group = self.group()
            members = sorted(m["group_instance_id"] or m["member_id"] for m in group["members"])
            parts.append(f"group: {group['group_state']} generation {group.get('generation_id')} members {members}")
        if self.kubelet is not None:
            parts.append(f"member processes: {sorted(self.kubelet.running())}")
        parts.append(f"exits: {[(e.name, round(e.at, 3), e.code) for e in self.exits[-6:]]}")
        for replica in self.replicas:
            parts.append(
                f"--- {replica.name} ({'alive' if replica.alive else 'gone'})\n{replica.process.log()[-3000:]}"
            )
        return "\n".join(parts)


#: The chart as the world installs it: one namespace, leader election on (the replicas pass their own timings).
CHART_VALUES = ("--set", "operator.scope=namespace")


def fleet_pods_only(pod: Any, env: dict[str, str]) -> list[str] | None:
    return run_member(pod, env) if "berth.dev/fleet" in (pod.metadata.labels or {}) else None


def _kubeconfig(kube: Kube, token: str) -> str:
    return kubeconfig_text(kube.server, kube.ca, token=token, user=SERVICE_ACCOUNT)
