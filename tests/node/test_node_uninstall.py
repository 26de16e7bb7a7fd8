"""``helm uninstall`` as docs/install.md says: the coordinator's volume and the tokens Secret stay, so the reinstall
finds its groups and tokens again, and the fleet's members (still running) rejoin without a rebalance. The release
is installed again at the end, as the session's other tests expect it."""

from __future__ import annotations

import pytest
from support.kube import wait_until
from support.node_stage import CHART, GROUP_TOKEN, FleetStage

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]


def test_helm_uninstall_keeps_the_volume_and_tokens_and_a_reinstall_finds_every_group(stage: FleetStage) -> None:
    release, kube = stage.release, stage.release.kube
    stage.apply_example(3)
    stage.ready_and_stable(3)
    groups, admin_token = release.groups(), release.admin_token
    volume = kube.get("pvc", "data-berth-coordinator-0", namespace="berth")["spec"]["volumeName"]
    stage.mark("uninstall")

    kube.helm("uninstall", "berth", "-n", "berth", "--wait", "--timeout", "5m")
    wait_until(
        lambda: not kube.get("pods", namespace="berth", selector="app.kubernetes.io/instance=berth")["items"],
        "the release's pods gone",
        timeout_s=180,
    )
    assert kube.get("pvc", "data-berth-coordinator-0", namespace="berth")["spec"]["volumeName"] == volume
    assert release.secret_value("admin-token") == admin_token

    # The reinstall, with the same group token (the kept Secret is read back, so every token stays the same).
    kube.helm(
        "install", "berth", str(CHART), "--namespace", "berth",
        "--set", f"auth.groupTokens[0].name={GROUP_TOKEN}", "--set", "auth.groupTokens[0].groups={orders,orders-*}",
    )  # fmt: skip
    release.rollout()
    assert release.admin_token == admin_token
    assert kube.get("pvc", "data-berth-coordinator-0", namespace="berth")["spec"]["volumeName"] == volume
    assert release.groups() == groups
    stage.ready_and_stable(3)
    assert stage.rebalances_since("uninstall") == []
