"""docs/install.md on the real node: the chart's pods run the locally built images, in-cluster, with their probes.

``helm install`` exactly as the docs say (``support.node_stage.install_release``), then what a user would check:
every Berth pod Running and Ready from ``berth:0.1.0`` as built from the Dockerfile (no registry is reachable), the
operator talking to the apiserver with its projected ServiceAccount token, the coordinator Ready through its probe
port on a PersistentVolume, and ``helm test`` passing. The transcript is printed (``-s``) for the record.
"""

from __future__ import annotations

import pytest
from support.kube import wait_until
from support.node import Node
from support.node_stage import Release

pytestmark = [pytest.mark.node]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def test_helm_install_runs_every_berth_pod_from_the_locally_built_images(
    berth_release: Release, node: Node, node_images: dict
) -> None:
    kube = berth_release.kube
    pods = kube.get("pods", namespace="berth")["items"]
    coordinator = next(p for p in pods if p["metadata"]["name"] == "berth-coordinator-0")
    operators = [p for p in pods if p["metadata"]["name"].startswith("berth-operator-")]
    assert len(operators) == 2  # the chart's default: a leader and a standby (leader election)
    lease = kube.get("lease", "berth-operator", namespace="berth")
    # The leader's identity is its pod's name and a random suffix (leader_options).
    (operator,) = [p for p in operators if lease["spec"]["holderIdentity"].startswith(p["metadata"]["name"] + "_")]
    for pod in (*operators, coordinator):
        assert pod["status"]["phase"] == "Running" and ready(pod), pod["status"]
        assert pod["spec"]["nodeName"] == node.name
        (status,) = pod["status"]["containerStatuses"]
        assert status["image"] == "docker.io/library/berth:0.1.0"
        assert status["restartCount"] == 0
    # The image the pods run is the one built here (imported into the node's containerd; nothing can be pulled).
    assert node_images["runtime"]["ref"] in node.images()

    # In-cluster config: the operator's token is a projected, bound ServiceAccount token of the chart's account.
    assert operator["spec"]["serviceAccountName"] == "berth-operator"
    projected = [v for v in operator["spec"]["volumes"] if "projected" in v]
    assert any("serviceAccountToken" in s for v in projected for s in v["projected"]["sources"]), projected
    # The leader starts Kopf once it holds the Lease: its log says so within moments of taking it.
    log = wait_until(
        lambda: (
            "Initial authentication has finished"
            in (text := kube.kubectl("-n", "berth", "logs", operator["metadata"]["name"]).stdout)
            and text
        ),
        "the leader's Kopf authenticated (its log)",
        timeout_s=120,
    )
    assert "Forbidden" not in log

    # The coordinator: probes on the probe port, its data on a volume the node provides, no Kubernetes token.
    container = coordinator["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["port"] == "probes"
    assert coordinator["spec"]["automountServiceAccountToken"] is False
    claim = kube.get("pvc", "data-berth-coordinator-0", namespace="berth")
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["volumeName"].startswith(f"{node.name}-pv-")

    print("\n" + berth_release.transcript)
    print("$ kubectl -n berth get pods -o wide\n" + berth_release.pods_wide())
    status = ".status.containerStatuses[0]"
    columns = f"NAME:.metadata.name,IMAGE:{status}.image,IMAGE_ID:{status}.imageID"
    print(f"$ kubectl -n berth get pods -o custom-columns={columns}")
    print(kube.kubectl("-n", "berth", "get", "pods", "-o", f"custom-columns={columns}").stdout)
    print("$ ctr -n k8s.io images ls -q  (the node's image store: imported from the archives built here)")
    print("\n".join(node.images()))


def test_helm_test_passes(berth_release: Release) -> None:
    result = berth_release.kube.helm("test", "berth", "-n", "berth", "--timeout", "5m")
    assert "Phase:          Succeeded" in result.stdout, result.stdout
