"""The stage controller (``support.stage_controller``: kwok's job, no process per pod) on the real control plane.

A real StatefulSet controller creates the pods; the stage controller binds them to simulated nodes and reports them
Running and Ready; the StatefulSet controller reads that (``readyReplicas``, and with OrderedReady it creates the next
pod only once the previous one is Ready), and a scale down's graceful deletions are confirmed gone. The size is small
here; ``python -m benchmarks operator_pods`` is where it plays ten thousand pods.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.kube import Kube, wait_until
from support.stage_controller import PodView, StageController, Step, node_for, plan

pytestmark = pytest.mark.kube

LABEL = "berth.test/stage"


def stateful_set(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name, LABEL: "yes"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "member", "image": "example.invalid/member:1"}]},
            },
        },
    }


def test_plan_takes_a_pod_from_created_to_running_and_honours_its_deletion() -> None:
    assert plan(PodView("ns", "p", None, deleting=False, running=False)) is Step.BIND
    assert plan(PodView("ns", "p", "n", deleting=False, running=False)) is Step.RUN
    assert plan(PodView("ns", "p", "n", deleting=False, running=True)) is None
    assert plan(PodView("ns", "p", "n", deleting=True, running=True)) is Step.DELETE
    assert plan(PodView("ns", "p", None, deleting=True, running=False)) is Step.DELETE
    nodes = ["a", "b", "c"]
    assert node_for("p-0", nodes) == node_for("p-0", nodes)  # stable across runs and processes
    assert len({node_for(f"p-{i}", nodes) for i in range(30)}) == 3


def test_a_stateful_sets_pods_run_ready_on_simulated_nodes_and_a_scale_down_removes_them(
    kube: Kube, namespace: str
) -> None:
    with StageController(kube.kubeconfig, f"{LABEL}=yes", nodes=3) as stage:
        kube.apply(stateful_set("web", 4), namespace=namespace)  # OrderedReady: each pod waits for the last Ready

        def all_ready() -> Any:
            found = kube.get("statefulset", "web", namespace=namespace)
            return found if found and found.get("status", {}).get("readyReplicas") == 4 else None

        wait_until(all_ready, "the StatefulSet's 4 pods Ready", timeout_s=120)
        pods = kube.get("pods", namespace=namespace, selector=f"{LABEL}=yes")["items"]
        assert sorted(p["metadata"]["name"] for p in pods) == [f"web-{i}" for i in range(4)]
        for pod in pods:
            status = pod["status"]
            assert status["phase"] == "Running" and status["podIP"]
            assert {c["type"]: c["status"] for c in status["conditions"]} == dict.fromkeys(
                ("PodScheduled", "Initialized", "ContainersReady", "Ready"), "True"
            )
            assert [(c["name"], c["ready"], "running" in c["state"]) for c in status["containerStatuses"]] == [
                ("member", True, True)
            ]
            assert pod["spec"]["nodeName"].startswith("stage-node-")
        kube.kubectl("scale", "statefulset/web", "--replicas=2", "-n", namespace)

        def scaled_down() -> list[str] | None:
            names = sorted(
                p["metadata"]["name"] for p in kube.get("pods", namespace=namespace, selector=f"{LABEL}=yes")["items"]
            )
            return names if names == ["web-0", "web-1"] else None

        wait_until(scaled_down, "web-2 and web-3 gone", timeout_s=120)
        assert stage.error is None
        assert stage.steps[Step.BIND] == 4 and stage.steps[Step.DELETE] >= 2
