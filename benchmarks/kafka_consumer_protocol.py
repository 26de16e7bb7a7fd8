"""Benchmark: KIP-848 consumer-protocol groups with real confluent-kafka consumers (``group.protocol=consumer``, the
example program) on ``kfake-kip848`` with Kafka's defaults for them (a 45 s session timeout), or the cluster named
by BERTH_KAFKA_BOOTSTRAP (Kafka >= 4.0):

- scale-down 5 -> 3 over 6 partitions: seconds from the departed processes' exit (SIGTERM: a static member leaves
  with epoch -2 and keeps its partitions) until the survivors own every partition, with the operator's removal (ONE
  LeaveGroup by instance id through the Kafka coordinator port, sent the moment they are gone) and without it
  (waiting out the session timeout);
- a crash-restarted member (SIGKILL, then a new process with the same instance id, refused
  UNRELEASED_INSTANCE_ID until its previous member is gone): seconds from the crash until the new process owns
  partitions again, with the release (the same removal, sent once the new process was refused, as the operator's
  ``releaseStaleInstances`` does one reconcile pass after the pod is replaced) and without it;
- the same scale-down through the real operator (its defaults) on the real control plane (``operator_world``), the
  fake kubelet running the example consumer for each pod: seconds from the last departed pod gone until the
  survivors own every partition (issue 31: what a user feels), and the heartbeat interval the operator set on the
  group (``consumer.heartbeat.interval.ms``, read back from the broker).

Goal: the removal and the release give the partitions back within seconds, against the 45 s timeout; pod gone ->
survivors own every partition within 6 s through the operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import kafka_scale_down
from benchmarks.common import Result, progress, spread
from benchmarks.goals import GOALS
from benchmarks.kafka_scale_down import Member, covered, create_topic, until
from benchmarks.operator_world import world
from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection

REPO = Path(__file__).resolve().parent.parent
KFAKE = Path(
    os.environ.get("BERTH_KFAKE_KIP848") or REPO.parent / "shared" / "tools" / "kafka" / "bin" / "kfake-kip848"
)
BEFORE, AFTER, PARTITIONS = 5, 3, 6
BROKER_SESSION_S = 45
RUNS = 3
#: Issue 31: pod gone -> survivors own every partition, through the operator, on the test broker.
POD_GONE_GOAL_S = 6.0


def consumers(group: str, bootstrap: str, logs: Path, count: int) -> list[Member]:
    env = {
        "BERTH_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "BERTH_KAFKA_GROUP_PROTOCOL": "consumer",
        "BERTH_GROUP_ID": group,
        "KAFKA_TOPIC": group,
    }
    members = [Member("confluent-kafka", f"{group}-{i}", env, logs) for i in range(count)]
    for member in members:
        member.start()
    until(lambda: covered(members, group), f"{group} to form", 120)
    settled(bootstrap, group, count)
    return members


def settled(bootstrap: str, group: str, count: int) -> None:
    """Stable with ``count`` members, each at the group's epoch: measure only a group that has settled."""

    async def look() -> bool:
        port = KafkaCoordinatorPort(KafkaConnection(bootstrap))
        try:
            described = await port.describe(group)
        finally:
            await port.close()
        return (
            described.state == "Stable"
            and len(described.members) == count
            and all(m.member_epoch == described.generation for m in described.members)
        )

    until(lambda: asyncio.run(look()), f"{group} settled", 60)


def remove(bootstrap: str, group: str, names: list[str]) -> dict[str, str]:
    async def call() -> dict[str, str]:
        port = KafkaCoordinatorPort(KafkaConnection(bootstrap))
        try:
            return dict(await port.leave_instances(group, names))
        finally:
            await port.close()

    return asyncio.run(call())


def scale_down(group: str, bootstrap: str, logs: Path, *, removal: bool) -> float:
    create_topic(bootstrap, group)
    members = consumers(group, bootstrap, logs, BEFORE)
    try:
        departed, survivors = members[AFTER:], members[:AFTER]
        gone_at = max(member.stop() for member in departed)
        if removal:
            results = remove(bootstrap, group, [m.name for m in departed])
            assert set(results.values()) == {"NONE"}, results
        owned_at = until(lambda: covered(survivors, group), "the survivors to own everything", BROKER_SESSION_S + 60)
        return owned_at - gone_at
    finally:
        for member in members:
            with contextlib.suppress(ProcessLookupError, AssertionError):
                member.stop()


