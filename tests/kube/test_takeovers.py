"""Takeover attempts of issue 22 (points 2, 4 and 9), on the real API server with a real coordinator and real member
processes: what a namespace editor's fleet could do to another team's group, and the claims' life.

Team A runs plain consumers (member-library processes, no fleet) named like team B's pods would be
(``orders-0``...), with committed offsets. Team B — a namespace editor, served by its own namespace-scoped operator —
writes fleets meant to take A's group: ``adoptGroup: true`` with ``replicas: 0`` (before: 314 removals in 43 s and
its deletion deleting A's group and offsets), or a fleet created first on the vacant group (before: 243 removals in
~40 s). Now adoption is the administrator's (``--adopt-groups``) and, even granted, no member the fleet did not
create is ever removed and the group it shares is never deleted: removals 0, offsets lost 0. Claims are released when
their fleet goes, whatever state it was in; a claim whose fleet is gone is reclaimed; the operator's fleet bounds and
volume-claim name collisions are refused with a condition and an Event.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess, coordinator_get, coordinator_post
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import ADMIN_TOKEN, MEMBER_TOKEN, admin_leaves, fleet_body
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.slow]

#: Passes the hostile fleet gets to do harm before the test looks (its operator passes every second).
WATCH_S = 6.0
_groups = itertools.count(1)
Obj = dict[str, Any]
StartOperator = Callable[..., OperatorProcess]


@pytest.fixture
def start_operator(
    operator_identity: Kube, coordinator_for_operator: CoordinatorProcess, namespace: str, tmp_path: Path
) -> Iterator[StartOperator]:
    """Team B's operator: namespace-scoped (``--namespace``), as the chart's ServiceAccount, on the module's
    coordinator, plus ``extra`` flags; stopped at the end."""
    started: list[OperatorProcess] = []

    def start(*extra: str) -> OperatorProcess:
        directory = tmp_path / f"operator-{len(started)}"
        directory.mkdir()
        (directory / "admin-token").write_text(ADMIN_TOKEN)
        args = [
            "--namespace", namespace,
            "--coordinator-url", coordinator_for_operator.url,
            "--token-file", str(directory / "admin-token"),
            "--liveness-port", "0",
            "--metrics-port", "0",
            "--reconcile-interval-s", "1",
            *extra,
        ]  # fmt: skip
        operator = OperatorProcess(operator_identity.kubeconfig, directory / "operator.log", args).start()
        started.append(operator)
        return operator

    yield start
    for operator in started:
        operator.stop()
    for operator in started:
        assert not operator.forbidden(), operator.log()


class Group:
    """A group at the module's coordinator, as the admin sees it."""

    def __init__(self, coordinator: CoordinatorProcess, group: str) -> None:
        self.coordinator, self.group = coordinator, group

    def members(self) -> set[str]:
        described = coordinator_get(self.coordinator, f"/v1/groups/{self.group}", ADMIN_TOKEN)
        return {m["group_instance_id"] for m in described["members"]}

    def offsets(self) -> int:
        """Partitions with a committed offset."""
        fetched = coordinator_get(self.coordinator, f"/v1/groups/{self.group}/offsets", ADMIN_TOKEN)
        return sum(len(topic["partitions"]) for topic in fetched["topics"])

    def owner(self) -> Obj | None:
        described: Obj = coordinator_get(self.coordinator, f"/v1/groups/{self.group}", ADMIN_TOKEN)
        return described.get("owner")

    def removals(self) -> int:
        """Instance ids removed by an admin (the operator's batch leaves)."""
        events = coordinator_get(self.coordinator, "/v1/journal?after=0&limit=10000", ADMIN_TOKEN)["events"]
        return sum(len(batch) for batch in admin_leaves([e for e in events if e["group_id"] == self.group]))


