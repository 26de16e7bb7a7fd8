"""Stateful fleets on the real operator and control plane: per-pod volumes through scale-downs and scale-ups, their
retention either way, the fleet's PodDisruptionBudget, and claim templates that cannot change.

The StatefulSet controller of a real kube-controller-manager makes the claims (PersistentVolumeClaim objects stay
Pending: there is no provisioner, and the fake kubelet runs the pods regardless); its garbage collector and the
disruption controller do the rest, as in a cluster.
"""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes
import pytest
from support.fake_kubelet import api_client
from support.fleet_stage import Stage, admin_leaves, fleet_body
from support.kube import wait_until

from berth.operator.planners.statefulset import pod_labels

pytestmark = [pytest.mark.kube, pytest.mark.slow]

Obj = dict[str, Any]
CLAIM: Obj = {
    "metadata": {"name": "data"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}


def claims(stage: Stage) -> dict[str, Obj]:
    """The namespace's PersistentVolumeClaims by name."""
    return {claim["metadata"]["name"]: claim for claim in stage.kube.get("pvc", namespace=stage.namespace)["items"]}


def patch_fleet(stage: Stage, spec: Obj) -> None:
    stage.kubectl("patch", "cf", "orders", "--type=merge", "-p", json.dumps({"spec": spec}))


def claim_of(pod: Obj) -> str:
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "data"]
    return str(volume["persistentVolumeClaim"]["claimName"])


RETAINED = ["data-orders-3", "data-orders-4"]


def claims_named(message: str) -> list[str]:
    """The claims a ClaimsRetained message names (``kept volume claim(s) A, B of departed ...``)."""
    listed = message.removeprefix("kept volume claims ").removeprefix("kept volume claim ").split(" of departed")[0]
    return listed.split(", ")


def named_claims(messages: list[str]) -> list[str]:
    return sorted({claim for message in messages for claim in claims_named(message)})


def kept_one(ordinal: int) -> str:
    return (
        f"kept volume claim data-orders-{ordinal} of departed pod orders-{ordinal}"
        " (persistentVolumeClaimRetentionPolicy.whenScaled: Retain): a pod that comes back gets its claim again;"
        f" `kubectl delete pvc data-orders-{ordinal}` frees the storage"
    )


