"""The ConsumerFleet CRD as a file: one canonical copy, the names docs/architecture.md pins, and examples that run
the member library. What the API server does with it (installing, defaulting, validation, CEL, subresources,
printer columns) is tested on a real kube-apiserver in tests/kube/test_crd.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_helpers import (
    CHART,
    CRD_FILE,
    crd,
    crd_version,
    example_files,
    example_fleet,
    is_kafka_example,
    restricted_violations,
)

DEPLOY_CRDS = CRD_FILE.parent


def test_chart_crds_are_byte_identical_to_deploy_crds() -> None:
    canonical = {p.name: p.read_bytes() for p in DEPLOY_CRDS.glob("*.yaml")}
    shipped = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert canonical.keys() == shipped.keys(), "charts/berth/crds/ and deploy/crds/ hold different files"
    drifted = [name for name in canonical if canonical[name] != shipped[name]]
    assert not drifted, f"{drifted} differ: run `.venv/bin/python deploy/render.py` to copy deploy/crds/ into the chart"


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


def test_there_are_auto_and_fixed_examples() -> None:
    policies = {(example_fleet(p)["spec"].get("sessionTimeout") or {}).get("policy", "Auto") for p in example_files()}
    assert {"Auto", "Fixed"} <= policies


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_pods_meet_the_restricted_pod_security_standard(path: Path) -> None:
    obj = example_fleet(path)
    assert (obj["apiVersion"], obj["kind"]) == ("berth.dev/v1alpha1", "ConsumerFleet")
    # Runnable where namespaces enforce the "restricted" Pod Security Standard (deploy/manifests' namespace does).
    assert restricted_violations(obj["spec"]["template"]["spec"]) == []


@pytest.mark.parametrize("path", [p for p in example_files() if not is_kafka_example(p)], ids=lambda p: p.name)
def test_example_runs_the_member_library_example(path: Path) -> None:
    containers = example_fleet(path)["spec"]["template"]["spec"]["containers"]
    assert [c["args"] for c in containers] == [["python", "-m", "berth.coordinator.client.example"]]
    # args, not command: the image's tini stays PID 1 and delivers SIGTERM.
    assert all("command" not in c for c in containers)


def test_the_kafka_examples_carry_their_consumer_programs_as_written() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "render", CHART.parent.parent / "scripts" / "render_kafka_examples.py"
    )
    assert spec is not None and spec.loader is not None
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    for client in render.CLIENTS:
        path = CHART.parent.parent / "deploy" / "examples" / f"{client}-orders.yaml"
        assert path.read_text() == render.render(client), (
            f"{path.name} is stale: python scripts/render_kafka_examples.py"
        )
    assert {"kafka-python-orders.yaml", "confluent-kafka-orders.yaml"} <= {p.name for p in example_files()}
