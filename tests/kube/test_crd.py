"""The ConsumerFleet CRD on a real kube-apiserver: it installs both ways, the server defaults and validates fleets
as docs/architecture.md says (every OpenAPI keyword and CEL rule refusing with a message naming the field), the
status and scale subresources work, and `kubectl get cf` shows what a person needs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kube import Kube
from support.kube_cluster import REPO

pytestmark = pytest.mark.kube

CRD_FILE = REPO / "deploy" / "crds" / "consumerfleets.berth.dev.yaml"
EXAMPLES = sorted((REPO / "deploy" / "examples").glob("*.yaml"))
Obj = dict[str, Any]


def fleet(name: str = "orders", **spec: Any) -> Obj:
    """A valid ConsumerFleet with ``spec`` merged over the smallest valid spec."""
    base: Obj = {"replicas": 3, "template": {"spec": {"containers": [{"name": "consumer", "image": "berth:0.1.0"}]}}}
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {"name": name},
        "spec": {**base, **spec},
    }


#: A claim spec the API server accepts (no storage class: the cluster's default, if it has one).
CLAIM_SPEC: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def claim_template(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": CLAIM_SPEC}


def dry_run_create(kube: Kube, obj: Obj, namespace: str) -> tuple[bool, str]:
    """Create ``obj`` with ``--dry-run=server``: every admission step runs, nothing is stored."""
    result = kube.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-f", "-", input=yaml.safe_dump(obj), check=False
    )
    return result.returncode == 0, result.stderr.strip()


# --- installing the CRD -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["client-side", "server-side"])
def test_the_crd_installs_with_kubectl_apply_either_way_and_becomes_established(kube: Kube, mode: str) -> None:
    """A fresh install of the file as written (under a group of its own, so the session's CRD is untouched)."""
    group = f"{mode.split('-')[0]}.berth.dev"
    crd = yaml.safe_load(CRD_FILE.read_text().replace("berth.dev", group))
    name = crd["metadata"]["name"]
    assert name == f"consumerfleets.{group}"
    try:
        kube.apply(crd, server_side=mode == "server-side")
        kube.wait_established(name)
        conditions = {c["type"]: c["status"] for c in kube.get("crd", name)["status"]["conditions"]}
        assert conditions["NamesAccepted"] == "True"
        # Applying the same file again changes nothing.
        again = kube.kubectl(
            "apply", *(["--server-side"] if mode == "server-side" else []), "-f", "-", input=yaml.safe_dump(crd)
        ).stdout
        assert "unchanged" in again or "serverside-applied" in again
    finally:
        kube.kubectl("delete", "crd", name, "--ignore-not-found", "--wait=false")


def test_the_session_crd_is_the_file_as_written(kube: Kube) -> None:
    stored = kube.get("crd", "consumerfleets.berth.dev")
    written = yaml.safe_load(CRD_FILE.read_text())
    assert stored["spec"]["names"]["shortNames"] == ["cf"]
    assert stored["spec"]["versions"][0]["schema"] == written["spec"]["versions"][0]["schema"]


# --- defaulting --------------------------------------------------------------------------------------------------


def test_the_server_fills_in_the_designs_defaults(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(), namespace=namespace)
    spec = kube.get("cf", "orders", namespace=namespace)["spec"]
    assert spec["sessionTimeout"] == {"policy": "Auto", "minMs": 6000, "maxMs": 1800000, "safetyFactor": 1.5}
    assert (spec["rebalanceTimeoutMs"], spec["preRegister"], spec["leaveOnScaleDown"]) == (300000, True, True)
    # groupId and coordinator have no schema default: the operator falls back to the name and its own URL.
    assert "groupId" not in spec and "coordinator" not in spec
    # A disruption budget by default; the StatefulSet's own fields are left to Kubernetes' defaults.
    assert spec["podDisruptionBudget"] == {"enabled": True, "maxUnavailable": 1}
    assert not {"volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy", "updateStrategy"} & spec.keys()


def test_a_claim_templates_spec_is_kept_as_given(kube: Kube, namespace: str) -> None:
    spec = {**CLAIM_SPEC, "storageClassName": "fast", "volumeMode": "Filesystem", "futureField": {"x": 1}}
    kube.apply(fleet(volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": spec}]), namespace=namespace)
    stored = kube.get("cf", "orders", namespace=namespace)["spec"]
    assert stored["volumeClaimTemplates"] == [{"metadata": {"name": "data"}, "spec": spec}]


def test_a_partial_session_timeout_is_completed_by_the_nested_defaults(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(sessionTimeout={"policy": "Fixed", "fixedMs": 45000}), namespace=namespace)
    spec = kube.get("cf", "orders", namespace=namespace)["spec"]
    assert spec["sessionTimeout"] == {
        "policy": "Fixed",
        "fixedMs": 45000,
        "minMs": 6000,
        "maxMs": 1800000,
        "safetyFactor": 1.5,
    }


# --- validation -------------------------------------------------------------------------------------------------

#: (id, object, the field the message must name, words the message must contain)
REFUSED: list[tuple[str, Obj, str, str]] = [
    ("negative-replicas", fleet(replicas=-1), "spec.replicas", "greater than or equal to 0"),
    ("too-many-replicas", fleet(replicas=10_001), "spec.replicas", "less than or equal to 10000"),
    ("replicas-as-string", fleet(replicas="3"), "spec.replicas", "integer"),
    ("no-template", {**fleet(), "spec": {"replicas": 1}}, "spec.template", "Required value"),
    ("no-replicas", {**fleet(), "spec": {"template": fleet()["spec"]["template"]}}, "spec.replicas", "Required"),
    ("no-containers", fleet(template={"spec": {}}), "spec.template.spec.containers", "Required value"),
    (
        "empty-containers",
        fleet(template={"spec": {"containers": []}}),
        "spec.template.spec.containers",
        "at least 1 items",
    ),
    (
        "container-without-image",
        fleet(template={"spec": {"containers": [{"name": "c"}]}}),
        "spec.template.spec.containers[0].image",
        "Required value",
    ),
    ("policy", fleet(sessionTimeout={"policy": "Manual"}), "spec.sessionTimeout.policy", '"Auto", "Fixed"'),
    (
        "min-below-1s",
        fleet(sessionTimeout={"minMs": 999}),
        "spec.sessionTimeout.minMs",
        "greater than or equal to 1000",
    ),
    (
        "max-over-30min",
        fleet(sessionTimeout={"maxMs": 1800001}),
        "spec.sessionTimeout.maxMs",
        "less than or equal to 1800000",
    ),
    (
        "fixed-over-30min",
        fleet(sessionTimeout={"policy": "Fixed", "fixedMs": 3600000}),
        "spec.sessionTimeout.fixedMs",
        "less than or equal to 1800000",
    ),
    (
        "safety-below-1",
        fleet(sessionTimeout={"safetyFactor": 0.5}),
        "spec.sessionTimeout.safetyFactor",
        "greater than or equal to 1",
    ),
    ("rebalance-below-1s", fleet(rebalanceTimeoutMs=10), "spec.rebalanceTimeoutMs", "greater than or equal to 1000"),
    ("empty-group-id", fleet(groupId=""), "spec.groupId", "at least 1 chars long"),
    ("long-group-id", fleet(groupId="g" * 256), "spec.groupId", "longer than 255"),
    ("group-id-with-space", fleet(groupId="my group"), "spec.groupId", "should match"),
    ("group-id-glob", fleet(groupId="orders-*"), "spec.groupId", "should match"),
    (
        "secret-ref-without-key",
        fleet(coordinator={"tokenSecretRef": {"name": "t"}}),
        "spec.coordinator.tokenSecretRef.key",
        "Required value",
    ),
    (
        "secret-ref-bad-name",
        fleet(coordinator={"tokenSecretRef": {"name": "Bad_Name", "key": "t"}}),
        "spec.coordinator.tokenSecretRef.name",
        "should match",
    ),
    (
        "coordinator-url-scheme",
        fleet(coordinator={"url": "berth-coordinator:9094"}),
        "spec.coordinator.url",
        "should match",
    ),
    (
        "coordinator-url-path",
        fleet(coordinator={"url": "http://c.berth:9094/internal?x=1"}),
        "spec.coordinator.url",
        "should match",
    ),
    (
        "coordinator-url-userinfo",
        fleet(coordinator={"url": "http://u@c.berth:9094"}),
        "spec.coordinator.url",
        "should match",
    ),
    ("misspelt-field", fleet(sesionTimeout={"policy": "Fixed"}), "spec.sesionTimeout", "unknown field"),
    # CEL rules, each with its own message.
    (
        "min-over-max",
        fleet(sessionTimeout={"minMs": 60000, "maxMs": 30000}),
        "spec.sessionTimeout",
        "sessionTimeout.minMs must be less than or equal to sessionTimeout.maxMs",
    ),
    (
        "max-below-default-min",
        fleet(sessionTimeout={"maxMs": 5000}),
        "spec.sessionTimeout",
        "sessionTimeout.minMs must be less than or equal to sessionTimeout.maxMs",
    ),
    (
        "fixed-without-fixedMs",
        fleet(sessionTimeout={"policy": "Fixed"}),
        "spec.sessionTimeout",
        "sessionTimeout.fixedMs is required when sessionTimeout.policy is Fixed",
    ),
    (
        "auto-with-fixedMs",
        fleet(sessionTimeout={"fixedMs": 45000}),
        "spec.sessionTimeout",
        "sessionTimeout.fixedMs applies only to policy Fixed",
    ),
    (
        "kafka-and-url",
        fleet(coordinator={"url": "http://c:9094", "kafka": {"bootstrapServers": "k:9092"}}),
        "spec.coordinator",
        "coordinator.kafka is exclusive with coordinator.url, coordinator.tokenSecretRef and coordinator.adoptGroup",
    ),
    (
        "kafka-and-adopt-group",
        fleet(coordinator={"adoptGroup": True, "kafka": {}}),
        "spec.coordinator",
        "coordinator.kafka is exclusive with coordinator.url, coordinator.tokenSecretRef and coordinator.adoptGroup",
    ),
    (
        "kafka-and-token",
        fleet(coordinator={"tokenSecretRef": {"name": "t", "key": "k"}, "kafka": {}}),
        "spec.coordinator",
        "coordinator.kafka is exclusive with coordinator.url, coordinator.tokenSecretRef and coordinator.adoptGroup",
    ),
    (
        "kafka-bootstrap-with-user-info",
        fleet(coordinator={"kafka": {"bootstrapServers": "user@k:9092"}}),
        "spec.coordinator.kafka.bootstrapServers",
        "should match",
    ),
    (
        "kafka-unknown-protocol",
        fleet(coordinator={"kafka": {"securityProtocol": "TLS"}}),
        "spec.coordinator.kafka.securityProtocol",
        "Unsupported value",
    ),
    ("unknown-pod-management", fleet(podManagementPolicy="Burst"), "spec.podManagementPolicy", "Unsupported value"),
    ("name-starts-with-digit", fleet(name="1orders"), "metadata.name", "must be a DNS label"),
    ("name-too-long", fleet(name="o" * 53), "metadata.name", "at most 52 characters"),
    # Stateful fleets.
    (
        "claim-template-without-name",
        fleet(volumeClaimTemplates=[{"metadata": {}, "spec": CLAIM_SPEC}]),
        "spec.volumeClaimTemplates[0].metadata.name",
        "Required value",
    ),
    (
        "claim-template-without-spec",
        fleet(volumeClaimTemplates=[{"metadata": {"name": "data"}}]),
        "spec.volumeClaimTemplates[0].spec",
        "Required value",
    ),
    (
        "claim-template-name-not-a-label",
        fleet(volumeClaimTemplates=[claim_template("Data_1")]),
        "spec.volumeClaimTemplates[0].metadata.name",
        "should match",
    ),
    (
        "claim-templates-sharing-a-name",
        fleet(volumeClaimTemplates=[claim_template("data"), claim_template("data")]),
        "spec.volumeClaimTemplates",
        "each volume claim template needs a name of its own",
    ),
    (
        "too-many-claim-templates",
        fleet(volumeClaimTemplates=[claim_template(f"d{i}") for i in range(17)]),
        "spec.volumeClaimTemplates",
        "must have at most 16 items",
    ),
    (
        "retention-unknown",
        fleet(persistentVolumeClaimRetentionPolicy={"whenScaled": "Archive"}),
        "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
        "Unsupported value",
    ),
    ("update-strategy-unknown", fleet(updateStrategy={"type": "Recreate"}), "spec.updateStrategy.type", "Unsupported"),
    (
        "on-delete-with-rolling-update",
        fleet(updateStrategy={"type": "OnDelete", "rollingUpdate": {"partition": 1}}),
        "spec.updateStrategy",
        "updateStrategy.rollingUpdate applies only to type RollingUpdate",
    ),
    (
        "negative-partition",
        fleet(updateStrategy={"rollingUpdate": {"partition": -1}}),
        "spec.updateStrategy.rollingUpdate.partition",
        "greater than or equal to 0",
    ),
    (
        "update-max-unavailable-zero",
        fleet(updateStrategy={"rollingUpdate": {"maxUnavailable": 0}}),
        "spec.updateStrategy.rollingUpdate.maxUnavailable",
        "a count of at least 1 or a percentage",
    ),
    (
        "budget-percentage-over-100",
        fleet(podDisruptionBudget={"maxUnavailable": "150%"}),
        "spec.podDisruptionBudget.maxUnavailable",
        "a count of at least 0 or a percentage from 0% to 100%",
    ),
    (
        "budget-negative",
        fleet(podDisruptionBudget={"maxUnavailable": -1}),
        "spec.podDisruptionBudget.maxUnavailable",
        "a count of at least 0",
    ),
    ("budget-enabled-as-string", fleet(podDisruptionBudget={"enabled": "yes"}), "enabled", "boolean"),
]


@pytest.mark.parametrize(
    ("obj", "field", "words"), [(o, f, w) for _, o, f, w in REFUSED], ids=[i for i, _, _, _ in REFUSED]
)
def test_the_server_refuses_an_invalid_fleet_naming_the_field(
    kube: Kube, namespace: str, obj: Obj, field: str, words: str
) -> None:
    accepted, message = dry_run_create(kube, obj, namespace)
    assert not accepted, "accepted"
    assert field in message and words in message, message


ACCEPTED: list[tuple[str, Obj]] = [
    ("minimal", fleet()),
    (
        "stateful",
        fleet(
            volumeClaimTemplates=[claim_template("data"), claim_template("cache")],
            persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete", "whenScaled": "Retain"},
            updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2, "maxUnavailable": "50%"}},
            podDisruptionBudget={"enabled": True, "maxUnavailable": "25%"},
        ),
    ),
    ("on-delete", fleet(updateStrategy={"type": "OnDelete"}, podDisruptionBudget={"enabled": False})),
    ("budget-of-zero", fleet(podDisruptionBudget={"maxUnavailable": 0})),
    ("fixed", fleet(sessionTimeout={"policy": "Fixed", "fixedMs": 45000})),
    ("min-equals-max", fleet(sessionTimeout={"minMs": 30000, "maxMs": 30000})),
    ("name-52", fleet(name="o" * 52)),
    ("zero-replicas", fleet(replicas=0)),
    ("kafka-default-connection", fleet(coordinator={"kafka": {}})),
    (
        "kafka-sasl-ssl",
        fleet(
            coordinator={
                "kafka": {
                    "bootstrapServers": "kafka-0.kafka.data:9093,kafka-1.kafka.data:9093",
                    "securityProtocol": "SASL_SSL",
                    "saslMechanism": "SCRAM-SHA-512",
                    "credentialsSecretRef": {"name": "orders-kafka"},
                    "caSecretRef": {"name": "kafka-ca"},
                }
            },
            podManagementPolicy="Parallel",
            deleteGroupOnDelete=False,
        ),
    ),
    (
        "designs-example",
        fleet(
            groupId="orders",
            replicas=5,
            coordinator={
                "url": "http://berth-coordinator.berth:9094",
                "tokenSecretRef": {"name": "orders-token", "key": "token"},
            },
            sessionTimeout={"policy": "Auto", "minMs": 6000, "maxMs": 1800000, "safetyFactor": 1.5},
            rebalanceTimeoutMs=300000,
            preRegister=True,
            leaveOnScaleDown=True,
        ),
    ),
]


@pytest.mark.parametrize("obj", [o for _, o in ACCEPTED], ids=[i for i, _ in ACCEPTED])
def test_the_server_accepts_a_valid_fleet(kube: Kube, namespace: str, obj: Obj) -> None:
    accepted, message = dry_run_create(kube, obj, namespace)
    assert accepted, message


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_accepted_and_its_pod_template_too(kube: Kube, namespace: str, path: Path) -> None:
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    for other in documents[:-1]:  # what a fleet needs beside it (a ConfigMap with its consumer program)
        accepted, message = dry_run_create(kube, other, namespace)
        assert accepted, message
    obj = documents[-1]
    assert obj["kind"] == "ConsumerFleet", "an example ends with its fleet"
    accepted, message = dry_run_create(kube, obj, namespace)
    assert accepted, message
    # The CRD keeps the pod template and the claim templates' specs as given; the server's own PodTemplate and
    # PersistentVolumeClaim validation checks them here. Each pod gets a volume per claim template, as the
    # StatefulSet controller gives it.
    pod_template = copy.deepcopy(obj["spec"]["template"])
    for claim in obj["spec"].get("volumeClaimTemplates") or []:
        name = claim["metadata"]["name"]
        pod_template["spec"].setdefault("volumes", []).append(
            {"name": name, "persistentVolumeClaim": {"claimName": f"{name}-{obj['metadata']['name']}-0"}}
        )
        accepted, message = dry_run_create(
            kube, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}, namespace
        )
        assert accepted, message
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": pod_template}
    accepted, message = dry_run_create(kube, template, namespace)
    assert accepted, message


