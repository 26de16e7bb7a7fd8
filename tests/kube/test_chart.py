"""The Helm chart on a real kube-apiserver, as a new user meets it: ``helm install`` on a fresh cluster (CRDs
included), ``helm upgrade`` with changed values, the CRD upgrade step the docs give (Helm never upgrades ``crds/``),
and ``helm uninstall`` removing what docs/install.md says it removes."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.certs import tls_handshake
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.kube import Kube, wait_until
from support.kube_fixtures import admin_of, started_control_plane

pytestmark = [pytest.mark.kube, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "berth"
CRD = "consumerfleets.berth.dev"


@pytest.fixture(scope="module")
def fresh() -> Iterator[Kube]:
    """A control plane of its own that has never seen Berth: no CRD, no namespace."""
    with started_control_plane() as plane:
        admin = admin_of(plane)
        wait_until(lambda: admin.get("serviceaccount", "default", namespace="default"), "the default ServiceAccount")
        yield admin


def manifest_objects(kube: Kube, release: str, namespace: str) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) of everything ``helm get manifest`` says the release holds."""
    text = kube.helm("get", "manifest", release, "-n", namespace).stdout
    docs = [d for d in yaml.safe_load_all(text) if d]
    return [(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs]


def exists(kube: Kube, kind: str, name: str, namespace: str | None) -> bool:
    return kube.get(kind, name, namespace=namespace) is not None


def notes_fleet(notes: str) -> dict[str, Any]:
    fleet: dict[str, Any] = yaml.safe_load(notes.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0])
    return fleet


def test_install_upgrade_crd_upgrade_and_uninstall_on_a_fresh_cluster(fresh: Kube, tmp_path: Path) -> None:
    installed = fresh.helm("install", "berth", str(CHART), "-n", "berth", "--create-namespace")
    assert "STATUS: deployed" in installed.stdout
    fresh.wait_established(CRD)
    objects = manifest_objects(fresh, "berth", "berth")
    assert {kind for kind, _, _ in objects} >= {
        "Deployment",
        "StatefulSet",
        "Service",
        "Secret",
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceAccount",
        "PodDisruptionBudget",
    }
    missing = [o for o in objects if not exists(fresh, o[0], o[1], o[2])]
    assert not missing, missing
    # TLS by default: the CA and certificate generated at install, for the Service's names.
    tls = fresh.get("secret", "berth-coordinator-tls", namespace="berth")
    assert tls["type"] == "kubernetes.io/tls"
    ca = tls["data"]["ca.crt"]
    for name in ("berth-coordinator.berth", "berth-coordinator.berth.svc"):
        assert tls_handshake({k: base64.b64decode(v) for k, v in tls["data"].items()}, name) is None
    # The fleet the notes offer is accepted by the server as written.
    notes = installed.stdout.split("NOTES:", 1)[1]
    fleet = notes_fleet(notes)
    fresh.kubectl("create", "secret", "generic", "orders-token", "-n", "berth", "--from-literal=token=t")
    fresh.apply(fleet, namespace="berth")
    assert fresh.get("cf", "orders", namespace="berth")["spec"]["sessionTimeout"]["policy"] == "Auto"

    # helm upgrade with changed values reaches the objects.
    fresh.helm(
        "upgrade",
        "berth",
        str(CHART),
        "-n",
        "berth",
        "--reuse-values",
        "--set",
        "operator.logFormat=text",
        "--set",
        "coordinator.logLevel=debug",
    )
    args = fresh.get("deployment", "berth-operator", namespace="berth")["spec"]["template"]["spec"]["containers"][0]
    assert args["args"][args["args"].index("--log-format") + 1] == "text"
    coordinator = fresh.get("statefulset", "berth-coordinator", namespace="berth")["spec"]["template"]["spec"]
    assert "debug" in coordinator["containers"][0]["args"]
    assert json.loads(fresh.helm("history", "berth", "-n", "berth", "-o", "json").stdout)[-1]["revision"] == 2
    # The upgrade found the CA with lookup and kept it: the fleets' pods keep trusting the coordinator.
    assert fresh.get("secret", "berth-coordinator-tls", namespace="berth")["data"]["ca.crt"] == ca

    # A changed CRD: helm upgrade leaves the installed one alone; the documented step applies it.
    changed = tmp_path / "chart"
    shutil.copytree(CHART, changed)
    crd_file = changed / "crds" / f"{CRD}.yaml"
    crd_file.write_text(crd_file.read_text().replace("Desired number of consumer pods.", "Desired pods (v2)."))
    fresh.helm("upgrade", "berth", str(changed), "-n", "berth", "--reuse-values")
    assert "Desired pods (v2)." not in json.dumps(fresh.get("crd", CRD))
    # Helm created the CRD, so it owns its fields: taking them over needs --force-conflicts.
    applied = fresh.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(changed / "crds")).stdout
    assert "serverside-applied" in applied
    assert "Desired pods (v2)." in json.dumps(fresh.get("crd", CRD))
    assert fresh.get("cf", "orders", namespace="berth") is not None  # fleets survive a CRD upgrade

    # helm uninstall removes the release's objects but keeps the tokens and TLS Secrets, the coordinator's volume
    # claim and the CRD (with every fleet), and the operator's ServiceAccount with the Lease's Role and RoleBinding
    # (the stopping leader releases its Lease with them), and the namespace of the owner records the install created
    # (shared by every install: the records of fleets left behind stay valid), as docs/install.md says.
    wait_until(lambda: fresh.get("pvc", "data-berth-coordinator-0", namespace="berth"), "the coordinator's claim")
    fresh.helm("uninstall", "berth", "-n", "berth")
    kept = {("Secret", "berth-coordinator-tokens"), ("Secret", "berth-coordinator-tls")}
    kept |= {("ServiceAccount", "berth-operator"), ("Role", "berth-operator-lease")}
    kept |= {("RoleBinding", "berth-operator-lease"), ("Namespace", "berth-group-owners")}
    for kind, name, namespace in objects:
        present = wait_until(
            lambda k=kind, n=name, ns=namespace: (exists(fresh, k, n, ns) == ((k, n) in kept)) or None,
            f"{kind}/{name} {'kept' if (kind, name) in kept else 'removed'}",
            timeout_s=30,
        )
        assert present
    assert exists(fresh, "pvc", "data-berth-coordinator-0", "berth")
    assert exists(fresh, "crd", CRD, None) and exists(fresh, "cf", "orders", "berth")
    # Installed again (the CRD, changed above by kubectl, left alone), the release adopts what was kept.
    assert "STATUS: deployed" in fresh.helm("install", "berth", str(CHART), "-n", "berth", "--skip-crds").stdout


