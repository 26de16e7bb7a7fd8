"""``EtcdCluster``: a real etcd cluster of ``size`` members on loopback, for tests and benchmarks of the replicated
coordinator (docs/high-availability.md).

Each member is Debian's ``etcd`` (or ``$BERTH_ETCD``) on free ports, with the flags the chart gives its etcd
(``CHART_FLAGS``: transaction limits, compaction), in a directory of its own under ``workdir``. ``fsync=False``
passes ``--unsafe-no-fsync`` (tests whose subject is not etcd's durability, on a shared disk); benchmarks keep fsync
on, as the chart does. ``kill(i)``, ``restart(i)`` stop and start one member (quorum stays with 2 of 3);
``freeze(i)`` and ``thaw(i)`` stop and resume one (SIGSTOP, SIGCONT). ``flags`` are added after the chart's (the
last of a flag wins: a test's small ``--quota-backend-bytes``). ``places`` puts members elsewhere than loopback: a
``Place`` is an address to listen on and a command prefix to start under (a network namespace of a test's lab,
where the ports are the standard 2379 and 2380).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

#: What the chart's etcd runs with besides its addresses (charts/berth/templates/coordinator-etcd.yaml).
CHART_FLAGS = (
    "--max-txn-ops=131072",
    "--max-request-bytes=16777216",
    "--auto-compaction-mode=periodic",
    "--auto-compaction-retention=5m",
    "--quota-backend-bytes=4294967296",
)


def etcd_binary() -> str | None:
    """``$BERTH_ETCD``, else ``etcd`` on PATH (make install puts Debian's etcd-server there)."""
    return os.environ.get("BERTH_ETCD") or shutil.which("etcd")


@dataclass(frozen=True)
class Place:
    """Where one member runs: the address it listens on, and a prefix its command starts under."""

    address: str = "127.0.0.1"
    prefix: tuple[str, ...] = ()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EtcdCluster:
    def __init__(
        self,
        workdir: Path,
        size: int = 3,
        *,
        fsync: bool = True,
        binary: str | None = None,
        flags: Sequence[str] = (),
        places: Sequence[Place] | None = None,
    ) -> None:
        found = binary or etcd_binary()
        if found is None:
            raise RuntimeError("etcd not found: make install runs scripts/ensure-etcd.sh, or set BERTH_ETCD")
        self.binary = found
        self.workdir = workdir
        self.size = size
        self.fsync = fsync
        self.token = f"berth-{os.getpid()}-{time.monotonic_ns()}"  # a cluster of its own, whatever else runs here
        self.flags = tuple(flags)
        self.places = list(places) if places is not None else [Place() for _ in range(size)]
        if len(self.places) != size:
            raise ValueError("places: one per member")
        loopback = [place.address == "127.0.0.1" for place in self.places]
        self.client_ports = [_free_port() if here else 2379 for here in loopback]
        self.peer_ports = [_free_port() if here else 2380 for here in loopback]
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * size

    @property
    def endpoints(self) -> list[str]:
        return [f"http://{place.address}:{port}" for place, port in zip(self.places, self.client_ports, strict=True)]

    def peer_url(self, i: int) -> str:
        return f"http://{self.places[i].address}:{self.peer_ports[i]}"

    @property
    def endpoints_flag(self) -> str:
        return ",".join(self.endpoints)

    def name(self, i: int) -> str:
        return f"etcd-{i}"

    def start(self, timeout_s: float = 60.0) -> EtcdCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for i in range(self.size):
            self._spawn(i, new=True)
        self.wait_healthy(timeout_s)
        return self

    def _spawn(self, i: int, *, new: bool) -> None:
        cluster = ",".join(f"{self.name(j)}={self.peer_url(j)}" for j in range(self.size))
        args = [
            *self.places[i].prefix,
            self.binary,
            f"--name={self.name(i)}",
            f"--data-dir={self.workdir / self.name(i)}",
            f"--listen-client-urls={self.endpoints[i]}",
            f"--advertise-client-urls={self.endpoints[i]}",
            f"--listen-peer-urls={self.peer_url(i)}",
            f"--initial-advertise-peer-urls={self.peer_url(i)}",
            f"--initial-cluster={cluster}",
            f"--initial-cluster-token={self.token}",
            f"--initial-cluster-state={'new' if new else 'existing'}",
            "--log-level=warn",
            *CHART_FLAGS,
            *self.flags,
        ]
        if not self.fsync:
            args.append("--unsafe-no-fsync")
        log = open(self.workdir / f"{self.name(i)}.log", "ab")  # noqa: SIM115 - the process writes it until it ends
        self.processes[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """Until every running member answers /health with a leader."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            for i, proc in enumerate(self.processes):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"{self.name(i)} exited with {proc.returncode}:\n{self.log(i)[-3000:]}")
            try:
                if all(self._healthy(i) for i, proc in enumerate(self.processes) if proc is not None):
                    return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(f"etcd cluster not healthy within {timeout_s} s ({last})")

    def _healthy(self, i: int) -> bool:
        with urllib.request.urlopen(f"{self.endpoints[i]}/health", timeout=2) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")

    def log(self, i: int) -> str:
        path = self.workdir / f"{self.name(i)}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, i: int) -> None:
        proc = self.processes[i]
        if proc is not None:
            proc.kill()
            proc.wait(10)
            self.processes[i] = None

    def restart(self, i: int) -> None:
        self.kill(i)
        self._spawn(i, new=False)

    def freeze(self, i: int) -> None:
        proc = self.processes[i]
        if proc is not None:
            proc.send_signal(signal.SIGSTOP)

    def thaw(self, i: int) -> None:
        proc = self.processes[i]
        if proc is not None:
            proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        for proc in self.processes:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for i, proc in enumerate(self.processes):
            if proc is not None:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
                self.processes[i] = None

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
