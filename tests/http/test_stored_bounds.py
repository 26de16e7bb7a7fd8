"""What the coordinator keeps, bounded per group, per token and in total, on a real coordinator (issue 22, points 1, 2
and 3; docs/api.md §6): the issue's floods in miniature, each refused in-band, nothing lost over a restart, and the
bounds holding after it.

- Offsets: one group's partitions beyond ``--offsets-max-per-group`` (or bytes beyond
  ``--offsets-max-bytes-per-group``) are INVALID_COMMIT_OFFSET_SIZE (28) for those partitions only.
- All groups: a token's commits to new groups with 4,000-byte metadata stop at ``--max-stored-bytes-per-token``; the
  admin's stop at ``--max-stored-bytes`` (28 per partition, COORDINATOR_NOT_AVAILABLE for a new group); the restart
  loads every accepted offset and refuses the same as before it.
- Groups per token and metric slots: a glob token's 205 commits create at most ``--max-groups-per-token`` groups,
  which hold at most ``--metrics-max-groups-per-token`` per-group series, so a fleet's group formed later has its
  series (its alerts); before, the glob token's groups took every slot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess
from support.rawhttp import send

pytestmark = pytest.mark.timeout(120)

ADMIN = "admin-token-0123456789"
TEAM = "team-token-0123456789"
GLOB = "glob-token-0123456789"
TOKENS = {
    "tokens": [
        {"name": "operator", "token": ADMIN, "admin": True},
        {"name": "team", "token": TEAM, "groups": ["team-*"]},
        {"name": "glob", "token": GLOB, "groups": ["*"]},
    ]
}
METADATA = "m" * 4_000


def call(proc: CoordinatorProcess, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    return send(proc.url, method, path, data, headers)


def commit(
    proc: CoordinatorProcess, group: str, token: str, partitions: range, topic: str = "t", metadata: str = METADATA
) -> tuple[str, list[str]]:
    body = {
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": p + 1, "committed_metadata": metadata}
                    for p in partitions
                ],
            }
        ]
    }
    status, answer = call(proc, "POST", f"/v1/groups/{group}/offsets", token, body)
    assert status == 200, answer
    return answer["error"], [p["error"] for t in answer["topics"] for p in t["partitions"]]


def fetched(proc: CoordinatorProcess, group: str) -> int:
    """Offsets the group has, over every page."""
    count, after = 0, None
    while True:
        path = f"/v1/groups/{group}/offsets" + (f"?after={after}" if after else "")
        answer = call(proc, "GET", path, ADMIN)[1]
        count += sum(len(t["partitions"]) for t in answer["topics"])
        after = answer["next"]
        if after is None:
            return count


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(json.dumps(TOKENS))
    return path


def test_a_groups_offsets_are_bounded_per_partition_in_band(tmp_path: Path, tokens: Path) -> None:
    args = ("--tokens-file", str(tokens), "--offsets-max-per-group", "250", "--offsets-max-bytes-per-group", "2000000")
    with CoordinatorProcess(tmp_path / "data", *args) as proc:
        _, config = call(proc, "GET", "/v1/config", TEAM)
        assert (config["offsets_max_per_group"], config["offsets_max_bytes_per_group"]) == (250, 2_000_000)
        assert commit(proc, "team-orders", TEAM, range(200)) == ("NONE", ["NONE"] * 200)
        error, more = commit(proc, "team-orders", TEAM, range(200, 300))
        assert error == "NONE" and more == ["NONE"] * 50 + ["INVALID_COMMIT_OFFSET_SIZE"] * 50
        # Bytes: 2,000,000 / (128 + 1 + 4,000) stored bytes is 484 offsets of this size; count 250 comes first.
        error, again = commit(proc, "team-orders", TEAM, range(250), topic="other")
        assert set(again) == {"INVALID_COMMIT_OFFSET_SIZE"}
        error, progress = commit(proc, "team-orders", TEAM, range(250))  # the partitions it has: never refused
        assert set(progress) == {"NONE"}
        assert fetched(proc, "team-orders") == 250


def test_the_issues_offset_flood_stops_at_the_tokens_and_the_total_bounds_and_reloads_as_it_was(
    tmp_path: Path, tokens: Path
) -> None:
    """The issue: 501 commits of 250 partitions x 4,000 bytes of metadata took the coordinator to 545 MiB and a reload
    past the chart's limit. In miniature (bounds of 2 MiB per token, 4 MiB in total): the token's flood stops at its
    bound, the admin's at the total, and what was accepted is exactly what a restart loads."""
    args = ("--tokens-file", str(tokens), "--max-stored-bytes-per-token", str(2 * 2**20))
    args += ("--max-stored-bytes", str(4 * 2**20))
    data = tmp_path / "data"
    with CoordinatorProcess(data, *args) as proc:
        answers: dict[str, int] = {}
        accepted = 0
        for n in range(20):
            error, partitions = commit(proc, f"team-{n:03d}", TEAM, range(250))
            answers[error] = answers.get(error, 0) + 1
            accepted += partitions.count("NONE")
        assert answers.get("COORDINATOR_NOT_AVAILABLE", 0) > 0  # no room left for one more group of the token
        assert 2 * 2**20 / 4_200 < accepted <= 2 * 2**20 / 4_129  # the token's bound, in offsets of this size
        admin = 0
        for n in range(20):
            error, partitions = commit(proc, f"admin-{n:03d}", ADMIN, range(250))
            admin += partitions.count("NONE")
        assert accepted + admin <= 4 * 2**20 / 4_129
        team_groups = [f"team-{n:03d}" for n in range(20)]
        before = {g: fetched(proc, g) for g in team_groups}
        proc.stop()
    with CoordinatorProcess(data, *args) as proc:
        assert {g: fetched(proc, g) for g in team_groups} == before  # nothing lost, nothing more
        assert commit(proc, "team-new", TEAM, range(1))[0] == "COORDINATOR_NOT_AVAILABLE"
        assert set(commit(proc, "admin-000", ADMIN, range(250, 260))[1]) == {"INVALID_COMMIT_OFFSET_SIZE"}