class TeamA(Group):
    """Team A's plain consumers: member-library processes (no fleet) with static ids."""

    def __init__(self, coordinator: CoordinatorProcess, group: str, names: list[str], logs: Path) -> None:
        super().__init__(coordinator, group)
        self.names = names
        logs.mkdir(parents=True, exist_ok=True)
        self.processes: list[subprocess.Popen[bytes]] = []
        for name in names:
            env = {
                **os.environ,
                "BERTH_LOCAL_NAME": name,
                "BERTH_GROUP_ID": group,
                "BERTH_GROUP_INSTANCE_ID": name,
                "BERTH_COORDINATOR_URL": coordinator.url,
                "BERTH_TOKEN": MEMBER_TOKEN,
                "BERTH_SESSION_TIMEOUT_MS": "30000",
                "BERTH_HEARTBEAT_INTERVAL_MS": "500",
                "BERTH_TOPICS": "orders:6",
            }
            with (logs / f"{name}.out").open("ab") as out, (logs / f"{name}.err").open("ab") as err:
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "berth.operator.local.member"],
                        env=env,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,
                    )
                )
        wait_until(lambda: self.members() == set(names), f"team A's {', '.join(names)} in group {group}")

    @staticmethod
    def commit_offsets(coordinator: CoordinatorProcess, group: str) -> None:
        """A simple commit while the group is Empty (what Kafka's admin tools send)."""
        partitions = [{"partition_index": p, "committed_offset": 100 + p} for p in range(6)]
        answer = coordinator_post(
            coordinator,
            f"/v1/groups/{group}/offsets",
            {"topics": [{"name": "orders", "partitions": partitions}]},
            MEMBER_TOKEN,
        )
        assert answer["error_code"] == 0, answer

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=20)


@pytest.fixture
def team_a(coordinator_for_operator: CoordinatorProcess, tmp_path: Path) -> Iterator[Callable[..., TeamA]]:
    teams: list[TeamA] = []

    def start(group: str, names: list[str], *, offsets: bool = True) -> TeamA:
        if offsets:
            TeamA.commit_offsets(coordinator_for_operator, group)
        team = TeamA(coordinator_for_operator, group, names, tmp_path / f"team-a-{len(teams)}")
        teams.append(team)
        return team

    yield start
    for team in teams:
        team.stop()


def condition(kube: Kube, namespace: str, name: str, kind: str) -> Obj:
    status = (kube.get("cf", name, namespace=namespace) or {}).get("status") or {}
    return next((dict(c) for c in status.get("conditions") or [] if c["type"] == kind), {})


def refused(kube: Kube, namespace: str, name: str) -> Obj:
    return wait_until(
        lambda: (c := condition(kube, namespace, name, "SpecValid")).get("status") == "False" and c, f"{name} refused"
    )


def messages(kube: Kube, namespace: str, name: str, reason: str) -> list[str]:
    return [e["message"] for e in kube.events(namespace, kind="ConsumerFleet", name=name) if e["reason"] == reason]


def delete_fleet(kube: Kube, namespace: str, name: str) -> None:
    kube.kubectl("delete", "cf", name, "-n", namespace, "--wait=true", "--timeout=90s")


def group_name(stem: str) -> str:
    return f"{stem}-{next(_groups)}-{os.getpid()}"


def test_adopt_group_in_a_spec_takes_over_nothing_and_removes_no_one(
    kube: Kube, namespace: str, start_operator: StartOperator, team_a: Callable[..., TeamA]
) -> None:
    """Issue 22, point 2: a namespace editor's fleet with ``adoptGroup: true`` and ``replicas: 0`` removed another
    team's plain consumers 314 times in 43 s, and its deletion deleted their group and committed offsets."""
    start_operator()
    group = group_name("theirs")
    team = team_a(group, ["orders-0", "orders-1"])
    before = team.offsets()
    hostile = fleet_body("orders", 0, group, deleteGroupOnDelete=True)
    hostile["spec"]["coordinator"]["adoptGroup"] = True
    kube.apply(hostile, namespace=namespace)
    condition_ = refused(kube, namespace, "orders")
    assert condition_["reason"] == "GroupInUse", condition_
    assert "spec.coordinator.adoptGroup is deprecated and grants nothing" in condition_["message"]
    time.sleep(WATCH_S)
    delete_fleet(kube, namespace, "orders")
    lost = before - team.offsets()
    print(f"\nadoptGroup in a spec: {team.removals()} removals, {lost} of {before} partitions' offsets lost")
    assert team.removals() == 0 and before == 6 and lost == 0
    assert team.members() == {"orders-0", "orders-1"} and team.owner() is None


