"""Uninstalling the chart with fleets, on a real API server (docs/install.md, "Uninstall"): in the documented order
(fleets first, while the operator runs) nothing is left and the groups are gone; with fleets left behind they cannot
be deleted (the issue's papercut) until the documented commands release them, and their objects go with them.

Each test installs a namespaced release of its own and runs the real operator as that release's ServiceAccount; the
fake kubelet runs only the fleets' pods (the release's own stay Pending, as there is no image to run)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess, coordinator_get, coordinator_post
from support.fake_kubelet import FakeKubelet, run_member
from support.fleet_stage import ADMIN_TOKEN, MEMBER_TOKEN, MEMBER_TOKEN_SECRET, fleet_body, write_tokens
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "berth"
_releases = itertools.count(1)


@dataclass
class Release:
    kube: Kube
    name: str  # the release, and its namespace, where the operator serves fleets
    operator: OperatorProcess
    coordinator: CoordinatorProcess

    def install(self) -> None:
        """``helm install`` of the release (namespace scope), as the fixture made it."""
        self.kube.helm(
            "install", self.name, str(CHART), "-n", self.name, "--create-namespace", "--set", "operator.scope=namespace"
        )

    def restart_operator(self) -> None:
        """The operator of the release installed again (its ServiceAccount's token made anew)."""
        identity = self.kube.as_service_account(self.name, f"{self.name}-operator")
        self.operator = OperatorProcess(identity.kubeconfig, self.operator.log_path, self.operator.args).start()

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kube.kubectl(*args, "-n", self.name, check=check)

    def fleet(self) -> Any:
        return self.kube.get("cf", "orders", namespace=self.name)

    def ready(self) -> None:
        def is_ready() -> bool:
            conditions = ((self.fleet() or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        wait_until(is_ready, "the fleet Ready", timeout_s=90)

    def group_exists(self, group: str) -> bool:
        listed = coordinator_get(self.coordinator, "/v1/groups", ADMIN_TOKEN)["groups"]
        return group in {g["group_id"] for g in listed}


def fleet_pods_only(pod: Any, env: dict[str, str]) -> list[str] | None:
    return run_member(pod, env) if "berth.dev/fleet" in (pod.metadata.labels or {}) else None


@pytest.fixture
def release(kube: Kube, tmp_path: Path) -> Iterator[Release]:
    name = f"uninstall-{next(_releases)}"
    kube.helm("install", name, str(CHART), "-n", name, "--create-namespace", "--set", "operator.scope=namespace")
    tokens = write_tokens(tmp_path / "tokens.yaml")
    coordinator = CoordinatorProcess(
        tmp_path / "data", "--group-initial-rebalance-delay-ms", "100", "--tokens-file", str(tokens), manual_clock=False
    )
    coordinator.start()
    kube.kubectl("create", "secret", "generic", MEMBER_TOKEN_SECRET, "-n", name, f"--from-literal=token={MEMBER_TOKEN}")
    kubelet = FakeKubelet(kube.kubeconfig, name, tmp_path / "pods", program=fleet_pods_only).start()
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN)
    args = ["--namespace", name, "--coordinator-url", coordinator.url, "--token-file", str(token_file)]
    args += ["--liveness-port", "0", "--metrics-port", "0", "--reconcile-interval-s", "2"]
    identity = kube.as_service_account(name, f"{name}-operator")
    operator = OperatorProcess(identity.kubeconfig, tmp_path / "operator.log", args).start()
    release = Release(kube, name, operator, coordinator)
    try:
        yield release
    finally:
        release.operator.stop()
        kubelet.stop()
        coordinator.kill()
        kube.helm("uninstall", name, "-n", name, check=False)


def documented_commands(heading: str) -> list[str]:
    """The shell blocks of docs/install.md's section ``heading``."""
    text = (REPO / "docs" / "install.md").read_text()
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)


def run_documented(kube: Kube, command: str) -> None:
    environment = {
        **os.environ,
        "KUBECONFIG": str(kube.kubeconfig),
        "PATH": f"{Path(kube.kubectl_bin).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_in_the_documented_order_the_fleets_go_with_their_groups_and_nothing_is_left(release: Release) -> None:
    group = f"{release.name}-orders"
    release.kube.apply(fleet_body("orders", 2, group), namespace=release.name)
    release.ready()
    assert release.group_exists(group)

    first, _ = documented_commands("### Uninstall")
    delete_fleets, uninstall = first.strip().splitlines()
    assert delete_fleets.startswith("kubectl delete consumerfleets --all --all-namespaces --wait")
    # Run here for this release's namespace only (the session's other fleets are not ours to delete).
    release.kubectl("delete", "consumerfleets", "--all", "--wait", "--timeout=90s")
    assert release.fleet() is None
    assert not release.group_exists(group)  # the finalizer left and deleted the group
    assert uninstall.startswith("helm uninstall")
    release.kube.helm("uninstall", release.name, "-n", release.name)
    wait_until(lambda: release.kubectl("get", "cf,statefulsets", "-o", "name").stdout == "", "nothing left")


def test_fleets_left_behind_are_stuck_until_the_documented_commands_release_them(release: Release) -> None:
    group = f"{release.name}-orders"
    release.kube.apply(fleet_body("orders", 2, group), namespace=release.name)
    release.ready()
    release.operator.stop()  # what helm uninstall does to the operator
    release.kube.helm("uninstall", release.name, "-n", release.name)

    release.kubectl("delete", "cf", "orders", "--wait=false")
    # Stuck: nobody removes the finalizer, however long one waits.
    assert release.kubectl("wait", "--for=delete", "cf/orders", "--timeout=5s", check=False).returncode != 0
    assert release.fleet()["metadata"]["finalizers"] == ["berth.dev/finalizer"]

    _, release_them = documented_commands("### Uninstall")
    assert "finalizers" in release_them and "kubectl delete cf --all --all-namespaces" in release_them
    # The documented loop, for this namespace's fleets (the session's others are not ours to release).
    here = release_them.replace(" -A ", f" -n {release.name} ").replace("--all-namespaces", f"-n {release.name}")
    run_documented(release.kube, here)
    wait_until(lambda: release.fleet() is None, "the fleet gone")
    wait_until(lambda: release.kube.get("statefulset", "orders", namespace=release.name) is None, "its StatefulSet")
    assert release.group_exists(group)  # its group stays at the coordinator, as the docs say


def committed_offsets(release: Release, group: str) -> dict[int, int]:
    answer = coordinator_get(release.coordinator, f"/v1/groups/{group}/offsets?topic=orders", ADMIN_TOKEN)
    return {p["partition_index"]: p["committed_offset"] for t in answer["topics"] for p in t["partitions"]}


def test_a_fleet_left_behind_and_created_again_takes_its_group_back_with_its_offsets(release: Release) -> None:
    """docs/install.md, "Fleets left behind", then the fleet created again with the chart installed again: its group
    (recorded as the old fleet's, its offsets kept) was refused GroupInUse (issue 30). Now the new fleet of the same
    namespace and name takes it back, as adopted, once the old members' sessions expired: one GroupReclaimed, the
    group owned by the new uid, the offsets as they were."""
    group = f"{release.name}-orders"
    release.kube.apply(
        fleet_body("orders", 2, group, sessionTimeout={"policy": "Fixed", "fixedMs": 6000}), namespace=release.name
    )
    release.ready()
    described = coordinator_get(release.coordinator, f"/v1/groups/{group}", ADMIN_TOKEN)
    member = described["members"][0]
    commit = {
        "member_id": member["member_id"],
        "generation_id": described["generation_id"],
        "group_instance_id": member["group_instance_id"],
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": p, "committed_offset": 40 + p} for p in range(4)]}
        ],
    }
    coordinator_post(release.coordinator, f"/v1/groups/{group}/offsets", commit, ADMIN_TOKEN)
    offsets = committed_offsets(release, group)
    assert offsets == {p: 40 + p for p in range(4)}
    old_uid = release.fleet()["metadata"]["uid"]

    # Left behind at the uninstall, and released as docs/install.md says.
    release.operator.stop()
    release.kube.helm("uninstall", release.name, "-n", release.name)
    _, release_them = documented_commands("### Uninstall")
    here = release_them.replace(" -A ", f" -n {release.name} ").replace("--all-namespaces", f"-n {release.name}")
    run_documented(release.kube, here)
    wait_until(lambda: release.fleet() is None, "the fleet gone")

    # Installed again, the fleet created again (docs/install.md: "Created again").
    release.install()
    release.restart_operator()
    release.kube.apply(
        fleet_body("orders", 2, group, sessionTimeout={"policy": "Fixed", "fixedMs": 6000}), namespace=release.name
    )
    release.ready()
    new_uid = release.fleet()["metadata"]["uid"]
    assert new_uid != old_uid
    events = release.kube.events(release.name, kind="ConsumerFleet", name="orders")
    reclaimed = [e["message"] for e in events if e["reason"] == "GroupReclaimed"]
    assert len(reclaimed) == 1 and old_uid in reclaimed[0] and "an earlier fleet of this name" in reclaimed[0]
    assert [e for e in events if e["reason"] == "GroupInUse"] == []
    owner = coordinator_get(release.coordinator, f"/v1/groups/{group}", ADMIN_TOKEN).get("owner") or {}
    assert owner.get("uid") == new_uid
    assert committed_offsets(release, group) == offsets
