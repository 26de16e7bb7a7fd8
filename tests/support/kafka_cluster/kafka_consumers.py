"""Real Kafka consumer processes (deploy/examples/consumers/), configured like pods by the BERTH_* environment, and
reading what they say: one JSON line per assignment, revocation and exit.

``CLIENTS`` maps a client's name to its program; :func:`program_for_pod` is the fake kubelet's hook that runs the
example program a pod's container names (``python /app/<program>``) from this checkout. :class:`Ownership` reads
assignment lines (from files or processes) and answers "do these members own every partition, and since when".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.kube_cluster import REPO

CONSUMERS = REPO / "deploy" / "examples" / "consumers"
CLIENTS = {"kafka-python": "kafka_python_consumer.py", "confluent-kafka": "confluent_kafka_consumer.py"}


def program_argv(client: str) -> list[str]:
    return [sys.executable, str(CONSUMERS / CLIENTS[client])]


def program_for_pod(pod: Any, env: dict[str, str]) -> list[str] | None:
    """The example consumer a pod's first container runs (``... python /app/<program>``), from this checkout."""
    container = pod.spec.containers[0]
    words = " ".join([*(container.command or []), *(container.args or [])])
    for program in CLIENTS.values():
        if f"/app/{program}" in words:
            return [sys.executable, str(CONSUMERS / program)]
    return None


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            event = json.loads(line)
            if isinstance(event, dict):
                found.append(event)
    return found


@dataclass
class Ownership:
    """Each member's assignment events, in order (from its JSON lines)."""

    events: dict[str, list[dict[str, Any]]]

    def assignments(self, member: str) -> list[dict[str, Any]]:
        return [e for e in self.events.get(member, []) if e.get("event") == "assigned"]

    def current(self, member: str) -> list[str] | None:
        """What the member owns now: its latest assignment, what a revocation left it (an incremental one, on the
        consumer protocol, leaves the rest), nothing after it exited or failed, None before any."""
        for event in reversed(self.events.get(member, [])):
            if event.get("event") == "assigned":
                return list(event["partitions"])
            if event.get("event") == "revoked":
                return list(event.get("owned") or [])
            if event.get("event") in ("exited", "fatal"):
                return []
        return None

    def owned_by(self, members: Iterable[str]) -> list[str]:
        return [p for member in members for p in self.current(member) or []]

    def covers(self, members: Iterable[str], partitions: set[str]) -> bool:
        """Every member owns something (when there are enough partitions), and together they own each partition
        exactly once."""
        members = list(members)
        if any(self.current(member) is None for member in members):
            return False
        if len(partitions) >= len(members) and not all(self.current(member) for member in members):
            return False
        owned = self.owned_by(members)
        return len(owned) == len(partitions) and set(owned) == partitions

    def covered_at(self, members: Iterable[str], partitions: set[str]) -> float:
        """When the members' latest assignments (which together cover ``partitions``) were all in place."""
        return max(self.assignments(member)[-1]["t"] for member in members if self.assignments(member))

    def assignment_count(self, members: Iterable[str], *, after: float = 0.0) -> int:
        return sum(1 for m in members for e in self.assignments(m) if e["t"] > after)


class ConsumerProcess:
    """One consumer process with a pod's environment (outside Kubernetes: benchmarks and the port's tests)."""

    def __init__(self, client: str, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.client = client
        self.name = name
        self.env = env
        self.out = log_dir / f"{name}.out"
        self.err = log_dir / f"{name}.err"
        self.process: subprocess.Popen[bytes] | None = None
        self.exited_at: float | None = None

    def start(self) -> ConsumerProcess:
        with self.out.open("ab") as out, self.err.open("ab") as err:
            self.process = subprocess.Popen(
                program_argv(self.client),
                env={**os.environ, **self.env, "BERTH_GROUP_INSTANCE_ID": self.name},
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        self.exited_at = None
        return self

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop it like a pod's container (SIGTERM: a static member leaves nothing behind but its session)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, sig)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.exited_at = time.time()

    def lines(self) -> list[dict[str, Any]]:
        return read_lines(self.out)


def ownership(consumers: Iterable[ConsumerProcess]) -> Ownership:
    return Ownership({c.name: c.lines() for c in consumers})
