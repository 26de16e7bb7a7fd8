"""Shared by tests/chart: the real helm binary, rendering, Kubernetes OpenAPI validation, and the CRD's schema
(as JSON Schema, with the API server's defaulting and its CEL rules)."""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # types-jsonschema is not a dev dependency
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


# --- Kubernetes OpenAPI validation (the JSON schemas kubernetes-validate ships, strict: unknown fields fail) ---


@functools.cache
def _k8s_schema_dir() -> Path:
    import kubernetes_validate

    return Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{K8S_VERSION}-local-strict"


@functools.cache
def _k8s_definitions() -> Any:
    """The shared definitions, crawled once: crawling the 1.5 MB document is most of a validation's cost."""
    from referencing import Registry, Resource

    definitions = json.loads((_k8s_schema_dir() / "_definitions.json").read_text())
    return Registry().with_resource("_definitions.json", Resource.from_contents(definitions)).crawl()


@functools.cache
def _k8s_validator(schema_file: str) -> jsonschema.Draft202012Validator:
    from referencing import Resource

    schema = json.loads((_k8s_schema_dir() / schema_file).read_text())
    registry = _k8s_definitions().with_resource(schema_file, Resource.from_contents(schema))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def k8s_schema_file(api_version: str, kind: str) -> str:
    """kubernetes-validate's file naming: apps/v1 Deployment -> deployment-apps-v1.json."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


def k8s_errors(obj: Obj, schema_file: str | None = None) -> list[str]:
    """Every violation of the Kubernetes OpenAPI schema for ``obj`` (its kind, or ``schema_file``)."""
    name = schema_file or k8s_schema_file(obj["apiVersion"], obj["kind"])
    if not (_k8s_schema_dir() / name).is_file():
        return [f"no Kubernetes {K8S_VERSION} schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    validator = _k8s_validator(name)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]


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


def openapi_schema() -> Obj:
    schema: Obj = crd_version()["schema"]["openAPIV3Schema"]
    return schema


def to_json_schema(node: Obj, *, root: bool = True) -> Obj:
    """The CRD's OpenAPI v3 schema as Draft 7 JSON Schema that also REJECTS every field the API server would
    silently prune (so a misspelt field in an example fails instead of vanishing), and honours ``nullable``."""
    out: Obj = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(child, root=False) for name, child in value.items()}
        elif key == "items" or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = to_json_schema(value, root=False)
        else:
            out[key] = copy.deepcopy(value)
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    keeps_unknown = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "properties" in node and "additionalProperties" not in node and not keeps_unknown:
        out["additionalProperties"] = False
    if root:
        # apiVersion, kind and metadata are the API server's, not the schema's, to check.
        out["properties"]["metadata"] = {"type": "object"}
    return out


@functools.cache
def _crd_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(to_json_schema(openapi_schema()))


def crd_json_schema_errors(obj: Obj) -> list[str]:
    validator = _crd_validator()
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]


def apply_defaults(schema: Obj, value: Any) -> Any:
    """``value`` with the schema's defaults filled in, as the API server does: a missing property with a default
    gets it (and then its own nested defaults), recursively through objects and arrays."""
    if isinstance(value, dict):
        result = dict(value)
        for name, child in (schema.get("properties") or {}).items():
            if name not in result and "default" in child:
                result[name] = copy.deepcopy(child["default"])
            if name in result:
                result[name] = apply_defaults(child, result[name])
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


Path_ = tuple[str, ...]  # property names; "[]" steps into array items


def cel_rules(schema: Obj, path: Path_ = ()) -> list[tuple[Path_, str, str]]:
    """(schema path, rule, message) of every x-kubernetes-validations rule."""
    rules = [(path, r["rule"], r.get("message", "")) for r in schema.get("x-kubernetes-validations") or []]
    for name, child in (schema.get("properties") or {}).items():
        rules += cel_rules(child, (*path, name))
    if isinstance(schema.get("items"), dict):
        rules += cel_rules(schema["items"], (*path, "[]"))
    return rules


def values_at(obj: Any, path: Path_) -> Iterator[Any]:
    if not path:
        yield obj
        return
    head, rest = path[0], path[1:]
    if head == "[]" and isinstance(obj, list):
        for item in obj:
            yield from values_at(item, rest)
    elif isinstance(obj, dict) and head in obj:
        yield from values_at(obj[head], rest)


#: Python twins of the CRD's CEL rules, so that the rules are checked even where no CEL runtime is installed.
#: A rule without a twin fails test_every_cel_rule_has_a_python_twin; with cel-python installed, each twin is
#: also checked to agree with the real CEL evaluation.
CEL_TWINS: dict[str, Callable[[Any], bool]] = {
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')": lambda s: (
        re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", s["metadata"]["name"]) is not None
    ),
    "size(self.metadata.name) <= 52": lambda s: len(s["metadata"]["name"]) <= 52,
    "!has(self.minMs) || !has(self.maxMs) || self.minMs <= self.maxMs": lambda s: (
        "minMs" not in s or "maxMs" not in s or s["minMs"] <= s["maxMs"]
    ),
    "!has(self.policy) || self.policy != 'Fixed' || has(self.fixedMs)": lambda s: (
        "policy" not in s or s["policy"] != "Fixed" or "fixedMs" in s
    ),
    "(has(self.policy) && self.policy == 'Fixed') || !has(self.fixedMs)": lambda s: (
        s.get("policy") == "Fixed" or "fixedMs" not in s
    ),
}


def cel_violations(obj: Obj, evaluate: Callable[[str, Any], bool] | None = None) -> list[str]:
    """Messages of the CEL rules ``obj`` (defaulted first, like the API server) breaks. ``evaluate(rule, self)``
    defaults to the Python twins."""
    defaulted = apply_defaults(openapi_schema(), obj)
    check = evaluate or (lambda rule, value: CEL_TWINS[rule](value))
    return [
        message
        for path, rule, message in cel_rules(openapi_schema())
        for value in values_at(defaulted, path)
        if not check(rule, value)
    ]


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))