def test_install_md_names_the_crd_upgrade_step_the_test_runs() -> None:
    install = (REPO / "docs" / "install.md").read_text()
    assert "kubectl apply --server-side --force-conflicts -f" in install


def test_notes_commands_are_quoted_for_bash_and_zsh(kube: Kube) -> None:
    """zsh expands an unquoted ``[0]`` or ``{a,b}`` (and fails with "no matches found"): every ``--set`` argument with
    such characters must be quoted, and the commands must parse as shell."""
    for values in ([], ["--set", "operator.scope=namespace"], ["--set", "auth.existingSecret=tokens"]):
        out = kube.helm("install", "berth", str(CHART), "-n", "notes", "--dry-run=client", *values).stdout
        notes = out.split("NOTES:", 1)[1]
        commands = shell_commands(notes)
        assert commands
        for argument in re.findall(r"--set(?:-string)?[ =](\S+)", notes):
            if re.search(r"[\[\]{}*?]", argument):
                assert argument[0] in "'\"" and argument[-1] == argument[0], argument
        for command in commands:
            syntax = subprocess.run(["bash", "-n"], input=command, capture_output=True, text=True)
            assert syntax.returncode == 0, f"{command}\n{syntax.stderr}"


def shell_commands(notes: str) -> list[str]:
    """Each kubectl/helm command of the notes, with its continuation lines (a heredoc's body excluded)."""
    commands, current = [], ""
    for line in notes.splitlines():
        if current or re.match(r"\s*(kubectl|helm) ", line):
            current += line.strip() + "\n"
            if not line.rstrip().endswith("\\"):
                commands.append(current.split("<<", 1)[0])
                current = ""
    return commands


def helm_test_pod(coordinator_url: str) -> Callable[[Any, dict[str, str]], list[str] | None]:
    """Run only ``helm test``'s pod, with its real command, pointed at a coordinator on loopback (the Service's
    DNS name does not resolve outside a cluster). The release's other pods stay Pending."""

    def program(pod: Any, env: dict[str, str]) -> list[str] | None:
        if not pod.metadata.name.endswith("-test"):
            return None
        argv = list(pod.spec.containers[0].args)
        argv[argv.index("--coordinator") + 1] = coordinator_url
        return [str(Path(sys.executable).parent / argv[0]), *argv[1:]]

    return program


@pytest.mark.parametrize("tokens", ["own", "other"])
def test_helm_test_asks_the_coordinator_with_the_charts_admin_token(kube: Kube, tmp_path: Path, tokens: str) -> None:
    """The test pod passes against a coordinator that uses the tokens the chart generated, and fails against one
    that does not know them."""
    namespace = release = f"probe-{tokens}"
    # Plain http: the test pod talks to a coordinator on loopback, which no certificate for the Service names fits.
    tls_off = ("--set", "coordinator.tls.enabled=false")
    kube.helm("install", release, str(CHART), "-n", namespace, "--create-namespace", *tls_off)
    secret = kube.get("secret", f"{release}-coordinator-tokens", namespace=namespace)
    tokens_yaml = base64.b64decode(secret["data"]["tokens.yaml"]).decode()
    if tokens == "other":
        tokens_yaml = yaml.safe_dump({"tokens": [{"token": "someone-else", "groups": ["*"], "admin": True}]})
    (tmp_path / "tokens.yaml").write_text(tokens_yaml)
    coordinator = CoordinatorProcess(tmp_path / "data", "--tokens-file", str(tmp_path / "tokens.yaml"))
    coordinator.start()
    kubelet = FakeKubelet(kube.kubeconfig, namespace, tmp_path / "pods", program=helm_test_pod(coordinator.url))
    try:
        kubelet.start()
        result = kube.helm("test", release, "-n", namespace, "--timeout", "60s", check=False)
    finally:
        kubelet.stop()
        coordinator.kill()
    if tokens == "own":
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Phase:          Succeeded" in result.stdout
        assert kubelet.finished == {f"{release}-coordinator-test": 0}
    else:
        assert result.returncode != 0
        assert kubelet.finished[f"{release}-coordinator-test"] != 0
