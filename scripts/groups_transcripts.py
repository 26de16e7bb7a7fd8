"""Transcripts of ``berth-groups`` for docs/member-library.md: real commands against a real coordinator.

Starts a coordinator (manual clock) in a temporary directory, forms a group ``orders`` of three static members of
the member library (four expected, one owner) with committed offsets and an Empty group ``payments`` with offsets,
then runs the ``berth-groups`` console script as a user would and prints each command with its output (stdout,
then stderr) as Markdown. Run:

    .venv/bin/python scripts/groups_transcripts.py > /tmp/transcripts.md
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from berth.coordinator.client import CoordinatorAdmin, GroupMember, MemberConfig
from berth.operator.local.coordinator_process import CoordinatorProcess

COMMANDS = [
    "describe --all-groups --state",
    "describe orders",
    "describe orders --members --verbose",
    "describe orders --offsets",
    "reset-offsets orders --all-topics --to-earliest",
    "remove-members orders --all",
    "describe orders --state",
    "# the rebalance the removal started waits for the expected members; 10 s (the rebalance timeout) later:",
    "describe orders --state",
    "reset-offsets orders --topic orders:0,1 --shift-by -150",
    "reset-offsets orders --topic orders:0,1 --shift-by -150 --execute",
    "reset-offsets orders --all-topics --to-latest",
    "-o json reset-offsets orders --topic orders:7 --to-offset 42",
]


def call(url: str, method: str, path: str, body: object) -> None:
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


async def form(url: str) -> None:
    async with CoordinatorAdmin(url) as admin:
        await admin.put_expected_members("orders", [f"orders-{i}" for i in range(4)])
        await admin.commit_offsets("payments", {("payments", 0): 5120, ("payments", 1): 4987})  # an Empty group
    call(url, "PUT", "/v1/groups/orders/owner", {"namespace": "shop", "name": "orders", "uid": "7f3c-demo"})
    members = [
        GroupMember(
            MemberConfig(
                group_id="orders",
                topics={"orders": 8},
                coordinator_url=url,
                group_instance_id=f"orders-{i}",
                client_id="orders-app",
                session_timeout_ms=600_000,
                rebalance_timeout_ms=10_000,
                heartbeat_interval_ms=100,
            )
        )
        for i in range(3)
    ]
    async with CoordinatorAdmin(url) as admin:
        for member in members:
            await member.start()
            await until_listed(admin, member.config.group_instance_id or "")
    call(url, "POST", "/v1/debug/clock", {"advance_ms": 10_000})  # orders-3 never comes: the wait ends
    await asyncio.gather(*(member.wait_until_stable() for member in members))
    await members[0].commit({("orders", p): 100 * (p + 1) for p in range(8)})
    for member in members:
        await member.close(leave=False)  # static members that stopped: they stay in the group


async def until_listed(admin: CoordinatorAdmin, instance_id: str) -> None:
    for _ in range(1000):
        if instance_id in (await admin.describe_group("orders")).instance_ids():
            return
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{instance_id} did not join")


def transcript(url: str, command: str) -> str:
    script = Path(sys.executable).with_name("berth-groups")
    done = subprocess.run(
        [str(script), *shlex.split(command)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BERTH_COORDINATOR_URL": url},
    )
    lines = [f"$ berth-groups {command}", done.stdout.rstrip("\n"), done.stderr.rstrip("\n")]
    if done.returncode:
        lines.append(f"$ echo $?\n{done.returncode}")
    return "\n".join(line for line in lines if line)


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="berth-transcripts-") as folder,
        CoordinatorProcess(Path(folder) / "data", manual_clock=True) as coordinator,
    ):
        asyncio.run(form(coordinator.url))
        for command in COMMANDS:
            if command.startswith("#"):
                call(coordinator.url, "POST", "/v1/debug/clock", {"advance_ms": 10_000})
                print(command[2:].capitalize() + "\n")
                continue
            print("```\n" + transcript(coordinator.url, command) + "\n```\n")


if __name__ == "__main__":
    main()
