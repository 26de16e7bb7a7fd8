"""The plain manifests in deploy/manifests/ (for installs without Helm) and deploy/create-tokens-secret.sh."""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from chart_helpers import ROOT, Obj, find, load_all, one
from support.certs import openssl_or_skip, tls_handshake
from support.kube import Kube

from berth.coordinator.http.auth import TokenSet

pytestmark = [pytest.mark.tools, pytest.mark.usefixtures("helm_bin")]

MANIFESTS = ROOT / "deploy" / "manifests"
TOKENS_SCRIPT = ROOT / "deploy" / "create-tokens-secret.sh"


def load_render_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("berth_deploy_render", ROOT / "deploy" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def expected() -> dict[Path, str]:
    render = load_render_script()
    files: dict[Path, str] = render.expected_files(render.find_helm())
    return files


def test_plain_manifests_match_a_fresh_render(expected: dict[Path, str]) -> None:
    on_disk = set(MANIFESTS.glob("*.yaml"))
    assert on_disk == {p for p in expected if p.parent == MANIFESTS}, "deploy/manifests/ holds other files"
    stale = [str(p.relative_to(ROOT)) for p, text in expected.items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"{stale} are stale: run `.venv/bin/python deploy/render.py`"


@pytest.mark.parametrize("name", ["berth.yaml", "berth-namespaced.yaml"])
def test_plain_manifest_objects_hold_no_token(name: str) -> None:
    docs = load_all((MANIFESTS / name).read_text())
    assert docs[0]["kind"] == "Namespace" and docs[0]["metadata"]["name"] == "berth", "the namespace comes first"
    # A Secret committed here would give everyone the same tokens, or the same private key.
    assert not find(docs, "Secret")
    volumes = [
        v for d in docs if d["kind"] in ("Deployment", "StatefulSet") for v in d["spec"]["template"]["spec"]["volumes"]
    ]
    secrets = {v["secret"]["secretName"] for v in volumes if "secret" in v}
    assert secrets == {"berth-coordinator-tokens", "berth-coordinator-tls"}  # the scripts create them
    operator_role_kind = "ClusterRole" if name == "berth.yaml" else "Role"
    assert one(docs, operator_role_kind, "berth-operator")


def test_render_check_mode_reports_a_stale_file(expected: dict[Path, str]) -> None:
    """`deploy/render.py --check` fails and names the file when a manifest was edited by hand."""
    render = load_render_script()
    target = MANIFESTS / "berth.yaml"
    edited = {target: expected[target] + "# edited\n"}
    assert render.stale_files(edited) == [target]
    assert render.stale_files({target: target.read_text()}) == []


def run_tokens_script(*args: str, kubectl: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECTL": kubectl, "DRY_RUN": "1", "KUBECONFIG": os.devnull}
    return subprocess.run(["bash", str(TOKENS_SCRIPT), *args], capture_output=True, text=True, env=env, check=False)


def test_tokens_script_creates_the_secret_the_manifests_mount(kubectl_bin: str) -> None:
    result = run_tokens_script("berth", "orders=orders,orders-*", "ops=*", kubectl=kubectl_bin)
    assert result.returncode == 0, result.stderr
    secret: Obj = yaml.safe_load(result.stdout)
    assert (secret["kind"], secret["metadata"]["name"], secret["metadata"]["namespace"]) == (
        "Secret",
        "berth-coordinator-tokens",
        "berth",
    )
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert set(data) == {"admin-token", "analytics-token", "token-orders", "token-ops", "tokens.yaml"}
    for key in ("admin-token", "analytics-token", "token-orders", "token-ops"):
        assert re.fullmatch(r"[0-9a-f]{64}", data[key]), f"{key} is not 256 random bits in hex"
    tokens = yaml.safe_load(data["tokens.yaml"])["tokens"]
    assert tokens == [
        {"name": "admin", "token": data["admin-token"], "groups": ["*"], "admin": True},
        {
            "name": "analytics",
            "token": data["analytics-token"],
            "groups": [],
            "admin": False,
            "scopes": ["journal:read"],
        },
        {"name": "orders", "token": data["token-orders"], "groups": ["orders", "orders-*"], "admin": False},
        {"name": "ops", "token": data["token-ops"], "groups": ["*"], "admin": False},
    ]
    assert len(TokenSet.from_document(yaml.safe_load(data["tokens.yaml"]))) == 4  # the coordinator accepts it
    again = yaml.safe_load(run_tokens_script("berth", kubectl=kubectl_bin).stdout)
    assert again["data"]["admin-token"] != secret["data"]["admin-token"], "tokens must be fresh every run"


@pytest.mark.parametrize("bad", ["orders", "Orders=orders", "orders="])
def test_tokens_script_refuses_a_malformed_token_spec(kubectl_bin: str, bad: str) -> None:
    result = run_tokens_script("berth", bad, kubectl=kubectl_bin)
    assert result.returncode == 2
    assert "expected NAME=GLOB" in result.stderr
    assert not result.stdout


@pytest.mark.kube
@pytest.mark.parametrize("name", ["berth.yaml", "berth-namespaced.yaml"])
def test_plain_manifests_are_accepted_by_a_real_api_server(name: str, kube: Kube) -> None:
    """``kubectl apply --dry-run=server`` of the file as a user would apply it (its objects may exist already). A
    dry run creates no namespace, so the ones the objects go into must exist (the release's and the records')."""
    kube.create_namespace("berth")
    kube.create_namespace("berth-group-owners")
    result = kube.kubectl("apply", "--dry-run=server", "-f", str(MANIFESTS / name), check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.kube
def test_the_tokens_scripts_secret_is_accepted_by_a_real_api_server(kubectl_bin: str, kube: Kube) -> None:
    secret = yaml.safe_load(run_tokens_script("berth", "orders=orders", kubectl=kubectl_bin).stdout)
    kube.create_namespace("berth")
    result = kube.dry_run([secret], verb="apply")
    assert result.returncode == 0, result.stderr


TLS_SCRIPT = ROOT / "deploy" / "create-tls-secret.sh"


def run_tls_script(*args: str, kubectl: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECTL": kubectl, "DRY_RUN": "1", "KUBECONFIG": os.devnull}
    return subprocess.run(["bash", str(TLS_SCRIPT), *args], capture_output=True, text=True, env=env, check=False)


def test_tls_script_makes_the_secret_the_manifests_mount_for_the_services_names(kubectl_bin: str) -> None:
    openssl_or_skip()
    result = run_tls_script("berth", kubectl=kubectl_bin)
    assert result.returncode == 0, result.stderr
    secret: Obj = yaml.safe_load(result.stdout)
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"], secret["type"]) == (
        "berth-coordinator-tls",
        "berth",
        "kubernetes.io/tls",
    )
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert set(data) == {"tls.crt", "tls.key", "ca.crt"}
    for name in ("berth-coordinator", "berth-coordinator.berth", "berth-coordinator.berth.svc"):
        assert tls_handshake(data, name) is None, name
    assert tls_handshake(data, "berth-coordinator.elsewhere") is not None
    again = yaml.safe_load(run_tls_script("berth", kubectl=kubectl_bin).stdout)
    assert again["data"]["ca.crt"] != secret["data"]["ca.crt"], "a fresh CA every run"
    assert run_tls_script("Berth", kubectl=kubectl_bin).returncode == 2