def test_adoption_the_administrator_granted_still_removes_no_foreign_member_nor_deletes_their_group(
    kube: Kube, namespace: str, start_operator: StartOperator, team_a: Callable[..., TeamA]
) -> None:
    group = group_name("adoptable")
    start_operator("--adopt-groups", f"{namespace}=adoptable-*")
    team = team_a(group, ["orders-0", "orders-1"])
    before = team.offsets()
    kube.apply(fleet_body("orders", 0, group, deleteGroupOnDelete=True), namespace=namespace)
    claimed = wait_until(lambda: messages(kube, namespace, "orders", "GroupClaimed"), "the adoption")
    assert "(adopted: it was in use)" in claimed[0]
    assert (team.owner() or {}).get("namespace") == namespace
    warned = wait_until(lambda: messages(kube, namespace, "orders", "ForeignMembers"), "the ForeignMembers Warning")
    assert "2 members this fleet did not create (orders-0, orders-1)" in warned[0]
    time.sleep(WATCH_S)
    delete_fleet(kube, namespace, "orders")
    lost = before - team.offsets()
    print(f"\nadopted by policy: {team.removals()} removals, {lost} of {before} partitions' offsets lost")
    assert team.removals() == 0 and lost == 0 and team.members() == {"orders-0", "orders-1"}
    assert team.owner() is None  # released with the fleet
    finalized = messages(kube, namespace, "orders", "Finalized")
    assert finalized and "it has members this fleet did not create" in finalized[0]


def test_a_squatter_created_first_removes_none_of_the_consumers_that_come_later(
    kube: Kube, namespace: str, start_operator: StartOperator, team_a: Callable[..., TeamA]
) -> None:
    """Issue 22, point 4: a fleet created first claims the (vacant) name, and then removed the real team's consumers
    (243 removals in ~40 s)."""
    start_operator()
    group = group_name("squatted")
    kube.apply(fleet_body("orders", 0, group, deleteGroupOnDelete=True), namespace=namespace)
    wait_until(lambda: messages(kube, namespace, "orders", "GroupClaimed"), "the squatter's claim")
    team = team_a(group, ["orders-0", "orders-1", "orders-7"], offsets=False)
    wait_until(
        lambda: (kube.get("cf", "orders", namespace=namespace) or {}).get("status", {}).get("foreignMembers"), ""
    )
    time.sleep(WATCH_S)
    delete_fleet(kube, namespace, "orders")
    print(f"\nsquatter: {team.removals()} removals")
    assert team.removals() == 0 and team.members() == {"orders-0", "orders-1", "orders-7"}
    assert team.owner() is None


