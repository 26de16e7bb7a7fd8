"""Papercuts users met, each fixed, on the real operator and control plane (issue 23): a scale-down held up by an
unhealthy pod says so instead of "waiting for pod ... to terminate"; a fleet whose token Secret is missing names it;
``-l berth.dev/fleet=NAME`` lists the fleet with its objects."""

from __future__ import annotations

import json

import pytest
from support.fleet_stage import MEMBER_TOKEN, Stage, admin_leaves, fleet_body
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]


def set_ready(stage: Stage, pod: str, ready: bool) -> None:
    """What a failing readiness probe does to a pod (the fake kubelet reports Ready once, at start)."""
    condition = {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    patch = {"status": {"conditions": [condition]}}
    stage.kubectl("patch", "pod", pod, "--subresource=status", "--type=strategic", "-p", json.dumps(patch))


def test_a_scale_down_held_up_by_an_unhealthy_pod_names_it(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 3, stage.group))
    stage.ready_and_stable(3)
    set_ready(stage, "orders-0", False)
    wait_until(lambda: stage.status().get("ready") == "2/3", "orders-0 seen not Ready")

    stage.kubectl("scale", "cf/orders", "--replicas=2")

    # OrderedReady: the StatefulSet controller deletes no pod while orders-0 is not Ready; nothing terminates.
    message = (
        "the StatefulSet deletes no pod while orders-0 is not Ready (podManagementPolicy OrderedReady): orders-2"
        " leaves the group once deleted"
    )
    wait_until(lambda: message in stage.messages("Waiting"), "the Waiting Event naming orders-0")
    assert not stage.terminating("orders-2") and stage.status()["departing"] == ["orders-2"]
    assert not any("to terminate" in m for m in stage.messages("Waiting"))

    set_ready(stage, "orders-0", True)  # healthy again: the controller goes on, and orders-2 leaves
    wait_until(lambda: stage.status().get("departing") == [], "orders-2 left", timeout_s=60)
    assert admin_leaves(stage.journal()) == [["orders-2"]]


def test_a_missing_token_secret_is_named_and_the_pods_start_once_it_exists(stage: Stage) -> None:
    body = fleet_body("orders", 2, stage.group)
    body["spec"]["coordinator"]["tokenSecretRef"] = {"name": "orders-token", "key": "token"}
    stage.apply(body)

    ready = wait_until(
        lambda: (c := stage.condition("Ready")).get("reason") == "TokenSecretMissing" and c, "TokenSecretMissing"
    )
    assert ready["status"] == "False"
    assert ready["message"] == (
        f"Secret {stage.namespace}/orders-token (spec.coordinator.tokenSecretRef) does not exist: the pods cannot"
        " start until it exists (they take their coordinator token from it); 0 of 2 pods are ready"
    )
    warning = wait_until(lambda: stage.events("TokenSecretMissing"), "the Warning Event")
    assert warning[0]["type"] == "Warning" and "orders-token" in warning[0]["message"]

    stage.kubectl("create", "secret", "generic", "orders-token", f"--from-literal=token={MEMBER_TOKEN}")
    stage.ready_and_stable(2)


def test_the_fleet_is_listed_by_the_label_its_objects_carry(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 1, stage.group))
    stage.ready_and_stable(1)

    def listed() -> list[str]:
        selected = stage.kubectl("get", "cf,sts,svc,pdb,pods", "-l", "berth.dev/fleet=orders", "-o", "name")
        return sorted(selected.split())

    wait_until(lambda: "consumerfleet.berth.dev/orders" in listed(), "the fleet labelled")
    assert listed() == [
        "consumerfleet.berth.dev/orders",
        "pod/orders-0",
        "poddisruptionbudget.policy/orders",
        "service/orders",
        "statefulset.apps/orders",
    ]


def test_a_paused_fleet_is_left_alone_and_resumes_when_the_annotation_goes(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 2, stage.group))
    stage.ready_and_stable(2)

    stage.kubectl("annotate", "cf/orders", "berth.dev/paused=true")
    wait_until(lambda: stage.condition("Paused").get("status") == "True", "Paused=True")
    ready = stage.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "Paused")
    wait_until(lambda: stage.events("Paused"), "the Paused Event")
    row = stage.kubectl("get", "cf", "orders", "--no-headers").split()
    assert row[-3:-1] == ["Unknown", "Paused"]  # STATUS and REASON, before AGE

    stage.kubectl("scale", "cf/orders", "--replicas=1")
    generation = stage.get("cf", "orders")["metadata"]["generation"]
    # A pass saw the new spec (the condition names its generation) and did nothing with it.
    wait_until(lambda: stage.condition("Paused").get("observedGeneration") == generation, "the spec seen")
    assert stage.get("statefulset", "orders")["spec"]["replicas"] == 2
    assert stage.members() == {"orders-0", "orders-1"} and stage.status().get("departing") == []

    stage.kubectl("annotate", "cf/orders", "berth.dev/paused-")
    last = wait_until(lambda: stage.status().get("lastScaleDown"), "the scale-down, once resumed", timeout_s=60)
    assert last["removed"] == ["orders-1"]
    assert stage.condition("Paused")["status"] == "False"
    wait_until(lambda: stage.events("Resumed"), "the Resumed Event")
    stage.ready_and_stable(1)
