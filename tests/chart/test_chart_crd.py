"""The ConsumerFleet CRD: the names DESIGN.md pins, a structural schema the API server accepts, its defaults and
validation (OpenAPI and CEL), and the examples in deploy/examples/ checked against it."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import (
    CEL_TWINS,
    CHART,
    CRD_FILE,
    Obj,
    apply_defaults,
    cel_rules,
    cel_violations,
    crd,
    crd_json_schema_errors,
    crd_version,
    example_files,
    k8s_errors,
    openapi_schema,
    restricted_violations,
)

pytestmark = pytest.mark.tools

DEPLOY_CRDS = CRD_FILE.parent


def fleet(**spec: Any) -> Obj:
    """A valid ConsumerFleet with ``spec`` merged over the smallest valid spec."""
    base: Obj = {"replicas": 3, "template": {"spec": {"containers": [{"name": "consumer", "image": "berth:0.1.0"}]}}}
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {"name": "orders"},
        "spec": {**base, **spec},
    }


# --- the one canonical copy -----------------------------------------------------------------------------------


def test_chart_crds_are_byte_identical_to_deploy_crds() -> None:
    canonical = {p.name: p.read_bytes() for p in DEPLOY_CRDS.glob("*.yaml")}
    shipped = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert canonical.keys() == shipped.keys(), "charts/berth/crds/ and deploy/crds/ hold different files"
    drifted = [name for name in canonical if canonical[name] != shipped[name]]
    assert not drifted, f"{drifted} differ: run `.venv/bin/python deploy/render.py` to copy deploy/crds/ into the chart"


# --- names pinned by DESIGN.md ---------------------------------------------------------------------------------


def test_names_scope_and_version_are_as_designed() -> None:
    spec = crd()["spec"]
    assert crd()["metadata"]["name"] == "consumerfleets.berth.dev"
    assert spec["group"] == "berth.dev" and spec["scope"] == "Namespaced"
    names = spec["names"]
    assert (names["plural"], names["singular"], names["kind"], names["shortNames"]) == (
        "consumerfleets",
        "consumerfleet",
        "ConsumerFleet",
        ["cf"],
    )
    assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [("v1alpha1", True, True)]


def test_status_and_scale_subresources_drive_kubectl_scale_and_hpa() -> None:
    assert crd_version()["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    # The scale subresource reads these as an int32 and a string.
    status = openapi_schema()["properties"]["status"]["properties"]
    assert status["replicas"]["type"] == "integer" and status["selector"]["type"] == "string"


def test_printer_columns_are_as_designed() -> None:
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in crd_version()["additionalPrinterColumns"]]
    assert columns == [
        ("Replicas", "integer", ".spec.replicas"),
        ("Ready", "integer", ".status.readyReplicas"),
        ("State", "string", ".status.group.state"),
        ("Generation", "integer", ".status.group.generation"),
        ("Session timeout", "integer", ".status.sessionTimeoutMs"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]


# --- the API server would accept the CRD ------------------------------------------------------------------------


def test_crd_passes_the_kubernetes_openapi_schema() -> None:
    assert k8s_errors(crd()) == []


def schema_nodes(node: Obj, path: str = "") -> Iterator[tuple[str, Obj]]:
    yield path or "<root>", node
    for name, child in (node.get("properties") or {}).items():
        yield from schema_nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from schema_nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_nodes(node["additionalProperties"], f"{path}{{}}")


def test_schema_is_structural() -> None:
    """The API server's structural-schema rules: every node has a type (preserve-unknown nodes may omit it), no
    anyOf/oneOf/allOf carries types, properties and additionalProperties never meet, and the root metadata is not
    restricted beyond name and generateName."""
    problems = []
    for path, node in schema_nodes(openapi_schema()):
        if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            problems.append(f"{path}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties with additionalProperties")
        if any(key in node for key in ("anyOf", "oneOf", "allOf", "not")):
            problems.append(f"{path}: logical junctors (keep validation in CEL or plain keywords)")
        if node.get("type") == "array" and "items" not in node:
            problems.append(f"{path}: array without items")
    assert openapi_schema()["properties"]["metadata"] == {"type": "object"}
    assert not problems, problems


def test_defaults_are_valid_under_their_own_schema() -> None:
    """The API server rejects a CRD whose default would fail its own validation (or be pruned)."""
    import jsonschema  # type: ignore[import-untyped]  # types-jsonschema is not a dev dependency
    from chart_helpers import to_json_schema

    for path, node in schema_nodes(openapi_schema()):
        if "default" in node:
            schema = to_json_schema({**node, "properties": node.get("properties", {})}, root=False)
            defaulted = apply_defaults(node, copy.deepcopy(node["default"]))
            errors = list(jsonschema.Draft7Validator(schema).iter_errors(defaulted))
            assert not errors, f"{path}: {[e.message for e in errors]}"


def test_only_replicas_and_template_are_required_and_defaults_are_designs() -> None:
    spec = apply_defaults(openapi_schema(), fleet())["spec"]
    assert openapi_schema()["properties"]["spec"]["required"] == ["replicas", "template"]
    assert spec["sessionTimeout"] == {"policy": "Auto", "minMs": 6000, "maxMs": 1800000, "safetyFactor": 1.5}
    assert (spec["rebalanceTimeoutMs"], spec["preRegister"], spec["leaveOnScaleDown"]) == (300000, True, True)
    # groupId and coordinator have no schema default: the operator falls back to the name and its own URL.
    assert "groupId" not in spec and "coordinator" not in spec


def test_partial_session_timeout_is_completed_by_defaults() -> None:
    spec = apply_defaults(openapi_schema(), fleet(sessionTimeout={"policy": "Fixed", "fixedMs": 45000}))["spec"]
    assert spec["sessionTimeout"] == {
        "policy": "Fixed",
        "fixedMs": 45000,
        "minMs": 6000,
        "maxMs": 1800000,
        "safetyFactor": 1.5,
    }


# --- validation: OpenAPI keywords -------------------------------------------------------------------------------

REJECTED_BY_SCHEMA: list[tuple[str, Obj, str]] = [
    ("negative-replicas", fleet(replicas=-1), "spec.replicas: -1 is less than the minimum of 0"),
    ("no-template", {**fleet(), "spec": {"replicas": 1}}, "'template' is a required property"),
    (
        "no-replicas",
        {**fleet(), "spec": {"template": fleet()["spec"]["template"]}},
        "'replicas' is a required property",
    ),
    ("no-containers", fleet(template={"spec": {}}), "'containers' is a required property"),
    (
        "container-without-image",
        fleet(template={"spec": {"containers": [{"name": "c"}]}}),
        "'image' is a required property",
    ),
    ("policy", fleet(sessionTimeout={"policy": "Manual"}), "'Manual' is not one of ['Auto', 'Fixed']"),
    ("min-below-1s", fleet(sessionTimeout={"minMs": 999}), "999 is less than the minimum of 1000"),
    ("max-over-30min", fleet(sessionTimeout={"maxMs": 1800001}), "1800001 is greater than the maximum of 1800000"),
    ("fixed-over-30min", fleet(sessionTimeout={"policy": "Fixed", "fixedMs": 3600000}), "greater than the maximum"),
    ("safety-below-1", fleet(sessionTimeout={"safetyFactor": 0.5}), "0.5 is less than the minimum of 1"),
    ("empty-group-id", fleet(groupId=""), "should be non-empty"),
    ("long-group-id", fleet(groupId="g" * 256), "is too long"),
    ("group-id-with-space", fleet(groupId="my group"), "does not match"),
    ("group-id-glob", fleet(groupId="orders-*"), "does not match"),
    ("secret-ref-without-key", fleet(coordinator={"tokenSecretRef": {"name": "t"}}), "'key' is a required property"),
    ("coordinator-url-scheme", fleet(coordinator={"url": "berth-coordinator:9094"}), "does not match"),
    ("misspelt-field", fleet(sesionTimeout={"policy": "Fixed"}), "'sesionTimeout' was unexpected"),
    ("replicas-as-string", fleet(replicas="3"), "'3' is not of type 'integer'"),
]


@pytest.mark.parametrize(
    ("obj", "message"), [(o, m) for _, o, m in REJECTED_BY_SCHEMA], ids=[i for i, _, _ in REJECTED_BY_SCHEMA]
)
def test_schema_rejects(obj: Obj, message: str) -> None:
    errors = "\n".join(crd_json_schema_errors(obj))
    assert message in errors, errors or "accepted"


def test_schema_accepts_the_designs_example() -> None:
    """DESIGN.md's resource, with a pod template."""
    obj = fleet(
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
    )
    assert crd_json_schema_errors(obj) == []
    assert cel_violations(obj) == []