def series_of(proc: CoordinatorProcess) -> set[str]:
    """The groups that have per-group series."""
    _, text = send(proc.url, "GET", "/metrics")
    return set(re.findall(r'^berth_group_members\{group="([^"]*)"\}', text, re.MULTILINE))


def test_a_glob_token_cannot_take_every_group_or_metric_slot(tmp_path: Path, tokens: Path) -> None:
    args = ("--tokens-file", str(tokens), "--max-groups-per-token", "150", "--group-initial-rebalance-delay-ms", "0")
    with CoordinatorProcess(tmp_path / "data", *args) as proc:
        answers: dict[str, int] = {}
        for n in range(205):
            error, _ = commit(proc, f"glob-{n:03d}", GLOB, range(1), metadata="")
            answers[error] = answers.get(error, 0) + 1
        assert answers == {"NONE": 150, "COORDINATOR_NOT_AVAILABLE": 55}
        exported = series_of(proc)
        assert len(exported) == 10, "the token's groups hold its quota of slots, not all 200"
        # The operator claims a fleet's group; its member joins and the group has its series, and its alerts.
        owner = {"namespace": "team-a", "name": "orders", "uid": "uid-1"}
        assert call(proc, "PUT", "/v1/groups/fleet-orders/owner", ADMIN, owner)[0] == 200
        expected = {"group_instance_ids": ["orders-0"]}  # the fleet forms as its one member joins
        assert call(proc, "PUT", "/v1/groups/fleet-orders/expected-members", ADMIN, expected)[0] == 200
        join = {
            "member_id": "",
            "group_instance_id": "orders-0",
            "session_timeout_ms": 30_000,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}],
        }
        assert call(proc, "POST", "/v1/groups/fleet-orders/join", ADMIN, join)[1]["error"] == "NONE"
        assert "fleet-orders" in series_of(proc)
        _, text = send(proc.url, "GET", "/metrics")
        assert "berth_groups_refused_total 55" in text.replace(".0\n", "\n")
