"""The systems a run tests, each in hosts of a ``Lab`` (network namespaces of the run's own) so that faults are real.

- ``Solo``: one coordinator on SQLite (the default install), its data dir on a ``LoopDisk`` of its own (a real
  full or stalled disk), listening on its host's address (API 9094, probes 9095).
- ``Replicated``: three etcd members, each on a host of its own, and replicas of the coordinator on hosts of their
  own (lease 3 s), behind a ``ServiceProxy`` (the Service: new connections go to the replica whose ``/readyz`` is
  200), as the chart's ``coordinator.ha`` runs them.

Clients reach either through a ``TcpProxy`` on this machine whose ``delay_s`` a fault may raise (this kernel has no
``netem``). ``processes`` lists the coordinator processes (what the probes watch), ``bugs`` is the
``BERTH_FAILPOINTS`` the coordinators start with (the checker's own tests re-introduce fixed bugs with it; a race
between replicas is put back in the first replica only, the others starting after it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.loopdisk import LoopDisk
from support.netlab import Host, Lab
from support.tcp_proxy import TcpProxy

from berth.operator.local.coordinator_process import CoordinatorProcess, EtcdTarget
from berth.operator.local.etcd_cluster import EtcdCluster, Place
from berth.operator.local.replicas import ServiceProxy

API_PORT = 9094
PROBE_PORT = 9095
LEASE_TTL_S = 3
#: etcd's database bound in the runs: small enough that a fault can fill it.
ETCD_QUOTA_BYTES = 48 * 1024 * 1024


def coordinator_flags(host: Host) -> list[str]:
    return [
        *("--host", host.ip, "--port", str(API_PORT), "--probe-port", str(PROBE_PORT), "--log-level", "info"),
        *("--offsets-retention-check-interval-ms", "2000"),  # expiry runs during a run, not once in 10 minutes
    ]


class Solo:
    kind = "sqlite"

    def __init__(self, lab: Lab, workdir: Path, bugs: str = "") -> None:
        self.lab = lab
        self.host = lab.host("coord")
        self.disk = LoopDisk(96)
        self.workdir = workdir
        self.env = {"BERTH_FAILPOINTS": bugs} if bugs else {}
        self.process: CoordinatorProcess | None = None
        self.proxy: TcpProxy | None = None

    @property
    def processes(self) -> list[CoordinatorProcess]:
        return [self.process] if self.process is not None else []

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return f"http://127.0.0.1:{self.proxy.port}"

    def start(self) -> list[str]:
        self.disk.mount()
        self.process = CoordinatorProcess(
            self.disk.path / "data", *coordinator_flags(self.host), prefix=self.host.argv(), env=self.env
        )
        self.process.log_path = self.workdir / "coordinator.stderr.log"
        self.process.start()
        self.proxy = TcpProxy(API_PORT, self.host.ip).start()
        return []

    def active(self, timeout_s: float = 0.0) -> CoordinatorProcess | None:
        return self.process

    def hosts_of(self, process: CoordinatorProcess) -> Host:
        return self.host

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.disk.thaw()
        for process in self.processes:
            if process.running:
                process.thaw()
                process.kill()
        self.disk.unmount()


class Replicated:
    kind = "replicated"

    def __init__(self, lab: Lab, workdir: Path, bugs: str = "", replicas: int = 2) -> None:
        self.lab = lab
        self.workdir = workdir
        self.etcd_hosts = [lab.host(f"etcd{i}") for i in range(3)]
        self.etcd = EtcdCluster(
            workdir / "etcd",
            3,
            fsync=False,
            flags=[f"--quota-backend-bytes={ETCD_QUOTA_BYTES}"],
            places=[Place(h.ip, tuple(h.argv())) for h in self.etcd_hosts],
        )
        self.hosts = [lab.host(f"replica{i}") for i in range(replicas)]
        self._processes = [
            CoordinatorProcess(
                workdir / f"replica{i}",
                *coordinator_flags(host),
                etcd=EtcdTarget(self.etcd.endpoints_flag, "/berth/", f"replica{i}", LEASE_TTL_S),
                prefix=host.argv(),
                env=_replica_env(bugs, i),
            )
            for i, host in enumerate(self.hosts)
        ]
        #: A race between replicas put back (``FIRST_REPLICA_BUGS``) needs the others a little behind the first.
        self.stagger_s = 2.0 if _switches(bugs) & set(FIRST_REPLICA_BUGS) else 0.0
        self.service = ServiceProxy(lambda: self._processes)
        self.proxy: TcpProxy | None = None

    @property
    def processes(self) -> list[CoordinatorProcess]:
        return self._processes

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return f"http://127.0.0.1:{self.proxy.port}"

    def start(self) -> list[str]:
        """Start etcd, then every replica at once on the empty prefix (as a fresh install does); what failed to
        start (said, and started again: the run counts it as a process that died unasked)."""
        self.etcd.start()
        failed: list[str] = []
        with ThreadPoolExecutor(len(self._processes)) as pool:
            delays = [i * self.stagger_s for i in range(len(self._processes))]
            starts = pool.map(_start_reporting, self._processes, delays)
            for process, error in zip(self._processes, starts, strict=True):
                if error:
                    failed.append(f"{process.etcd.name if process.etcd else 'a replica'} failed to start: {error}")
                    process.start()
        self.service.start()
        self.proxy = TcpProxy(self.service.port).start()
        self.active(timeout_s=30)
        return failed

    def active(self, timeout_s: float = 0.0) -> CoordinatorProcess | None:
        """The replica whose ``/readyz`` is 200 (waiting up to ``timeout_s`` for one)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for process in self._processes:
                if process.running and _ready(process):
                    return process
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def hosts_of(self, process: CoordinatorProcess) -> Host:
        return self.hosts[self._processes.index(process)]

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.service.stop()
        for process in self._processes:
            if process.running:
                process.thaw()
                process.kill()
        for i in range(3):
            self.etcd.thaw(i)
        self.etcd.stop()


#: Switches that put back a race between replicas: set on the first replica only, whose check then waits for the
#: others' campaign (``bug.unguarded_first_start``); the others start ``stagger_s`` later, as a slower pod would.
FIRST_REPLICA_BUGS = ("bug.unguarded_first_start",)


def _replica_env(bugs: str, index: int) -> Mapping[str, str]:
    """``BERTH_FAILPOINTS`` for replica ``index``: every switch, less those meant for the first replica only."""
    if index:
        bugs = ";".join(b for b in bugs.split(";") if _switches(b).isdisjoint(FIRST_REPLICA_BUGS))
    return {"BERTH_FAILPOINTS": bugs} if bugs else {}


def _switches(bugs: str) -> set[str]:
    """The names a ``BERTH_FAILPOINTS`` value sets (``name=action;...``)."""
    return {item.partition("=")[0].strip() for item in bugs.split(";") if item.strip()}


def _start_reporting(process: CoordinatorProcess, delay_s: float = 0.0) -> str:
    time.sleep(delay_s)
    try:
        process.start()
    except RuntimeError as exc:
        return str(exc).splitlines()[-1] if str(exc) else "exited"
    return ""


def _ready(process: CoordinatorProcess) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{process.probe_url}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


Topology = Solo | Replicated
