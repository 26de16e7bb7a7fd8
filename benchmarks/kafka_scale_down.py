"""Benchmark: Berth's Kafka backend with real consumers on a Kafka-protocol broker (kfake, or the cluster named by
BERTH_KAFKA_BOOTSTRAP), per client (kafka-python, confluent-kafka):

- scale-down 5 -> 3 over 6 partitions, 30 s session timeout: seconds from the departed processes' exit until the
  survivors own every partition, with the operator's removal (ONE LeaveGroup by instance id through the Kafka
  coordinator port, sent the moment they are gone) and without it (waiting out the session timeout);
- rolling restart of 5 static members: rebalances the survivors see (each restarted member's own assignment on
  rejoining is not one).

Goal: <= 2 s with the removal vs >= 30 s without; 0 rebalances per rolling restart. The consumers are the example
programs in deploy/examples/consumers/, heartbeating every 500 ms, configured by the BERTH_* environment as pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Result, progress, spread
from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection

REPO = Path(__file__).resolve().parent.parent
KFAKE = Path(os.environ.get("BERTH_KFAKE") or REPO.parent / "shared" / "tools" / "kafka" / "bin" / "kfake")
PROGRAMS = {"kafka-python": "kafka_python_consumer.py", "confluent-kafka": "confluent_kafka_consumer.py"}
BEFORE, AFTER, PARTITIONS = 5, 3, 6
SESSION_MS = 30_000
RUNS = 3


class Member:
    def __init__(self, client: str, name: str, env: dict[str, str], logs: Path) -> None:
        self.client, self.name, self.env, self.out = client, name, env, logs / f"{name}.out"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        program = REPO / "deploy" / "examples" / "consumers" / PROGRAMS[self.client]
        with self.out.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(program)],
                env={**os.environ, **self.env, "BERTH_GROUP_INSTANCE_ID": self.name},
                stdout=out,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

    def stop(self) -> float:
        """SIGTERM, as a pod's container gets; when the process had exited."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)
        return time.time()

    def current(self) -> list[str] | None:
        owned = None
        for line in self.out.read_text().splitlines() if self.out.exists() else []:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "assigned":
                    owned = event["partitions"]
                elif event.get("event") in ("revoked", "exited"):
                    owned = []
        return owned

    def assignments_after(self, t: float) -> int:
        count = 0
        for line in self.out.read_text().splitlines() if self.out.exists() else []:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                count += event.get("event") == "assigned" and event["t"] > t
        return count


def covered(members: list[Member], topic: str) -> bool:
    owned = [member.current() for member in members]
    if any(not partitions for partitions in owned):
        return False
    flat = [p for partitions in owned for p in partitions or []]
    return sorted(flat) == sorted(f"{topic}:{p}" for p in range(PARTITIONS))


def until(predicate: Any, what: str, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.02)
    return time.time()


def create_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-bench")
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


def fleet(client: str, group: str, bootstrap: str, logs: Path) -> list[Member]:
    create_topic(bootstrap, group)
    env = {
        "BERTH_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "BERTH_GROUP_ID": group,
        "BERTH_SESSION_TIMEOUT_MS": str(SESSION_MS),
        "BERTH_HEARTBEAT_INTERVAL_MS": "500",
        "KAFKA_TOPIC": group,
    }
    members = [Member(client, f"{group}-{i}", env, logs) for i in range(BEFORE)]
    for member in members:
        member.start()
    until(lambda: covered(members, group), f"{group} to form", 90)
    return members


def scale_down(client: str, group: str, bootstrap: str, logs: Path, *, removal: bool) -> float:
    members = fleet(client, group, bootstrap, logs)
    try:
        departed, survivors = members[AFTER:], members[:AFTER]
        gone_at = max(member.stop() for member in departed)
        if removal:

            async def remove() -> None:
                port = KafkaCoordinatorPort(KafkaConnection(bootstrap))
                try:
                    results = await port.leave_instances(group, [m.name for m in departed])
                    assert set(results.values()) == {"NONE"}, results
                finally:
                    await port.close()

            asyncio.run(remove())
        owned_at = until(lambda: covered(survivors, group), "the survivors to own everything", SESSION_MS / 1000 + 60)
        return owned_at - gone_at
    finally:
        for member in members:
            with contextlib.suppress(ProcessLookupError, AssertionError):
                member.stop()


