"""The member player of ``python -m benchmarks operator_pods`` (``benchmarks.pod_members``), without a coordinator or
a control plane: what a member does after each answer, the leader's assignment, which pods run a member, and which
member a pod event starts or silences.
"""

from __future__ import annotations

import asyncio
import base64
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.pod_members import Members, Next, PodMember, assign, plan_after
from berth.coordinator.client.encoding import decode_assignment


@pytest.mark.parametrize(
    ("kind", "code", "step"),
    [
        ("join", 0, Next.SYNC),
        ("sync", 0, Next.HEARTBEAT),
        ("heartbeat", 0, Next.HEARTBEAT),
        ("heartbeat", 27, Next.REJOIN),  # REBALANCE_IN_PROGRESS
        ("sync", 27, Next.REJOIN),
        ("heartbeat", 22, Next.REJOIN),  # ILLEGAL_GENERATION
        ("join", 79, Next.REJOIN),  # MEMBER_ID_REQUIRED: again, with the id it was given
        ("heartbeat", 25, Next.REJOIN_FRESH),  # UNKNOWN_MEMBER_ID: expired or replaced
        ("join", 82, Next.STOP),  # FENCED_INSTANCE_ID: another process holds the instance id
        ("heartbeat", 82, Next.STOP),
        ("join", 15, Next.RETRY),  # COORDINATOR_NOT_AVAILABLE
        ("heartbeat", 14, Next.RETRY),  # COORDINATOR_LOAD_IN_PROGRESS
    ],
)
def test_a_member_follows_the_answer_as_the_member_library_does(kind: str, code: int, step: Next) -> None:
    assert plan_after(kind, code) is step


def test_the_leader_gives_every_partition_to_exactly_one_member_round_robin() -> None:
    given = {a["member_id"]: decode_assignment(base64.b64decode(a["assignment"])) for a in assign(["b", "a", "c"])}
    assert set(given) == {"a", "b", "c"}
    assert given["a"].partitions == {"orders": (0, 3, 6, 9)}
    owned = sorted(p for a in given.values() for p in a.partitions["orders"])
    assert owned == list(range(12))


def pod(
    name: str = "f-0000-1", uid: str = "u1", *, phase: str = "Running", ready: str = "True", deleting: bool = False
) -> dict[str, Any]:
    """A pod as the API server sends it (JSON)."""
    env = [
        {"name": "BERTH_GROUP_ID", "value": "g"},
        {"name": "BERTH_SESSION_TIMEOUT_MS", "value": "30000"},
        {"name": "BERTH_HEARTBEAT_INTERVAL_MS", "value": "3000"},
        {"name": "BERTH_TOKEN", "valueFrom": {"secretKeyRef": {"name": "member-token", "key": "token"}}},
    ]
    meta = {"namespace": "ns", "name": name, "uid": uid, **({"deletionTimestamp": "now"} if deleting else {})}
    return {
        "metadata": meta,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "c", "env": env}]},
    }


def test_a_running_ready_pod_runs_the_member_its_environment_describes() -> None:
    member = PodMember.of(pod())
    assert member == PodMember("ns", "f-0000-1", "u1", "g", 30000, 30000, 3000)
    created = pod()
    created["metadata"]["creationTimestamp"] = "2026-11-28T22:00:05Z"
    assert PodMember.of(created).created_at == 1795903205.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "state", [{"phase": "Pending"}, {"ready": "False"}, {"deleting": True}], ids=["pending", "unready", "deleting"]
)
def test_a_pod_not_running_ready_or_marked_for_deletion_runs_no_member(state: dict[str, Any]) -> None:
    assert PodMember.of(pod(**state)) is None


def test_a_pod_deleted_silences_its_member_and_its_replacement_starts_a_new_one() -> None:
    async def scenario() -> list[tuple[str, int]]:
        members = Members(SimpleNamespace(), Counter())  # type: ignore[arg-type]
        members._play = lambda key, member: asyncio.sleep(3600)  # type: ignore[method-assign]  # no coordinator
        key = ("ns", "f-0000-1")
        seen = []
        members.pod_seen(PodMember.of(pod(uid="u1")), key, "u1")
        seen.append((members.running[key][0], members.counts["members started"]))
        members.pod_seen(None, key, "u0")  # a late event of an older pod of that name: nothing
        seen.append((members.running[key][0], members.counts["members silenced"]))
        members.pod_seen(PodMember.of(pod(uid="u2")), key, "u2")  # replaced: the old member silenced first
        seen.append((members.running[key][0], members.counts["members silenced"]))
        members.pod_seen(None, key, "u2")  # marked for deletion
        seen.append(("gone" if key not in members.running else "running", members.counts["members silenced"]))
        return seen

    assert asyncio.run(scenario()) == [("u1", 1), ("u1", 0), ("u2", 1), ("gone", 2)]


def test_a_replaced_pod_s_restart_gap_is_counted_against_its_session_timeout() -> None:
    async def scenario() -> list[tuple[float, int]]:
        members = Members(SimpleNamespace(), Counter())  # type: ignore[arg-type]
        members._play = lambda key, member: asyncio.sleep(3600)  # type: ignore[method-assign]
        key = ("ns", "f-0000-1")
        members.pod_seen(PodMember.of(pod(uid="u1")), key, "u1")
        members.pod_seen(None, key, "u1")
        members.pod_seen(PodMember.of(pod(uid="u2")), key, "u2")
        return members.gaps

    [(gap, session, until_created)] = asyncio.run(scenario())
    assert 0 <= gap < 1 and session == 30000
    assert until_created is None  # the test's pods carry no creationTimestamp
