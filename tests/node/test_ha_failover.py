"""The replicated coordinator's failures on real pods: the active replica's pod deleted, its container killed in
place (kill -9), its container frozen past its lease (the cgroup freezer) and thawed after the standby took over.

Three example consumers commit every half second through the coordinator's Service (kube-proxy's rules, only the
active replica Ready) while it happens. Each failover is timed from the failure to the first join answered through
the Service (``support.node_probe``, in the node's network namespace), against the fleet's session timeout, and
checked as the process-level campaign (tests/ha/test_ha_campaign.py) checks its own:

- nothing acknowledged is lost: no committed offset below one a member's log acknowledged before the failure
  (``support.node_members``); the acknowledged commits are counted;
- the static group does not rebalance (journal) and keeps its generation and member ids; no member restarts;
- nothing reaches the members' users (their logs: no refused commit, revocation, warning or error) or the
  operator's (no Warning Event for the fleet, no condition of its status changing);
- a frozen replica, thawed, answers nothing as the active one: it is a standby (``berth_active`` 0, /readyz 503,
  not in the Service's endpoints) and its log says its term ended.

``BERTH_NODE_HA_ROUNDS`` failovers of each kind (1 in ``make test``; ``make soak`` runs more and writes the figures
to ``BERTH_NODE_HA_RESULTS``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.fleet_stage import rebalances
from support.kube import wait_until
from support.node import Node
from support.node_ha import FLEET_REPLICAS, FirstJoin, HaStage, Replicas
from support.node_members import acknowledged_before, commits, lost, read_logs, surfaced

ROUNDS = int(os.environ.get("BERTH_NODE_HA_ROUNDS", "1"))
RESULTS = os.environ.get("BERTH_NODE_HA_RESULTS")
pytestmark = [pytest.mark.node, pytest.mark.timeout(300 + 240 * ROUNDS)]
PROBE_GROUP = "orders-probe"
#: How long a frozen replica stays frozen after the standby took over (its lease long gone by then).
FROZEN_AFTER_TAKEOVER_S = 5.0


@dataclass
class Round:
    kind: str
    first_join_s: float
    session_timeout_ms: int
    acknowledged_commits: int
    lost: int
    rebalances: int


@pytest.fixture(scope="module")
def probe(ha_stage: HaStage, node: Node) -> Iterator[FirstJoin]:
    first_join = FirstJoin(node, ha_stage.release, PROBE_GROUP)
    yield first_join
    first_join.close()


def _second(moment: float) -> str:
    """``moment`` (time.time()) rounded down to a second, as Kubernetes writes times."""
    return datetime.fromtimestamp(math.floor(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fail_over(stage: HaStage, probe: FirstJoin, kind: str) -> Round:
    replicas, fleet, kube = stage.replicas, stage.fleet, stage.release.kube
    fleet.ready_and_stable(FLEET_REPLICAS)
    victim = replicas.active()
    before = fleet.describe()
    fleet.mark(kind)
    session_timeout_ms = int(fleet.status()["sessionTimeoutMs"])

    wall, started = time.time(), time.monotonic()
    {"delete": replicas.delete, "kill": replicas.kill, "freeze": replicas.freeze}[kind](victim)
    try:
        took = probe.measure(started)
        print(
            f"\n{kind} of {victim['metadata']['name']}: first join answered {took:.2f} s after the failure "
            f"(session timeout {session_timeout_ms / 1000:g} s)"
        )
        if kind == "freeze":
            replicas.active(other_than=victim["metadata"]["uid"])  # the frozen one cannot be Ready
            time.sleep(FROZEN_AFTER_TAKEOVER_S)
    finally:
        if kind == "freeze":
            replicas.thaw(victim)
    check_the_replicas_after(replicas, victim, kind)

    # The members carry on: every one commits again on the new active replica.
    pods = {f"{fleet.name}-{i}" for i in range(FLEET_REPLICAS)}

    def not_committed_again(logs: dict[str, list[tuple[float, str]]]) -> list[str]:
        return sorted(pods - {c.pod for c in commits(logs) if c.at > wall + took})

    try:
        wait_until(
            lambda: not not_committed_again(read_logs(fleet, FLEET_REPLICAS)),
            "every member committing again",
            timeout_s=120,
            every_s=1,
        )
    except AssertionError as timed_out:  # say who did not, and what the members printed meanwhile
        logs = read_logs(fleet, FLEET_REPLICAS)
        said = surfaced(logs, since=wall)[-10:]
        raise AssertionError(f"{timed_out}: {not_committed_again(logs)} did not; printed since: {said}") from None
    logs = read_logs(fleet, FLEET_REPLICAS)
    found = commits(logs)
    missing = lost(acknowledged_before(found, wall), fleet.offsets())
    acknowledged = sum(1 for c in found if c.at >= wall)
    assert missing == {}, missing

    # No rebalance, same generation and member ids, no member restarted.
    assert fleet.rebalances_since(kind) == []
    after = fleet.describe()
    assert after["group_state"] == "Stable" and after["generation_id"] == before["generation_id"]
    assert {m["member_id"] for m in after["members"]} == {m["member_id"] for m in before["members"]}
    assert all(fleet.pod(i)["status"]["containerStatuses"][0]["restartCount"] == 0 for i in range(FLEET_REPLICAS))

    # Nothing surfaced: the members' logs, the fleet's Events and conditions.
    assert surfaced(logs, since=wall) == []
    since = _second(wall)
    warnings = [
        f"{e['reason']}: {e['message']}"
        for e in kube.events(fleet.namespace, kind="ConsumerFleet", name=fleet.name)
        if e["type"] == "Warning" and (e.get("lastTimestamp") or e.get("eventTime") or "") >= since
    ]
    assert warnings == []
    changed = [c for c in fleet.status().get("conditions") or [] if c["lastTransitionTime"] >= since]
    assert changed == []
    return Round(kind, took, session_timeout_ms, acknowledged, len(missing), len(rebalances(fleet.since(kind))))


def check_the_replicas_after(replicas: Replicas, victim: dict[str, Any], kind: str) -> None:
    """One replica active (Ready), the other standing by (running, not Ready, ``berth_active`` 0), the victim's pod
    among them: recreated (delete), its container restarted in place (kill: it may have won the election again), or
    thawed in place as a standby whose term ended (freeze)."""
    name, uid = victim["metadata"]["name"], victim["metadata"]["uid"]

    def settled() -> tuple[dict[str, Any], dict[str, Any]] | None:
        standbys = replicas.standbys()
        if len(standbys) != 1:
            return None
        active = replicas.active()
        return active, next(p for p in (active, *standbys) if p["metadata"]["name"] == name)

    active, pod = wait_until(settled, "one active replica and one standing by", timeout_s=180, every_s=0.5)
    assert replicas.metrics(active)["berth_active"] == 1
    assert all(replicas.metrics(p)["berth_active"] == 0 for p in replicas.standbys())
    if kind == "delete":
        assert pod["metadata"]["uid"] != uid
    elif kind == "kill":
        assert pod["metadata"]["uid"] == uid and replicas.restarts(pod) == replicas.restarts(victim) + 1
    else:
        assert pod["metadata"]["uid"] == uid and replicas.restarts(pod) == replicas.restarts(victim)
        assert pod["metadata"]["uid"] != active["metadata"]["uid"]
        log = replicas.log(pod)
        assert "term" in log and "ended" in log, log[-3000:]
    standing = [p["metadata"]["name"] for p in replicas.standbys()]
    print(f"{kind}: {active['metadata']['name']} active, {standing} standing by")


@pytest.mark.parametrize(
    "kind", [pytest.param("delete", marks=pytest.mark.soak), "kill", pytest.param("freeze", marks=pytest.mark.soak)]
)
def test_a_failover_of_the_active_pod_costs_no_rebalance_no_acknowledged_commit_and_no_error(
    ha_stage: HaStage, probe: FirstJoin, kind: str
) -> None:
    rounds = [fail_over(ha_stage, probe, kind) for _ in range(ROUNDS)]
    print(f"{kind}: first join answered after {[round(r.first_join_s, 2) for r in rounds]} s")
    if RESULTS:
        results = Path(RESULTS)
        previous = json.loads(results.read_text()) if results.exists() else []
        results.write_text(json.dumps(previous + [asdict(r) for r in rounds], indent=1))
