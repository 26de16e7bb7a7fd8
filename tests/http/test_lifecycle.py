"""The ``berth-coordinator`` command: flags, readiness, SIGTERM, and restarts that restore every group."""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.timeout(120)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "berth.coordinator.command.main", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ((), "--data-dir"),
        (("--data-dir", "{tmp}", "--port", "abc"), "--port"),
        (("--data-dir", "{tmp}", "--port", "70000"), "--port"),
        (("--data-dir", "{tmp}", "--no-such-flag"), "--no-such-flag"),
        (("--data-dir", "{tmp}", "--group-min-session-timeout-ms", "9", "--group-max-session-timeout-ms", "5"), "min"),
        (("--data-dir", "{file}"), "not a directory"),
        (("--data-dir", "{tmp}", "--tokens-file", "{missing}"), "tokens file"),
        (("--data-dir", "{tmp}", "--tls-cert-file", "{file}"), "--tls-key-file"),
        (("--data-dir", "{tmp}", "--tls-cert-file", "{missing}", "--tls-key-file", "{file}"), "missing.yaml"),
        (("--data-dir", "{tmp}", "--header-timeout-s", "0"), "--header-timeout-s"),
        (("--data-dir", "{tmp}", "--probe-port", "70000"), "--probe-port"),
    ],
)
def test_bad_flags_or_data_dir_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...], complaint: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    formatted = [a.format(tmp=tmp_path / "data", file=a_file, missing=tmp_path / "missing.yaml") for a in args]
    result = run_cli(*formatted)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert complaint in lines[0]
    assert result.stdout == ""


def test_version_and_help_with_every_flags_default() -> None:
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("berth-coordinator ")
    shown = run_cli("--help")
    assert shown.returncode == 0
    options = shown.stdout.split("options:", 1)[1]
    entries = re.split(r"\n  (?=-)", "\n" + options.strip("\n"))[1:]  # one per flag: its names, then its help
    assert len(entries) > 25
    for entry in entries:
        words = " ".join(entry.split()).split()
        described = [w for w in words if not w.startswith("-") and not w.isupper() and not w.startswith("{")]
        assert len(described) >= 3, f"{entry.split()[0]} has no help text"
    text = " ".join(shown.stdout.split())
    for default in ("(default: 9094)", "(default: 10000)", "(default: 1000)", "(default: 10.0)", "(default: 200)"):
        assert default in text, default
    assert "default: off" in text and "(default: unlimited)" in text


def test_help_into_a_closed_pipe_is_quiet() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "berth.coordinator.command.main", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # `berth-coordinator --help | head -0`
    assert process.stderr.read() == b""
    assert process.wait(30) in (0, 141)


async def test_sigterm_answers_parked_requests_and_exits_0(coordinator: CoordinatorProcess, api: Api) -> None:
    parked = await api.park(api.join("g", instance_id="i-0"))
    assert coordinator.proc is not None
    exit_code = await asyncio.get_running_loop().run_in_executor(None, coordinator.stop)
    answered = await parked
    assert answered["error_code"] == 15
    assert answered["error"] == "COORDINATOR_NOT_AVAILABLE"
    assert exit_code == 0


async def test_debug_clock_exists_only_with_the_flag(tmp_path: Path) -> None:
    with CoordinatorProcess(tmp_path / "data", manual_clock=False) as proc:
        async with aiohttp.ClientSession() as session:
            status, _ = await Api(session, proc.url).post("/v1/debug/clock", {"advance_ms": 1})
    assert status == 404