def crash_restart(group: str, bootstrap: str, logs: Path, *, release: bool) -> tuple[float, float | None]:
    """(seconds from the crash until the new process owns partitions, seconds from the release until then)."""
    create_topic(bootstrap, group)
    members = consumers(group, bootstrap, logs, 3)
    victim = members[1]
    try:
        assert victim.process is not None
        os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait()
        crashed = time.time()
        victim.start()  # its pod replaced: a new process with the same group.instance.id

        def refused() -> bool:
            return any(e.get("event") == "fatal" and e["t"] > crashed for e in lines(victim.out))

        until(refused, f"{victim.name} refused UNRELEASED_INSTANCE_ID", 60)
        released = None
        if release:
            released = time.time()
            assert remove(bootstrap, group, [victim.name]) == {victim.name: "NONE"}

        def back() -> float | None:
            found = [
                e["t"]
                for e in lines(victim.out)
                if e.get("event") == "assigned" and e["t"] > crashed and e["partitions"]
            ]
            return min(found) if found else None

        until(back, f"{victim.name} consuming again", BROKER_SESSION_S + 90)
        at = back()
        assert at is not None
        return at - crashed, (at - released if released is not None else None)
    finally:
        for member in members:
            with contextlib.suppress(ProcessLookupError, AssertionError):
                member.stop()


def lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return found


