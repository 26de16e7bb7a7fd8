"""Group ownership held by the coordinator (issue 12, item 2), on the real API server with a real coordinator.

Two teams' operators share one coordinator, each serving its own namespace (``--namespace``), as namespace-scoped
installs do: neither sees the other's fleets, so the one-fleet-per-group claim inside an operator cannot help. Team A
runs fleet ``orders``; team B writes a fleet ``orders`` on the same group with ``replicas: 0`` — the fleet that,
before owners were recorded, batch-left A's members on every pass and deleted A's group and offsets on deletion.
Now the coordinator records A's fleet as the group's owner, B's operator is refused there (409) and B's fleet is
refused ``GroupOwned``, naming A's fleet; nothing else is sent for it, and deleting it touches nothing of A's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.coordinator import CoordinatorProcess, coordinator_get
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import ADMIN_TOKEN, Stage, admin_leaves, fleet_body
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.slow]


def namespaced_operator(
    identity: Kube, coordinator: CoordinatorProcess, namespace: str, directory: Path
) -> OperatorProcess:
    token_file = directory / "admin-token"
    token_file.write_text(ADMIN_TOKEN)
    args = [
        "--namespace", namespace,
        "--coordinator-url", coordinator.url,
        "--token-file", str(token_file),
        "--liveness-port", "0",
        "--metrics-port", "0",
        "--reconcile-interval-s", "2",
    ]  # fmt: skip
    return OperatorProcess(identity.kubeconfig, directory / "operator.log", args).start()


@pytest.fixture
def two_teams(
    kube: Kube,
    namespace: str,
    kubelet: FakeKubelet,
    operator_identity: Kube,
    coordinator_for_operator: CoordinatorProcess,
    tmp_path: Path,
) -> Iterator[tuple[Stage, str]]:
    """Team A's namespace (with its kubelet and operator) and team B's (with its own operator), one coordinator."""
    team_b = kube.create_namespace(f"{namespace[:40]}-b")
    operators = []
    for name, served in (("a", namespace), ("b", team_b)):
        (tmp_path / name).mkdir()
        operators.append(namespaced_operator(operator_identity, coordinator_for_operator, served, tmp_path / name))
    try:
        yield Stage(kube, namespace, kubelet, coordinator_for_operator, "kube-owned-orders"), team_b
    finally:
        for operator in operators:
            operator.stop()
    for operator in operators:
        assert not operator.forbidden(), operator.log()


def test_a_fleet_in_another_namespace_cannot_act_on_a_group_another_fleet_owns(two_teams: tuple[Stage, str]) -> None:
    stage, team_b = two_teams
    stage.apply(fleet_body("orders", 2, stage.group))
    before = stage.ready_and_stable(2)
    uid = stage.kube.get("cf", "orders", namespace=stage.namespace)["metadata"]["uid"]
    assert before["owner"] == {"namespace": stage.namespace, "name": "orders", "uid": uid}
    expected_before = coordinator_get(stage.coordinator, f"/v1/groups/{stage.group}/expected-members", ADMIN_TOKEN)
    offsets_before = coordinator_get(stage.coordinator, f"/v1/groups/{stage.group}/offsets", ADMIN_TOKEN)

    hostile = fleet_body("orders", 0, stage.group)
    stage.kube.apply(hostile, namespace=team_b)

    def refused() -> dict[str, str] | None:
        status = (stage.kube.get("cf", "orders", namespace=team_b) or {}).get("status") or {}
        found = next((c for c in status.get("conditions") or [] if c["type"] == "SpecValid"), None)
        return found if found and found["status"] == "False" else None

    condition = wait_until(refused, "team B's fleet refused")
    assert condition["reason"] == "GroupOwned", condition
    assert f"belongs to fleet {stage.namespace}/orders" in condition["message"]
    warnings = wait_until(
        lambda: [
            e
            for e in stage.kube.events(team_b, kind="ConsumerFleet", name="orders")
            if e["type"] == "Warning" and e["reason"] == "GroupOwned"
        ],
        "the GroupOwned Warning Event",
    )
    assert f"fleet {stage.namespace}/orders" in warnings[0]["message"]
    assert stage.kube.get("statefulset", "orders", namespace=team_b) is None

    # Deleting team B's fleet leaves team A's group, members, generation, expected members and offsets as they were.
    stage.kube.kubectl("delete", "cf", "orders", "-n", team_b, "--wait=true", "--timeout=60s")
    after = stage.describe()
    assert after["owner"] == before["owner"]
    assert after["generation_id"] == before["generation_id"] and after["group_state"] == "Stable"
    assert stage.members() == {"orders-0", "orders-1"}
    assert admin_leaves(stage.journal()) == []
    assert [e for e in stage.journal() if e["type"] in ("group_deleted", "owner_released")] == []
    assert coordinator_get(stage.coordinator, f"/v1/groups/{stage.group}/expected-members", ADMIN_TOKEN) == (
        expected_before
    )
    assert coordinator_get(stage.coordinator, f"/v1/groups/{stage.group}/offsets", ADMIN_TOKEN) == offsets_before