async def test_config_reports_the_effective_limits(tmp_path: Path) -> None:
    with CoordinatorProcess(
        tmp_path / "data", "--group-max-size", "7", "--group-initial-rebalance-delay-ms", "0"
    ) as proc:
        async with aiohttp.ClientSession() as session:
            _, config = await Api(session, proc.url).get("/v1/config")
    assert config == {
        "group_min_session_timeout_ms": 6000,
        "group_max_session_timeout_ms": 1800000,
        "group_max_size": 7,
        "group_initial_rebalance_delay_ms": 0,
        "new_member_join_timeout_ms": 300000,
        "offset_metadata_max_bytes": 4096,
        "member_metadata_max_bytes": 262144,
        "group_metadata_max_bytes": 8388608,
        "max_groups": 50000,
        "offsets_retention_ms": 604800000,
        "journal_event_max_bytes": 262144,
        "journal_page_max_bytes": 1048576,
        "offsets_max_per_group": 100000,
        "offsets_max_bytes_per_group": 16777216,
        "max_stored_bytes": 201326592,
        "max_stored_bytes_per_token": 25165824,
        "max_groups_per_token": 1000,
        "max_pending_members_per_group": 1000,
        "pending_member_timeout_ms": 30000,
        "api_versions": {
            "join": [0, 9],
            "sync": [0, 5],
            "heartbeat": [0, 4],
            "leave": [0, 5],
            "offsets": [0, 9],
            "offset_fetch": [0, 9],
            "describe": [0, 5],
            "list": [0, 5],
            "delete": [0, 2],
        },
    }


@pytest.mark.parametrize("how", ["sigterm", "kill -9"])
async def test_restart_restores_groups_without_a_rebalance(coordinator: CoordinatorProcess, api: Api, how: str) -> None:
    joined = await api.form_static_group("orders", ["orders-0", "orders-1", "orders-2"])
    me = joined["orders-0"]
    await api.post(
        api.group_path("orders", "/offsets"),
        {
            "member_id": me["member_id"],
            "generation_id": me["generation_id"],
            "group_instance_id": "orders-0",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 5, "committed_offset": 99, "committed_metadata": "x"}]}
            ],
        },
    )
    await api.request(
        "PUT",
        api.group_path("orders", "/expected-members"),
        {"group_instance_ids": ["orders-0", "orders-1", "orders-2"]},
    )
    before = await api.describe("orders")
    seq_before = (await api.journal())[-1]["seq"]

    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, coordinator.stop if how == "sigterm" else coordinator.kill)
    await loop.run_in_executor(None, coordinator.start)
    api.base_url = coordinator.url

    after = await api.describe("orders")
    assert after == before  # Stable, same generation, leader, members, metadata and assignments
    assert after["group_state"] == "Stable"
    _, offsets = await api.get(api.group_path("orders", "/offsets"))
    assert offsets["topics"][0]["partitions"][0]["committed_offset"] == 99
    _, expected = await api.get(api.group_path("orders", "/expected-members"))
    assert expected["group_instance_ids"] == ["orders-0", "orders-1", "orders-2"]
    for instance, r in joined.items():  # every member carries on where it was: no rejoin needed
        assert (await api.heartbeat("orders", r["member_id"], r["generation_id"], instance))["error"] == "NONE"
    restarted = await api.join("orders", instance_id="orders-1")  # and a static restart costs no rebalance
    assert restarted["generation_id"] == joined["orders-1"]["generation_id"]
    synced = await api.sync("orders", restarted["member_id"], restarted["generation_id"], "orders-1")
    assert base64.b64decode(synced["assignment"]) == b"orders-1"
    new_types = [e["type"] for e in await api.journal(after=seq_before)]
    assert "rebalance_started" not in new_types


async def test_sessions_restart_at_reload_and_expire_after_it(coordinator: CoordinatorProcess, api: Api) -> None:
    await api.form_static_group("orders", ["a"])
    await asyncio.get_running_loop().run_in_executor(None, coordinator.kill)
    await asyncio.get_running_loop().run_in_executor(None, coordinator.start)
    api.base_url = coordinator.url
    await api.advance(9_000)
    assert (await api.describe("orders"))["group_state"] == "Stable"  # a fresh 10 s session from the reload
    await api.advance(1_000)
    assert (await api.describe("orders"))["group_state"] == "Empty"


def test_a_second_coordinator_is_refused_even_after_the_lock_file_is_deleted(
    coordinator: CoordinatorProcess, tmp_path: Path
) -> None:
    (coordinator.data_dir / "berth.lock").unlink()

    second = run_cli("--data-dir", str(coordinator.data_dir), "--port", "0", "--manual-clock")

    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "in use by another Berth coordinator" in lines[0]