def test_status_schema_accepts_what_the_operator_writes() -> None:
    """The shape operator/berth/operator/planners (status.py, scaling.py, conditions.py) write, plus Kopf's keys."""
    obj = fleet()
    obj["status"] = {
        "replicas": 3,
        "readyReplicas": 2,
        "selector": "app.kubernetes.io/instance=orders,app.kubernetes.io/name=berth",
        "instanceIds": ["orders-0", "orders-1", "orders-2"],
        "sessionTimeoutMs": 45000,
        "sessionTimeoutReason": "grace 30s + startup 0s + scheduling 5s = 35s x 1.5 = 52.5s, clamped",
        "group": {"state": "Stable", "generation": 7, "leader": None, "members": ["orders-0", "orders-1"]},
        "departing": [],
        "departingSince": None,
        "expectedMembers": ["orders-0", "orders-1", "orders-2"],
        "lastScaleDown": {
            "removed": ["orders-3", "orders-4"],
            "results": {"orders-3": "NONE", "orders-4": "UNKNOWN_MEMBER_ID"},
            "seconds": 4,
            "at": "2026-01-02T03:04:05Z",
        },
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "GroupStable",
                "message": "all 3 instances are members of the Stable group at generation 7",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
                "observedGeneration": 2,
            }
        ],
        "observedGeneration": 2,
        "kopf": {"progress": {}},
        "reconcile": {"message": "a handler's return value"},
    }
    assert crd_json_schema_errors(obj) == []


