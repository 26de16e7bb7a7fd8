"""A Kafka-protocol broker for tests: kfake (``../shared/tools/kafka/bin/kfake``), or a real cluster.

``KafkaBroker`` starts kfake on a free loopback port with the group settings the tests need (a 3 s minimum session
timeout, so restarts and removals are quick to see) and stops it by its PID. ``BERTH_KAFKA_BOOTSTRAP`` points the
same tests at a real cluster instead (nothing is started then); ``BERTH_KFAKE`` names another kfake binary.

Consumer-protocol (KIP-848) groups run on ``bin/kfake-kip848`` (``BERTH_KFAKE_KIP848`` names another): admin
removal by instance id, expiry of a static member that left with epoch -2, group configs checked (the broker
README). It keeps Kafka's defaults for those groups (a 45 s session timeout, 45-60 s bounds), so what the tests
measure is measured against Kafka's own timeout. Classic groups stay on ``bin/kfake``: the README reports more
stuck classic formations on the patched build.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from support.kube_cluster import REPO
from support.net import free_port

DEFAULT_KFAKE = REPO.parent / "shared" / "tools" / "kafka" / "bin" / "kfake"
DEFAULT_KFAKE_KIP848 = REPO.parent / "shared" / "tools" / "kafka" / "bin" / "kfake-kip848"
HOW_TO_GET = (
    "the Kafka tier needs kfake (../shared/tools/kafka/bin/kfake beside the repository, or BERTH_KFAKE), or a real"
    " cluster in BERTH_KAFKA_BOOTSTRAP"
)
HOW_TO_GET_KIP848 = (
    "the consumer-protocol tests need kfake-kip848 (../shared/tools/kafka/bin/kfake-kip848, or BERTH_KFAKE_KIP848),"
    " or a real Kafka >= 4.0 cluster in BERTH_KAFKA_BOOTSTRAP"
)
#: Broker settings: group.min.session.timeout.ms low enough for short test timeouts, Kafka's 30-minute maximum.
BROKER_CONFIGS = ("group.min.session.timeout.ms=3000", "group.max.session.timeout.ms=1800000")


def find_kfake(*, kip848: bool = False) -> Path | None:
    if kip848:
        candidate = Path(os.environ.get("BERTH_KFAKE_KIP848") or DEFAULT_KFAKE_KIP848)
    else:
        candidate = Path(os.environ.get("BERTH_KFAKE") or DEFAULT_KFAKE)
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def external_bootstrap() -> str | None:
    return os.environ.get("BERTH_KAFKA_BOOTSTRAP") or None


class KafkaBroker:
    def __init__(self, binary: Path, log_path: Path, configs: tuple[str, ...] = BROKER_CONFIGS) -> None:
        self.binary = binary
        self.log_path = log_path
        self.configs = configs
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> KafkaBroker:
        args = [str(self.binary), "-port", str(self.port), "-log-level", "warn"]
        for config in self.configs:
            args += ["-c", config]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kfake exited at start:\n{self.log_path.read_text(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)  # polling the listening socket, the broker's only readiness signal
        raise RuntimeError(f"kfake did not listen on {self.bootstrap} within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