def group_state(bootstrap: str, group: str) -> str:
    async def describe() -> str:
        port = KafkaCoordinatorPort(KafkaConnection(bootstrap))
        try:
            return (await port.describe(group)).state
        finally:
            await port.close()

    return asyncio.run(describe())


def rolling_restart(client: str, group: str, bootstrap: str, logs: Path) -> int:
    members = fleet(client, group, bootstrap, logs)
    try:
        # As a StatefulSet rolls: the next pod only once the group is Stable again with the last one back in it.
        until(lambda: group_state(bootstrap, group) == "Stable", f"{group} Stable", 60)
        started = time.time()
        for member in reversed(members):
            stopped = member.stop()
            member.start()
            until(lambda m=member, s=stopped: m.assignments_after(s) >= 1, f"{member.name} back", 60)
            until(lambda: group_state(bootstrap, group) == "Stable", f"{group} Stable", 60)
        until(lambda: covered(members, group), "every partition owned", 60)
        # A rebalance reassigns every member; each restarted member's own assignment on rejoining is not one.
        return max(member.assignments_after(started) - 1 for member in members)
    finally:
        for member in members:
            with contextlib.suppress(ProcessLookupError):
                member.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def broker(workdir: Path, binary: Path = KFAKE, *configs: str) -> Any:
    """kfake (or ``binary``) on a free port with ``configs`` (a 30-minute maximum session timeout by default), or the
    cluster BERTH_KAFKA_BOOTSTRAP names; stopped by PID."""
    external = os.environ.get("BERTH_KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    port = free_port()
    settings = [arg for config in configs or ("group.max.session.timeout.ms=1800000",) for arg in ("-c", config)]
    process = subprocess.Popen(
        [str(binary), "-port", str(port), "-log-level", "warn", *settings],
        stdout=(workdir / "kfake.log").open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        until(lambda: _listening(port), f"{binary.name} to listen", 20)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def main() -> Result:
    figures: dict[str, Any] = {"session_ms": SESSION_MS, "before": BEFORE, "after": AFTER, "partitions": PARTITIONS}
    met = True
    summaries = []
    with tempfile.TemporaryDirectory() as tmp, broker(Path(tmp)) as bootstrap:
        logs = Path(tmp)
        for client in PROGRAMS:
            tag = "kp" if client == "kafka-python" else "ck"
            removal = [scale_down(client, f"{tag}-rm-{run}", bootstrap, logs, removal=True) for run in range(RUNS)]
            progress(f"{client}: with the removal {', '.join(f'{s:.2f}' for s in removal)} s")
            waited = scale_down(client, f"{tag}-wait", bootstrap, logs, removal=False)
            progress(f"{client}: waiting out the session timeout {waited:.1f} s")
            rebalances = rolling_restart(client, f"{tag}-roll", bootstrap, logs)
            progress(f"{client}: rolling restart of {BEFORE} static members: {rebalances} rebalances")
            figures[client] = {
                "removal_s": spread(removal),
                "session_timeout_wait_s": waited,
                "rolling_restart_rebalances": rebalances,
            }
            # A member's last heartbeat may come up to one interval before its exit: it expires that much sooner.
            waited_it_out = waited >= SESSION_MS / 1000 - 1.0
            met = met and spread(removal)["median"] <= 2.0 and waited_it_out and rebalances == 0
            summaries.append(f"{client} {spread(removal)['median']:.2f} s vs {waited:.1f} s, {rebalances} rebalances")
    return Result(
        name="kafka_scale_down",
        title="Kafka: scale-down 5 -> 3 and rolling restart, kafka-python and confluent-kafka",
        command="python -m benchmarks kafka_scale_down",
        goal="removal <= 2 s after the processes exit vs waiting out the 30 s session timeout; 0 rebalances per"
        " rolling restart",
        met=met,
        summary="; ".join(summaries),
        figures=figures,
        note="kfake (franz-go's Kafka-protocol broker) unless BERTH_KAFKA_BOOTSTRAP names a cluster; consumers"
        " heartbeat every 500 ms; the removal goes through the operator's Kafka coordinator port.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