# --- status, scale and what a person sees -------------------------------------------------------------------------

OPERATOR_STATUS: Obj = {
    "replicas": 3,
    "readyReplicas": 2,
    "ready": "2/3",
    "groupId": "orders",
    "selector": "app.kubernetes.io/instance=orders,app.kubernetes.io/name=berth",
    "instanceIds": ["orders-0", "orders-1", "orders-2"],
    "sessionTimeoutMs": 45000,
    "sessionTimeout": "45s",
    "sessionTimeoutReason": "grace 30s + startup 0s + scheduling 5s = 35s x 1.5 = 52.5s, clamped",
    "group": {"state": "Stable", "generation": 7, "leader": None, "members": ["orders-0", "orders-1"]},
    "departing": [],
    "expectedMembers": ["orders-0", "orders-1", "orders-2"],
    "lastScaleDown": {
        "removed": ["orders-3"],
        "results": {"orders-3": "NONE"},
        "seconds": 4,
        "at": "2026-01-02T03:04:05Z",
    },
    "restarts": {
        "static": 12,
        "rebalancing": 0,
        "expired": 1,
        "rolls": 2,
        "revision": "orders-6db4cfd757",
        "ongoing": {
            "restarts": 1,
            "static": 1,
            "rebalances": 0,
            "since": "2026-01-02T03:05:00Z",
            "latest": "2026-01-02T03:05:00Z",
            "rollout": False,
        },
        "last": {
            "restarts": 3,
            "static": 3,
            "rebalances": 0,
            "cause": "rollout",
            "since": "2026-01-02T03:00:00Z",
            "until": "2026-01-02T03:00:09Z",
            "seconds": 9,
        },
    },
    "conditions": [
        {
            "type": "Ready",
            "status": "False",
            "reason": "PodsNotReady",
            "message": "2 of 3 pods are ready",
            "lastTransitionTime": "2026-01-02T03:04:05Z",
            "observedGeneration": 1,
        }
    ],
    "observedGeneration": 1,
}


