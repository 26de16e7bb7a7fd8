"""The coordinator as a pod: deleted, it comes back on its PersistentVolume with every group, and no rebalance."""

from __future__ import annotations

import time

import pytest
from support.kube import wait_until
from support.node_stage import FleetStage

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]


def test_a_deleted_coordinator_pod_comes_back_on_its_volume_with_every_group_and_no_rebalance(
    stage: FleetStage,
) -> None:
    release = stage.release
    stage.apply_example(3)
    stage.ready_and_stable(3)
    groups = release.groups()
    assert stage.name in groups
    stage.mark("restart")
    before = release.coordinator_pod()
    volume = release.kube.get("pvc", "data-berth-coordinator-0", namespace="berth")["spec"]["volumeName"]

    started = time.monotonic()
    release.kube.kubectl("-n", "berth", "delete", "pod", "berth-coordinator-0")
    wait_until(
        lambda: (
            (pod := release.coordinator_pod())
            and pod["metadata"]["uid"] != before["metadata"]["uid"]
            and any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])
        ),
        "the coordinator pod back and Ready",
        timeout_s=300,
    )
    back = time.monotonic() - started
    assert release.kube.get("pvc", "data-berth-coordinator-0", namespace="berth")["spec"]["volumeName"] == volume
    assert release.groups() == groups
    stage.ready_and_stable(3)
    rebalances = stage.rebalances_since("restart")
    print(
        f"\ncoordinator pod deleted: Ready again in {back:.1f} s, {len(groups)} of {len(groups)} groups back, "
        f"{len(rebalances)} rebalances"
    )
    assert rebalances == []