# --- validation: CEL rules ---------------------------------------------------------------------------------------

REJECTED_BY_CEL: list[tuple[str, Obj, str]] = [
    (
        "min-over-max",
        fleet(sessionTimeout={"minMs": 60000, "maxMs": 30000}),
        "sessionTimeout.minMs must be less than or equal to sessionTimeout.maxMs",
    ),
    (
        "max-below-default-min",
        fleet(sessionTimeout={"maxMs": 5000}),
        "sessionTimeout.minMs must be less than or equal to sessionTimeout.maxMs",
    ),
    (
        "fixed-without-fixedMs",
        fleet(sessionTimeout={"policy": "Fixed"}),
        "sessionTimeout.fixedMs is required when sessionTimeout.policy is Fixed",
    ),
    (
        "auto-with-fixedMs",
        fleet(sessionTimeout={"fixedMs": 45000}),
        "sessionTimeout.fixedMs applies only to policy Fixed",
    ),
    ("name-starts-with-digit", {**fleet(), "metadata": {"name": "1orders"}}, "metadata.name must be a DNS label"),
    ("name-too-long", {**fleet(), "metadata": {"name": "o" * 53}}, "metadata.name must be at most 52 characters"),
]
CEL_ACCEPTED: list[Obj] = [
    fleet(),
    fleet(sessionTimeout={"policy": "Fixed", "fixedMs": 45000}),
    fleet(sessionTimeout={"minMs": 30000, "maxMs": 30000}),
    {**fleet(), "metadata": {"name": "o" * 52}},
]