def test_claims_are_released_whatever_the_fleets_state_and_a_claim_whose_fleet_is_gone_is_reclaimed(
    kube: Kube,
    namespace: str,
    kubelet: FakeKubelet,
    start_operator: StartOperator,
    coordinator_for_operator: CoordinatorProcess,
) -> None:
    """Issue 22, point 4: a fleet refused after its claim kept it when deleted (and its re-creation was refused as
    owned by itself); a groupId edit left the old group owned forever; a claim nobody released stayed forever."""
    operator = start_operator()
    group = group_name("claims")
    describe = Group(coordinator_for_operator, group)

    # Refused after its claim (a session timeout below the coordinator's minimum): deleting it releases the claim.
    broken = fleet_body("orders", 1, group, sessionTimeout={"policy": "Fixed", "fixedMs": 1_000})
    kube.apply(broken, namespace=namespace)
    assert refused(kube, namespace, "orders")["reason"] == "InvalidSessionTimeout"
    assert (describe.owner() or {}).get("name") == "orders"
    delete_fleet(kube, namespace, "orders")
    assert describe.owner() is None

    # Re-created under the same name: its own, not refused as "owned by itself".
    fixed = {"sessionTimeout": {"policy": "Fixed", "fixedMs": 6_000}}
    kube.apply(fleet_body("orders", 1, group, **fixed), namespace=namespace)
    wait_until(lambda: condition(kube, namespace, "orders", "Ready").get("status") == "True", "Ready", timeout_s=90)
    uid = kube.get("cf", "orders", namespace=namespace)["metadata"]["uid"]
    assert (describe.owner() or {}).get("uid") == uid

    # groupId edited: the new group is claimed, the old one released once the fleet's member left it (expired).
    edited = group_name("claims-edited")
    kube.apply(fleet_body("orders", 1, edited, **fixed), namespace=namespace)
    wait_until(lambda: describe.owner() is None, "the old group released", timeout_s=90)
    owned = kube.get("cf", "orders", namespace=namespace)["status"]["ownedGroups"]
    assert [g["groupId"] for g in owned] == [edited]

    # A fleet whose finalizer an administrator removed by hand (its operator down) leaves its claim behind; once its
    # member expired, the next fleet on the group finds the owner gone from the API server and reclaims it.
    operator.stop()
    kube.kubectl("delete", "cf", "orders", "-n", namespace, "--wait=false")
    kube.kubectl(
        "patch", "cf", "orders", "-n", namespace, "--type=json", "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )  # fmt: skip
    wait_until(lambda: kube.get("cf", "orders", namespace=namespace) is None, "the fleet gone without its finalizer")
    start_operator()
    describe.group = edited
    assert (describe.owner() or {}).get("uid") == uid
    kube.apply(fleet_body("successor", 0, edited), namespace=namespace)
    reclaimed = wait_until(
        lambda: messages(kube, namespace, "successor", "GroupReclaimed"), "the reclaim", timeout_s=90
    )
    assert uid in reclaimed[0] and "no longer exists" in reclaimed[0]
    assert (describe.owner() or {}).get("name") == "successor"


def test_fleets_beyond_the_operators_bound_and_fleets_whose_volume_claims_would_collide_are_refused(
    kube: Kube, namespace: str, start_operator: StartOperator
) -> None:
    """Issue 22, point 9: fleets per operator bounded with a clear refusal; claim names of two fleets in one
    namespace could collide (fleet a-b's template data and fleet b's template data-a both make data-a-b-0)."""
    start_operator("--max-fleets", "2")
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    first = fleet_body(
        "a-b", 0, group_name("bound"), volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": claim}]
    )
    kube.apply(first, namespace=namespace)
    wait_until(lambda: kube.get("statefulset", "a-b", namespace=namespace), "fleet a-b's StatefulSet")
    second = fleet_body(
        "b", 0, group_name("bound"), volumeClaimTemplates=[{"metadata": {"name": "data-a"}, "spec": claim}]
    )
    kube.apply(second, namespace=namespace)
    collision = refused(kube, namespace, "b")
    assert collision["reason"] == "VolumeClaimNameTaken", collision
    assert f"as fleet {namespace}/a-b's are" in collision["message"]
    assert kube.get("statefulset", "b", namespace=namespace) is None

    kube.apply(fleet_body("c", 0, group_name("bound")), namespace=namespace)
    too_many = refused(kube, namespace, "c")
    assert too_many["reason"] == "TooManyFleets", too_many
    assert "at most 2 fleets (--max-fleets)" in too_many["message"]
    assert wait_until(lambda: messages(kube, namespace, "c", "TooManyFleets"), "the Warning Event")
    assert kube.get("statefulset", "c", namespace=namespace) is None
    delete_fleet(kube, namespace, "b")  # one fewer: c is served
    wait_until(lambda: kube.get("statefulset", "c", namespace=namespace), "fleet c served", timeout_s=60)
