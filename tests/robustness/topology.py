"""The systems a run tests, each in hosts of a ``Lab`` (network namespaces of the run's own) so that faults are real.

- ``Solo``: one coordinator on SQLite (the default install), its data dir on a ``LoopDisk`` of its own (a real
  full or stalled disk), listening on its host's address (API 9094, probes 9095).
- ``Replicated``: three etcd members, each on a host of its own, and replicas of the coordinator on hosts of their
  own (lease 3 s), behind a ``ServiceProxy`` (the Service: new connections go to the replica whose ``/readyz`` is
  200), as the chart's ``coordinator.ha`` runs them.

Clients reach either through a ``TcpProxy`` on this machine whose ``delay_s`` a fault may raise (this kernel has no
``netem``). ``processes`` lists the coordinator processes (what the probes watch), ``bugs`` is the
``BERTH_FAILPOINTS`` every coordinator starts with (the checker's own tests re-introduce fixed bugs with it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
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
    return ["--host", host.ip, "--port", str(API_PORT), "--probe-port", str(PROBE_PORT), "--log-level", "info"]


class Solo:
    kind = "sqlite"

    def __init__(self, lab: Lab, workdir: Path, bugs: str = "") -> None:
        self.lab = lab
        self.host = lab.host("coord")
        self.disk = LoopDisk(96)
        self.workdir = workdir
        self.env = {"BERTH_FAILPOINTS": bugs} if bugs else {}
        self.process: CoordinatorProcess | None = None
        self.proxy = TcpProxy(API_PORT, self.host.ip)

    @property
    def processes(self) -> list[CoordinatorProcess]:
        return [self.process] if self.process is not None else []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    def start(self) -> None:
        self.disk.mount()
        self.process = CoordinatorProcess(
            self.disk.path / "data", *coordinator_flags(self.host), prefix=self.host.argv(), env=self.env
        )
        self.process.log_path = self.workdir / "coordinator.stderr.log"
        self.process.start()
        self.proxy.start()

    def active(self) -> CoordinatorProcess | None:
        return self.process

    def hosts_of(self, process: CoordinatorProcess) -> Host:
        return self.host

    def stop(self) -> None:
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
        env: Mapping[str, str] = {"BERTH_FAILPOINTS": bugs} if bugs else {}
        self._processes = [
            CoordinatorProcess(
                workdir / f"replica{i}",
                *coordinator_flags(host),
                etcd=EtcdTarget(self.etcd.endpoints_flag, "/berth/", f"replica{i}", LEASE_TTL_S),
                prefix=host.argv(),
                env=env,
            )
            for i, host in enumerate(self.hosts)
        ]
        self.service = ServiceProxy(lambda: self._processes)
        self.proxy: TcpProxy | None = None

    @property
    def processes(self) -> list[CoordinatorProcess]:
        return self._processes

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return f"http://127.0.0.1:{self.proxy.port}"

    def start(self) -> None:
        self.etcd.start()
        for process in self._processes:
            process.start()
        self.service.start()
        self.proxy = TcpProxy(self.service.port).start()
        self.active(timeout_s=30)

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


def _ready(process: CoordinatorProcess) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{process.probe_url}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


Topology = Solo | Replicated