@pytest.mark.parametrize(
    ("obj", "message"), [(o, m) for _, o, m in REJECTED_BY_CEL], ids=[i for i, _, _ in REJECTED_BY_CEL]
)
def test_cel_rules_reject_with_their_message(obj: Obj, message: str) -> None:
    assert crd_json_schema_errors(obj) == [], "the OpenAPI schema alone must accept it: this case is CEL's"
    violations = cel_violations(obj)
    assert any(message in v for v in violations), violations


@pytest.mark.parametrize("obj", CEL_ACCEPTED, ids=["minimal", "fixed", "min-equals-max", "name-52"])
def test_cel_rules_accept(obj: Obj) -> None:
    assert cel_violations(obj) == []


def test_every_cel_rule_has_a_python_twin_and_a_message() -> None:
    rules = cel_rules(openapi_schema())
    assert rules, "the CRD has CEL rules"
    for path, rule, message in rules:
        assert rule in CEL_TWINS, f"{'.'.join(path)}: add a Python twin for {rule!r} to chart_helpers.CEL_TWINS"
        assert message, f"{rule!r} needs a message"


def cel_evaluator() -> Callable[[str, Any], bool]:
    celpy = pytest.importorskip(
        "celpy", reason="cel-python is not installed: CEL rules were checked through their Python twins only"
    )
    environment = celpy.Environment()
    programs: dict[str, Any] = {}

    def evaluate(rule: str, value: Any) -> bool:
        if rule not in programs:
            programs[rule] = environment.program(environment.compile(rule))
        result = programs[rule].evaluate({"self": celpy.json_to_cel(value)})
        assert isinstance(result, celpy.celtypes.BoolType), f"{rule!r} gave {result!r}"
        return bool(result)

    return evaluate


def test_real_cel_evaluation_agrees_with_the_python_twins() -> None:
    """The CEL text itself (compiled and run by cel-python) rejects and accepts exactly what the twins do."""
    evaluate = cel_evaluator()
    for _, obj, message in REJECTED_BY_CEL:
        assert any(message in v for v in cel_violations(obj, evaluate)), message
    for obj in CEL_ACCEPTED:
        assert cel_violations(obj, evaluate) == []
    for path in example_files():
        assert cel_violations(yaml.safe_load(path.read_text()), evaluate) == [], path.name


# --- the examples ---------------------------------------------------------------------------------------------


def test_there_are_auto_and_fixed_examples() -> None:
    policies = {
        apply_defaults(openapi_schema(), yaml.safe_load(p.read_text()))["spec"]["sessionTimeout"]["policy"]
        for p in example_files()
    }
    assert policies == {"Auto", "Fixed"}


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_is_a_valid_consumer_fleet(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    assert (obj["apiVersion"], obj["kind"]) == ("berth.dev/v1alpha1", "ConsumerFleet")
    assert crd_json_schema_errors(obj) == []
    assert cel_violations(obj) == []
    # The pod template is kept as given by the CRD; Kubernetes' own PodTemplateSpec schema checks it here.
    assert k8s_errors(obj["spec"]["template"], "podtemplatespec-v1.json") == []
    # Runnable where namespaces enforce the "restricted" Pod Security Standard (deploy/manifests' namespace does).
    assert restricted_violations(obj["spec"]["template"]["spec"]) == []


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_runs_the_member_library_example(path: Path) -> None:
    containers = yaml.safe_load(path.read_text())["spec"]["template"]["spec"]["containers"]
    assert [c["args"] for c in containers] == [["python", "-m", "berth.coordinator.client.example"]]
    # args, not command: the image's tini stays PID 1 and delivers SIGTERM.
    assert all("command" not in c for c in containers)