def group_heartbeat_ms(bootstrap: str, group: str) -> int | None:
    """The group's ``consumer.heartbeat.interval.ms`` as the broker describes it (what the operator set)."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-bench")
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, group, None)])
    finally:
        admin.close()
    configs = next(iter(next(iter(described.values())).values()))
    value = (configs.get("consumer.heartbeat.interval.ms") or {}).get("value")
    return int(value) if value is not None else None


def operated_scale_downs(logs: Path, runs: int) -> tuple[list[float], list[int | None]]:
    """A consumer-protocol fleet scaled 5 -> 3 by the real operator (its defaults) on the real control plane, its
    pods' members the example confluent-kafka consumer run by the fake kubelet: seconds from the last departed pod
    gone until the survivors own every partition (the operator's removal and the survivors' notice of it at their
    next heartbeat, at the interval the operator set on the group), and that interval, per run."""
    # benchmarks.operator_world (imported above) has put the tests' support package on the path.
    from support.kafka_stage import consumer_protocol_fleet, grant_secret_reads, operated_namespace
    from support.kube import wait_until

    took: list[float] = []
    heartbeats: list[int | None] = []
    with world() as w:
        for run in range(runs):
            with broker(logs) as bootstrap:
                topic = f"op-topic-{run}"
                create_topic(bootstrap, topic)
                namespace = w.kube.create_namespace(f"kip848-bench-{run}")
                grant_secret_reads(w.kube, namespace)
                directory = logs / f"operated-{run}"
                directory.mkdir()
                args = ["--kafka-bootstrap-servers", bootstrap, "--liveness-port", "0"]
                with operated_namespace(
                    w.kube, w.operator_kube, namespace, directory, args, bootstrap=bootstrap, topic=topic
                ) as stage:
                    name = f"cp{run}"
                    ids = [f"{name}-{i}" for i in range(BEFORE)]
                    stage.apply(consumer_protocol_fleet(name, BEFORE, topic))
                    stage.settled(name, ids)
                    heartbeats.append(group_heartbeat_ms(bootstrap, name))
                    stage.kubectl("scale", f"cf/{name}", f"--replicas={AFTER}")
                    departed, survivors = ids[AFTER:], ids[:AFTER]
                    last = wait_until(
                        lambda n=name, st=stage: st.status(n).get("lastScaleDown"), "lastScaleDown", timeout_s=120
                    )
                    assert last["removed"] == departed, last
                    gone = max(stage.kubelet.gone_at[pod] for pod in departed)
                    owned = stage.owning_everything(survivors).covered_at(survivors, stage.partitions())
                    took.append(owned - gone)
            progress(
                f"operator, scale-down 5 -> 3: survivors own every partition {took[-1]:.2f} s after the pods"
                f" are gone (group heartbeat {heartbeats[-1]} ms)"
            )
    return took, heartbeats


def broker(workdir: Path) -> Any:
    """kfake-kip848 with Kafka's defaults for consumer-protocol groups (or BERTH_KAFKA_BOOTSTRAP's cluster)."""
    return kafka_scale_down.broker(workdir, KFAKE, "group.max.session.timeout.ms=1800000")


def main() -> Result:
    figures: dict[str, Any] = {
        "broker_session_s": BROKER_SESSION_S,
        "before": BEFORE,
        "after": AFTER,
        "partitions": PARTITIONS,
    }
    # kfake's consumer-protocol assignor hands a member every topic on the broker: one broker per scenario run.
    removal, crash_release, release_only = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp)
        for run in range(RUNS):
            with broker(logs) as bootstrap:
                removal.append(scale_down(f"cp-rm-{run}", bootstrap, logs, removal=True))
            progress(f"scale-down 5 -> 3 with the removal: {removal[-1]:.2f} s")
        with broker(logs) as bootstrap:
            waited = scale_down("cp-wait", bootstrap, logs, removal=False)
        progress(f"scale-down 5 -> 3 waiting out the session timeout: {waited:.1f} s")
        for run in range(RUNS):
            with broker(logs) as bootstrap:
                total, after_release = crash_restart(f"cp-crash-{run}", bootstrap, logs, release=True)
            crash_release.append(total)
            release_only.append(after_release or 0.0)
            progress(f"crash-restart, released: {total:.2f} s after the crash ({after_release:.2f} s after release)")
        with broker(logs) as bootstrap:
            unreleased, _ = crash_restart("cp-crash-wait", bootstrap, logs, release=False)
        progress(f"crash-restart, waiting out the session timeout: {unreleased:.1f} s")
        pod_gone, heartbeats = operated_scale_downs(logs, RUNS)
    figures["scale_down"] = {"removal_s": spread(removal), "session_timeout_wait_s": waited}
    figures["operator_scale_down"] = {"pod_gone_to_survivors_own_s": spread(pod_gone), "group_heartbeat_ms": heartbeats}
    figures["crash_restart"] = {
        "released_s": spread(crash_release),
        "after_release_s": spread(release_only),
        "session_timeout_wait_s": unreleased,
    }
    met = (
        spread(removal)["median"] < 10
        and spread(crash_release)["median"] < 10
        and waited > 30
        and unreleased > 30
        and spread(pod_gone)["max"] <= POD_GONE_GOAL_S
    )
    return Result(
        name="kafka_consumer_protocol",
        title="Kafka consumer protocol (KIP-848): scale-down 5 -> 3 and a crash-restarted member, confluent-kafka",
        command="python -m benchmarks kafka_consumer_protocol",
        goal=GOALS["kafka_consumer_protocol"],
        met=met,
        summary=(
            f"operator scale-down: pod gone -> survivors own every partition {spread(pod_gone)['median']:.2f} s"
            f" (max {spread(pod_gone)['max']:.2f} s, group heartbeat {heartbeats[-1]} ms);"
            f" scale-down {spread(removal)['median']:.2f} s vs {waited:.1f} s; crash-restart released"
            f" {spread(crash_release)['median']:.2f} s vs {unreleased:.1f} s"
        ),
        figures=figures,
        note="kfake-kip848 with Kafka's defaults for consumer-protocol groups (45 s session, 5 s heartbeat) unless"
        " BERTH_KAFKA_BOOTSTRAP names a cluster; a fresh broker per run (its assignor hands members every topic);"
        " the removal and the release go through the operator's Kafka coordinator port (and, pod gone, through the"
        " operator itself: its defaults, the real control plane, the fake kubelet running the example consumer);"
        " the crash-restarted"
        " member's program starts a new consumer 1, 2, 4 s after each fatal UNRELEASED_INSTANCE_ID.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