def patch_status(kube: Kube, namespace: str, name: str, status: Obj) -> None:
    kube.kubectl(
        "patch",
        "cf",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def test_the_status_subresource_keeps_everything_the_operator_writes(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(), namespace=namespace)
    patch_status(kube, namespace, "orders", OPERATOR_STATUS)
    stored = kube.get("cf", "orders", namespace=namespace)
    # Nothing pruned, nothing refused; a null in a merge patch removes its key (the operator relies on that).
    expected = copy.deepcopy(OPERATOR_STATUS)
    del expected["group"]["leader"]
    assert stored["status"] == expected
    # A spec write through the main resource cannot touch status, and the reverse.
    kube.kubectl("patch", "cf", "orders", "-n", namespace, "--type=merge", "-p", '{"status": {"ready": "9/9"}}')
    assert kube.get("cf", "orders", namespace=namespace)["status"]["ready"] == "2/3"


def test_kubectl_get_shows_readiness_state_session_timeout_and_the_ready_condition(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(), fleet(name="refused", groupId="orders"), namespace=namespace)
    patch_status(kube, namespace, "orders", OPERATOR_STATUS)
    refusal = {
        "type": "Ready",
        "status": "False",
        "reason": "GroupIdInUse",
        "message": "taken",
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }
    patch_status(kube, namespace, "refused", {"conditions": [refusal]})
    wide = table(kube.kubectl("get", "cf", "-n", namespace, "-o", "wide").stdout)
    assert list(wide["orders"]) == [
        "NAME",
        "REPLICAS",
        "READY",
        "STATE",
        "GENERATION",
        "SESSION TIMEOUT",
        "LAG",
        "STATUS",
        "REASON",
        "GROUP",
        "STATIC RESTARTS",
        "AGE",
    ]
    assert list(wide["orders"].values())[:11] == [
        "orders",
        "3",
        "2/3",
        "Stable",
        "7",
        "45s",
        "",  # LAG: a Kafka fleet's
        "False",
        "PodsNotReady",
        "orders",
        "12",
    ]
    # A refused fleet says why, instead of a row of blanks.
    refused = wide["refused"]
    assert (refused["READY"], refused["STATE"], refused["STATUS"], refused["REASON"]) == (
        "",
        "",
        "False",
        "GroupIdInUse",
    )
    narrow = table(kube.kubectl("get", "cf", "-n", namespace).stdout)
    assert "GROUP" not in narrow["orders"] and "STATIC RESTARTS" not in narrow["orders"]
    assert narrow["orders"]["REASON"] == "PodsNotReady"


def table(text: str) -> dict[str, dict[str, str]]:
    """kubectl's table output by row name and column header (cells are cut at the header's start columns, so blank
    cells read as "")."""
    header, *rows = text.splitlines()
    # A column starts at the header's first character and after every run of two or more spaces.
    starts = [match.start() for match in re.finditer(r"(?:^|(?<=  ))\S", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    parsed = {}
    for row in rows:
        cells = [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        parsed[cells[0]] = dict(zip(names, cells, strict=True))
    return parsed


def test_kubectl_scale_goes_through_the_scale_subresource(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(), namespace=namespace)
    patch_status(kube, namespace, "orders", {"replicas": 3, "selector": OPERATOR_STATUS["selector"]})
    kube.kubectl("scale", "cf/orders", "-n", namespace, "--replicas=5")
    assert kube.get("cf", "orders", namespace=namespace)["spec"]["replicas"] == 5
    scale = json.loads(
        kube.kubectl(
            "get", "--raw", f"/apis/berth.dev/v1alpha1/namespaces/{namespace}/consumerfleets/orders/scale"
        ).stdout
    )
    assert scale["spec"] == {"replicas": 5}
    assert scale["status"] == {"replicas": 3, "selector": OPERATOR_STATUS["selector"]}
    # The scale subresource enforces the same schema as the resource.
    refused = kube.kubectl("scale", "cf/orders", "-n", namespace, "--replicas=-1", check=False)
    assert refused.returncode != 0


def test_a_fleet_object_is_not_changed_by_a_refused_update(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(), namespace=namespace)
    before = kube.get("cf", "orders", namespace=namespace)
    bad = copy.deepcopy(fleet(sessionTimeout={"minMs": 60000, "maxMs": 30000}))
    assert kube.try_apply(bad, namespace=namespace).returncode != 0
    after = kube.get("cf", "orders", namespace=namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_pod_management_policy_is_fixed_once_the_fleet_exists(kube: Kube, namespace: str) -> None:
    kube.apply(fleet(name="steady", podManagementPolicy="Parallel"), namespace=namespace)
    result = kube.kubectl(
        "patch",
        "cf",
        "steady",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"podManagementPolicy": "OrderedReady"}}),
        check=False,
    )
    assert result.returncode != 0
    assert "podManagementPolicy cannot change after creation" in result.stderr
