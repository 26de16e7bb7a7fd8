"""``berth-analyze`` over a journal a real coordinator wrote, read from its data directory and downloaded over HTTP.

The fleet: ``orders``, three static members on the manual clock, formed with the member library's assignment
encoding; then orders-1 restarts after 4 s away and orders-2 after 6 s, both replaced in place without a rebalance.
Every figure the analysis reports follows from those clock moves (the coordinator's ``offline_ms``), so the
advice is exact: p99 of [4 s, 6 s] = 6 s; x1.5 + 3 s heartbeat = 12 s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from support.api import Api
from support.coordinator import CoordinatorProcess, secured_coordinator

from berth.pipeline.main import main

pytestmark = pytest.mark.spark

ADMIN = "analytics-admin-token-0123456789"
INSTANCES = ["orders-0", "orders-1", "orders-2"]
PARTITIONS = {"orders-0": [0, 1], "orders-1": [2, 3], "orders-2": [4, 5]}


def library_assignment(instance: str) -> bytes:
    return json.dumps({"version": 1, "partitions": {"orders": PARTITIONS[instance]}, "user_data": None}).encode()


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[CoordinatorProcess]:
    with secured_coordinator(tmp_path, tokens=[{"token": ADMIN, "admin": True}]) as proc:
        yield proc


@pytest.fixture
async def admin(secured: CoordinatorProcess) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, secured.url, token=ADMIN)


async def restart_in_place(api: Api, instance: str, away_ms: int, keep_alive: dict[str, str]) -> str:
    """``instance`` is away for ``away_ms`` (the others heartbeat meanwhile) and rejoins with an empty member id."""
    await api.advance(away_ms)
    for other, member_id in keep_alive.items():
        if other != instance:
            await api.heartbeat("orders", member_id, 1, other)
    rejoined = await api.join("orders", instance_id=instance)
    assert rejoined["error"] == "NONE"
    return str(rejoined["member_id"])


@pytest.fixture
async def fleet_journal(admin: Api, secured: CoordinatorProcess) -> Path:
    joined = await admin.form_static_group("orders", INSTANCES, assignment=library_assignment)
    members = {instance: str(answer["member_id"]) for instance, answer in joined.items()}
    members["orders-1"] = await restart_in_place(admin, "orders-1", 4_000, members)
    members["orders-2"] = await restart_in_place(admin, "orders-2", 6_000, members)
    replaced = [e for e in await admin.journal() if e["type"] == "static_member_replaced"]
    assert [(e["group_instance_id"], e["offline_ms"], e["rebalance"]) for e in replaced] == [
        ("orders-1", 4_000, False),
        ("orders-2", 6_000, False),
    ]
    return secured.data_dir / "journal"


def advice_of(out: Path) -> dict[str, object]:
    document = json.loads((out / "advice.json").read_text())
    document.pop("generated_at_ms")
    return dict(document)


def test_the_coordinators_own_segments_and_its_journal_route_give_the_same_exact_advice(
    spark: SparkSession, fleet_journal: Path, secured: CoordinatorProcess, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(ADMIN + "\n")
    from_disk, downloaded = tmp_path / "from-disk", tmp_path / "downloaded"

    assert main(["--journal", str(fleet_journal), "--out", str(from_disk), "--quiet"]) == 0
    assert (
        main(["--journal-url", secured.url, "--token-file", str(token_file), "--out", str(downloaded), "--quiet"]) == 0
    )

    advice = advice_of(from_disk)
    assert advice == advice_of(downloaded)
    assert advice["groups"] == {
        "orders": {
            "advised_session_timeout_ms": 12_000,
            "samples": 2,
            "percentile": 0.99,
            "restart_gap_p_ms": 6_000,
            "safety_margin": 1.5,
            "heartbeat_interval_ms": 3_000,
            "min_ms": 6_000,
            "max_ms": 1_800_000,
            "confident": False,
            "reason": "p99 of 2 restart gaps is 6.0 s; x1.5 + 3.0 s heartbeat = 12.0 s; "
            "only 2 samples, fewer than 30: not confident",
        }
    }
    (summary,) = pq.read_table(from_disk / "summary.parquet").to_pylist()
    assert summary["static_restarts"] == 2
    assert summary["restarts_without_rebalance"] == 2
    # No dynamic restart in this journal to measure one by: each would have cost at least the departure's rebalance.
    assert summary["rebalances_avoided"] == 2
    assert summary["rebalances"] == 1  # the group's formation
    assert summary["partitions_moved"] == 0
    assert summary["unknown_assignments"] == 0
    assert summary["assignments"] == 1


def test_a_wrong_token_or_an_unreachable_coordinator_is_one_line_and_exit_1(
    secured: CoordinatorProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("not-the-admin-token-at-all")
    out = tmp_path / "out"

    assert main(["--journal-url", secured.url, "--token-file", str(token_file), "--out", str(out), "--quiet"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"berth-analyze: error: journal {secured.url}/v1/journal?after=0&limit=10000: HTTP 401")
    assert "not-the-admin-token" not in error
    assert error.count("\n") == 1

    assert main(["--journal-url", "http://127.0.0.1:9", "--out", str(out), "--quiet"]) == 1
    assert "coordinator unreachable" in capsys.readouterr().err
    assert not out.exists()


def test_a_coordinator_without_events_is_an_empty_journal(
    secured: CoordinatorProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(ADMIN)

    code = main(["--journal-url", secured.url, "--token-file", str(token_file), "--out", str(tmp_path), "--quiet"])

    assert code == 1
    assert capsys.readouterr().err == (
        f"berth-analyze: error: journal is empty: the coordinator at {secured.url} has no events yet\n"
    )


def test_a_token_file_without_a_journal_url_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--journal", str(tmp_path), "--token-file", str(tmp_path / "t"), "--out", str(tmp_path)])

    assert exit_info.value.code == 2
    assert "--token-file goes with --journal-url" in capsys.readouterr().err


KAFKA = "kafka://kafka-0.kafka.data:9092"
#: A restart gap that, counted for the coordinator's group "orders" (p99 of its 6 s gaps), would advise 30 minutes.
POISON_GAP_MS = 1_200_000


async def kafka_evidence_file(path: Path) -> Path:
    """What the operator keeps for its Kafka fleets (the ConfigMap's evidence.jsonl): ``payments``, whose
    payments-1 comes back after 5 s, and another team's Kafka fleet named like the coordinator's group ``orders``,
    whose orders-1 comes back after 20 minutes — recorded under their keys (``kafka://<cluster>/<group>``), and once
    more as an operator before issue 22 wrote it, under the bare group id."""
    from support.evidence import EvidenceWriter

    from berth.operator.adapters.evidence_files import DirectoryJournal
    from berth.operator.planners.observations import GroupDescription, GroupMember

    def described(group: str, members: dict[str, str]) -> GroupDescription:
        return GroupDescription(group, "Stable", -1, None, tuple(GroupMember(m, i) for i, m in members.items()))

    recorder = EvidenceWriter(DirectoryJournal(path.parent / "evidence-dir"))
    t0 = 1_795_000_000_000
    for uid, group, key, gap in (
        ("uid-p", "payments", f"{KAFKA}/payments", 5_000),
        ("uid-o", "orders", f"{KAFKA}/orders", POISON_GAP_MS),
        ("uid-legacy", "orders", "orders", POISON_GAP_MS),  # keyed against its source: flagged, never analysed
    ):
        await recorder.observed(uid, key, described(group, {f"{group}-0": "m0", f"{group}-1": "m1"}), t0)
        await recorder.observed(uid, key, described(group, {f"{group}-0": "m0", f"{group}-1": "m1b"}), t0 + gap)
    return one_file(path.parent / "evidence-dir", path)


def one_file(segments: Path, path: Path) -> Path:
    """The segments joined, as the operator keeps them in its ConfigMap's one key."""
    path.write_text("".join(segment.read_text() for segment in sorted(segments.glob("*.jsonl"))))
    return path


async def test_the_operators_kafka_evidence_is_read_with_the_download(
    fleet_journal: Path, secured: CoordinatorProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(ADMIN)
    evidence = await kafka_evidence_file(tmp_path / "evidence.jsonl")
    missing = tmp_path / "no-kafka-fleet-yet.jsonl"
    out = tmp_path / "out"
    argv = ["--journal-url", secured.url, "--token-file", str(token_file), "--out", str(out)]

    assert main([*argv, "--also-journal", str(evidence), "--also-journal", str(missing)]) == 0

    groups = advice_of(out)["groups"]
    assert isinstance(groups, dict)
    # Issue 22, point 6: the Kafka fleet named like the coordinator's group moves none of its advice (before, its
    # 20-minute gap joined orders' 6 s ones and the advice went to the 30-minute maximum).
    assert {name: (g["samples"], g["restart_gap_p_ms"]) for name, g in groups.items()} == {
        "orders": (2, 6_000),
        f"{KAFKA}/orders": (1, POISON_GAP_MS),
        f"{KAFKA}/payments": (1, 5_000),
    }
    assert groups["orders"]["advised_session_timeout_ms"] == 12_000
    err = capsys.readouterr().err
    assert "1 malformed line" in err or "1 malformed lines" in err, err
    assert f"--also-journal {missing}: not there, skipped" in err
    assert f"--also-journal {evidence}: read with the download" in err


def test_also_journal_without_a_journal_url_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--journal", str(tmp_path), "--also-journal", str(tmp_path / "e.jsonl"), "--out", str(tmp_path)])

    assert exit_info.value.code == 2
    assert "--also-journal goes with --journal-url" in capsys.readouterr().err
