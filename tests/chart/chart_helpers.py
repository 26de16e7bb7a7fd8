"""Shared by tests/chart: the real helm binary, rendering, Kubernetes OpenAPI validation of rendered objects, and the
CRD file. (What the API server does with the CRD is tested on the real server in tests/kube.)"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "berth"
CRD_FILE = ROOT / "deploy" / "crds" / "consumerfleets.berth.dev.yaml"
EXAMPLES = ROOT / "deploy" / "examples"
#: The Kubernetes version everything is validated for: the kubectl and helm in .tools/bin speak 1.35.
K8S_VERSION = "1.35.0"
RELEASE = "berth"
NAMESPACE = "berth"

Obj = dict[str, Any]


def find_tool(name: str) -> str | None:
    """The repository's binary (.tools/bin, installed by `make`), else one on PATH, else None."""
    local = ROOT / ".tools" / "bin" / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


def run_helm(args: list[str], values: Obj | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real helm with ``values`` in a values file, offline (no kubeconfig)."""
    helm = find_tool("helm")
    assert helm is not None, "helm is missing (the fixture should have skipped)"
    env = {**os.environ, "KUBECONFIG": os.devnull, "HELM_CACHE_HOME": tempfile.gettempdir()}
    if values is None:
        return subprocess.run([helm, *args], capture_output=True, text=True, env=env, check=False)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(values, file)
        file.flush()
        return subprocess.run([helm, *args, "-f", file.name], capture_output=True, text=True, env=env, check=False)


def template_args(release: str = RELEASE, namespace: str = NAMESPACE) -> list[str]:
    return ["template", release, str(CHART), "--namespace", namespace, "--kube-version", K8S_VERSION]


@functools.cache
def _render_cached(values_json: str, release: str, namespace: str) -> str:
    result = run_helm(template_args(release, namespace), json.loads(values_json))
    if result.returncode != 0:
        raise AssertionError(f"helm template failed:\n{result.stderr}")
    return result.stdout


@functools.cache
def _parsed_cached(values_json: str, release: str, namespace: str) -> tuple[Obj, ...]:
    return tuple(load_all(_render_cached(values_json, release, namespace)))


def load_all(text: str) -> list[Obj]:
    """Every non-empty YAML document in ``text`` (libyaml's parser when PyYAML has it: several times faster)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(text, Loader=loader) if doc]


def render(values: Obj | None = None, release: str = RELEASE, namespace: str = NAMESPACE) -> list[Obj]:
    """The chart's objects for ``values`` (a fresh copy each call; helm runs once per distinct input)."""
    return copy.deepcopy(list(_parsed_cached(json.dumps(values or {}, sort_keys=True), release, namespace)))


def render_text(values: Obj | None = None) -> str:
    return _render_cached(json.dumps(values or {}, sort_keys=True), RELEASE, NAMESPACE)


def find(docs: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def pod_specs(docs: list[Obj]) -> Iterator[tuple[str, Obj]]:
    """(kind/name, pod spec) of every workload."""
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield name, doc["spec"]["template"]["spec"]
        elif doc["kind"] == "CronJob":
            yield name, doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]


#: Volume types the "restricted" Pod Security Standard allows.
RESTRICTED_VOLUMES = {"secret", "emptyDir", "persistentVolumeClaim", "configMap", "projected", "downwardAPI", "csi"}


def restricted_violations(spec: Obj) -> list[str]:
    """Where a pod spec breaks the "restricted" Pod Security Standard (as the pod-security admission checks it:
    a container setting wins over the pod's)."""
    problems = []
    pod = spec.get("securityContext") or {}
    if any(spec.get(host) for host in ("hostNetwork", "hostPID", "hostIPC")):
        problems.append("host namespaces")
    for volume in spec.get("volumes") or []:
        if set(volume) - {"name"} - RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']} is of a type restricted pods may not use")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        context = c.get("securityContext") or {}
        where = f"container {c.get('name')}"
        if context.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True:
            problems.append(f"{where}: runAsNonRoot is not true")
        if 0 in (context.get("runAsUser"), pod.get("runAsUser")):
            problems.append(f"{where}: runs as UID 0")
        seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: no RuntimeDefault seccomp profile")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if "ALL" not in (context.get("capabilities") or {}).get("drop", []):
            problems.append(f"{where}: capabilities are not all dropped")
        if set((context.get("capabilities") or {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{where}: adds capabilities")
        if context.get("privileged"):
            problems.append(f"{where}: privileged")
    return problems


def secret_strings(secret: Obj) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in (secret.get("data") or {}).items()}


# --- the CRD's schema, as the API server applies it ---------------------------------------------------------


@functools.cache
def _crd_parsed() -> Obj:
    loaded: Obj = yaml.safe_load(CRD_FILE.read_text())
    return loaded


def crd() -> Obj:
    """The CRD (a fresh copy: callers may change it)."""
    return copy.deepcopy(_crd_parsed())


def crd_version() -> Obj:
    versions: list[Obj] = crd()["spec"]["versions"]
    return versions[0]


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


def example_fleet(path: Path) -> Obj:
    """The ConsumerFleet of an example file (the last document; a Kafka example has its program's ConfigMap first)."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    fleet: Obj = documents[-1]
    return fleet


def is_kafka_example(path: Path) -> bool:
    return "kafka" in (example_fleet(path)["spec"].get("coordinator") or {})
