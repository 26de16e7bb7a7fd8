"""``berth-analyze`` over the evidence journal the operator keeps for a Kafka fleet (Kafka keeps none itself).

The operator's own evidence and journal (``support.evidence.EvidenceWriter``, as a pass does it, over
``DirectoryJournal``) see a fleet of three static members (its group keyed ``kafka://<cluster>/orders``, as the
advice is): orders-1 comes back under a new member id 4 s after it was last seen, orders-2 6 s after, and then the
operator removes orders-2. The pipeline reads that journal like the coordinator's and gives the same advice it
would there: p99 of [4 s, 6 s] = 6 s; x1.5 + 3 s heartbeat = 12 s.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.evidence import EvidenceWriter

from berth.operator.adapters.evidence_files import DirectoryJournal
from berth.operator.planners.observations import GroupDescription, GroupMember, PodTimes
from berth.pipeline.main import main

pytestmark = pytest.mark.spark

T0 = 1_795_000_000_000


def described(state: str, members: dict[str, str]) -> GroupDescription:
    return GroupDescription("orders", state, -1, None, tuple(GroupMember(m, i) for i, m in members.items()))


async def test_the_operators_kafka_evidence_gives_session_timeout_advice(spark: SparkSession, tmp_path: Path) -> None:
    journal = tmp_path / "evidence"
    recorder = EvidenceWriter(DirectoryJournal(journal))
    uid, key = "fleet-uid", "kafka://kafka-0.kafka.data:9092/orders"
    members = {"orders-0": "m0", "orders-1": "m1", "orders-2": "m2"}
    await recorder.observed(uid, key, described("Stable", members), T0)
    await recorder.observed(uid, key, described("Stable", {**members, "orders-1": "m1b"}), T0 + 4_000)
    members["orders-1"] = "m1b"
    await recorder.observed(uid, key, described("Stable", {**members, "orders-2": "m2b"}), T0 + 10_000)
    await recorder.removed(uid, key, {"orders-2": "NONE"}, everyone=False, now_ms=T0 + 20_000)

    events = [json.loads(line) for path in sorted(journal.glob("*.jsonl")) for line in path.read_text().splitlines()]
    assert [e["type"] for e in events] == [
        "static_member_replaced",
        "static_member_replaced",
        "member_left",
        "rebalance_started",
    ]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]

    out = tmp_path / "out"
    assert main(["--journal", str(journal), "--out", str(out), "--quiet"]) == 0
    advice = json.loads((out / "advice.json").read_text())["groups"][key]
    assert (advice["samples"], advice["restart_gap_p_ms"], advice["advised_session_timeout_ms"]) == (2, 6_000, 12_000)


async def test_a_known_restart_reaches_the_advice_as_long_as_it_was_not_as_long_as_the_describes_are_apart(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The operator describes the group every 10 s (its reconcile interval); each pod's new process started 0.5 s
    and 2 s after the previous one ended (the pods' own times, as Kubernetes records them). The evidence records
    those gaps, not the 10 s between describes, and the advice is built on them: p99 of [0.5 s, 2 s] = 2 s;
    x1.5 + 3 s heartbeat = 6 s (10 s between describes would have advised 18 s)."""
    journal = tmp_path / "evidence"
    recorder = EvidenceWriter(DirectoryJournal(journal))
    uid, key = "fleet-uid", "kafka://kafka-0.kafka.data:9092/orders"
    members = {"orders-0": "m0", "orders-1": "m1", "orders-2": "m2"}
    await recorder.observed(uid, key, described("Stable", members), T0)
    at = datetime.fromtimestamp(T0 / 1000, tz=UTC)
    ended, started = at + timedelta(seconds=3), at + timedelta(seconds=3.5)
    pods = {"orders-1": PodTimes(created=ended, started=started)}  # replaced: its pod created 0.5 s before start
    await recorder.observed(uid, key, described("Stable", {**members, "orders-1": "m1b"}), T0 + 10_000, pods)
    members["orders-1"] = "m1b"
    restarted = PodTimes(at, at + timedelta(seconds=16), previous_ended=at + timedelta(seconds=14))  # in place
    await recorder.observed(
        uid, key, described("Stable", {**members, "orders-2": "m2b"}), T0 + 20_000, {"orders-2": restarted}
    )

    events = [json.loads(line) for path in sorted(journal.glob("*.jsonl")) for line in path.read_text().splitlines()]
    assert [(e["group_instance_id"], e["offline_ms"]) for e in events] == [("orders-1", 500), ("orders-2", 2_000)]

    out = tmp_path / "out"
    assert main(["--journal", str(journal), "--out", str(out), "--quiet"]) == 0
    advice = json.loads((out / "advice.json").read_text())["groups"][key]
    assert (advice["samples"], advice["restart_gap_p_ms"], advice["advised_session_timeout_ms"]) == (2, 2_000, 6_000)