def test_a_fleet_with_per_pod_volumes_scales_3_5_3_and_keeps_the_departed_pods_claims_for_their_return(
    stage: Stage,
) -> None:
    stage.apply(fleet_body("orders", 3, stage.group, volumeClaimTemplates=[CLAIM]))
    stage.ready_and_stable(3)
    statefulset = stage.get("statefulset", "orders")["spec"]
    assert [t["metadata"]["name"] for t in statefulset["volumeClaimTemplates"]] == ["data"]
    assert statefulset["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    found = claims(stage)
    assert set(found) == {"data-orders-0", "data-orders-1", "data-orders-2"}
    # The StatefulSet controller gives the claims the fleet's selector (the operator lists them by it).
    assert all(pod_labels("orders").items() <= c["metadata"]["labels"].items() for c in found.values())
    assert claim_of(stage.get("pod", "orders-1")) == "data-orders-1"

    stage.kubectl("scale", "cf/orders", "--replicas=5")
    stage.ready_and_stable(5)
    uids = {name: claim["metadata"]["uid"] for name, claim in claims(stage).items()}
    assert set(uids) == {f"data-orders-{i}" for i in range(5)}
    assert stage.status()["retainedClaims"] == []

    stage.kubectl("scale", "cf/orders", "--replicas=3")
    last = wait_until(lambda: stage.status().get("lastScaleDown"), "the batch leave", timeout_s=60)
    assert last["removed"] == ["orders-3", "orders-4"]
    assert admin_leaves(stage.journal()) == [["orders-3", "orders-4"]]
    # whenScaled: Retain (the default): the departed pods' claims stay, named in status and in one Event.
    wait_until(lambda: stage.status().get("retainedClaims") == ["data-orders-3", "data-orders-4"], "retainedClaims")
    kept = claims(stage)
    assert {name: claim["metadata"]["uid"] for name, claim in kept.items()} == uids
    assert not any(claim["metadata"].get("deletionTimestamp") for claim in kept.values())
    # Each claim is named once, when it is first left behind: in one Event when both pods were gone by the same
    # pass, in one each when they went a pass apart (the product promises no more than that).
    retained_messages = wait_until(
        lambda: (found := stage.messages("ClaimsRetained")) and named_claims(found) == RETAINED and found,
        "ClaimsRetained naming both claims",
    )
    assert sorted(claim for m in retained_messages for claim in claims_named(m)) == RETAINED
    assert retained_messages in (
        [
            "kept volume claims data-orders-3, data-orders-4 of departed pods orders-3, orders-4"
            " (persistentVolumeClaimRetentionPolicy.whenScaled: Retain): a pod that comes back gets its claims"
            " again; `kubectl delete pvc data-orders-3 data-orders-4` frees the storage"
        ],
        [kept_one(3), kept_one(4)],
        [kept_one(4), kept_one(3)],
    ), retained_messages
    stage.ready_and_stable(3)

    # A pod that comes back finds its own claim (the same object, with whatever state it holds).
    stage.kubectl("scale", "cf/orders", "--replicas=4")
    stage.ready_and_stable(4)
    assert claim_of(stage.get("pod", "orders-3")) == "data-orders-3"
    assert claims(stage)["data-orders-3"]["metadata"]["uid"] == uids["data-orders-3"]
    wait_until(lambda: stage.status().get("retainedClaims") == ["data-orders-4"], "data-orders-4 still retained")
    assert len(stage.messages("ClaimsRetained")) == len(retained_messages)  # nothing new to say


def test_with_when_scaled_delete_a_claim_goes_only_once_its_pod_is_gone_and_the_leave_follows(stage: Stage) -> None:
    retention = {"whenScaled": "Delete"}
    stage.apply(
        fleet_body(
            "orders", 2, stage.group, volumeClaimTemplates=[CLAIM], persistentVolumeClaimRetentionPolicy=retention
        )
    )
    stage.ready_and_stable(2)
    stage.kubelet.hold("orders-1")
    stage.kubectl("scale", "cf/orders", "--replicas=1")
    wait_until(lambda: stage.terminating("orders-1"), "orders-1 Terminating")
    # The StatefulSet controller made the departing pod the claim's owner: it goes with the pod, and not before.
    owners = wait_until(
        lambda: [
            o for o in claims(stage)["data-orders-1"]["metadata"].get("ownerReferences") or [] if o["kind"] == "Pod"
        ],
        "the pod owning its claim",
    )
    assert [owner["name"] for owner in owners] == ["orders-1"]
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # the pod still exists (Terminating): its claim stays whole
        assert not claims(stage)["data-orders-1"]["metadata"].get("deletionTimestamp")
        assert admin_leaves(stage.journal()) == []
        time.sleep(0.3)

    stage.kubelet.release()
    last = wait_until(lambda: stage.status().get("lastScaleDown"), "the batch leave", timeout_s=60)
    assert last["removed"] == ["orders-1"]
    wait_until(lambda: "data-orders-1" not in claims(stage), "the claim collected with its pod")
    assert set(claims(stage)) == {"data-orders-0"}
    assert stage.status()["retainedClaims"] == []
    assert stage.messages("ClaimsRetained") == []


def test_the_fleets_disruption_budget_follows_its_spec_and_claim_templates_cannot_change(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 2, stage.group, volumeClaimTemplates=[CLAIM]))
    stage.ready_and_stable(2)
    fleet = stage.get("cf", "orders")
    budget = stage.get("pdb", "orders")
    (owner,) = budget["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("ConsumerFleet", fleet["metadata"]["uid"], True)
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": pod_labels("orders")},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    # The disruption controller finds the fleet's two pods through it: one may go at a time.
    wait_until(
        lambda: (
            (s := stage.get("pdb", "orders").get("status") or {}).get("expectedPods") == 2
            and s.get("disruptionsAllowed") == 1
        ),
        "the budget counting the fleet's pods",
    )

    # The spec's changes reach the budget and the StatefulSet's mutable fields.
    patch_fleet(
        stage,
        {
            "podDisruptionBudget": {"maxUnavailable": 0},
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"},
        },
    )
    wait_until(lambda: stage.get("pdb", "orders")["spec"]["maxUnavailable"] == 0, "maxUnavailable 0")
    wait_until(lambda: (stage.get("pdb", "orders").get("status") or {}).get("disruptionsAllowed") == 0, "no room")
    statefulset = wait_until(
        lambda: (s := stage.get("statefulset", "orders")["spec"])["updateStrategy"] == {"type": "OnDelete"} and s,
        "updateStrategy OnDelete",
    )
    assert statefulset["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Delete"}
    # An eviction (what a node drain sends) is refused while the budget has no room.
    client = api_client(stage.kube.kubeconfig)
    try:
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "orders-0"}}
        with pytest.raises(kubernetes.client.ApiException) as refused:
            kubernetes.client.CoreV1Api(client).create_namespaced_pod_eviction("orders-0", stage.namespace, eviction)
        assert refused.value.status == 429, refused.value
    finally:
        client.close()

    # Claim templates are fixed once the StatefulSet exists: a change is refused with a condition, nothing changes.
    bigger = {**CLAIM, "spec": {**CLAIM["spec"], "resources": {"requests": {"storage": "2Gi"}}}}
    patch_fleet(stage, {"volumeClaimTemplates": [bigger]})
    refused_condition = wait_until(
        lambda: (c := stage.condition("SpecValid")).get("status") == "False" and c, "SpecValid=False"
    )
    assert refused_condition["reason"] == "TemplateRejected"
    assert refused_condition["message"].startswith(
        "spec.volumeClaimTemplates cannot change once the fleet's StatefulSet"
    )
    assert stage.events("TemplateRejected")[0]["type"] == "Warning"
    assert stage.get("statefulset", "orders")["spec"]["volumeClaimTemplates"][0]["spec"]["resources"] == {
        "requests": {"storage": "1Gi"}
    }
    patch_fleet(stage, {"volumeClaimTemplates": [CLAIM]})
    wait_until(lambda: stage.condition("SpecValid").get("status") == "True", "SpecValid=True again")
    assert stage.messages("Accepted")

    # Turned off: the budget the operator made is deleted.
    patch_fleet(stage, {"podDisruptionBudget": {"enabled": False}})
    wait_until(lambda: stage.get("pdb", "orders") is None, "the budget deleted")
    assert "deleted PodDisruptionBudget orders: spec.podDisruptionBudget.enabled is false" in stage.messages("Deleted")
    stage.ready_and_stable(2)


def test_a_claim_template_the_api_server_refuses_can_be_corrected_before_the_statefulset_exists(stage: Stage) -> None:
    """The CRD keeps a claim's spec as given, and Kubernetes checks a StatefulSet's claim templates only when its
    controller makes the claims; the operator has the API server check one claim of each template (a dry run) before
    it creates the StatefulSet. Refused, the fleet has no StatefulSet, so its templates may still change (a CEL rule
    on the fleet could not allow that)."""
    no_size = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    stage.apply(fleet_body("orders", 1, stage.group, volumeClaimTemplates=[no_size]))
    refused = wait_until(lambda: (c := stage.condition("SpecValid")).get("status") == "False" and c, "refused")
    assert refused["reason"] == "TemplateRejected"
    message = refused["message"]
    assert message.startswith("spec.volumeClaimTemplates[0]: the API server refuses its claims:"), message
    assert "spec.resources[storage]: Required value" in message, message
    assert stage.get("statefulset", "orders") is None
    patch_fleet(stage, {"volumeClaimTemplates": [CLAIM]})
    stage.ready_and_stable(1)
    assert set(claims(stage)) == {"data-orders-0"}
