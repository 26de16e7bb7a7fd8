"""The chart, rendered by the real helm for its defaults and for every documented option.

Each value set is linted (`helm lint --strict`) and rendered (`helm template`); every object must pass the
Kubernetes 1.35 OpenAPI schema (strict: a misspelt field fails), meet the "restricted" Pod Security Standard, use
no wildcard RBAC, carry the standard labels, and never show a generated token outside its Secret. Each option's
own effect is asserted by its `check`.
"""

from __future__ import annotations

import base64
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from chart_helpers import (
    NAMESPACE,
    ROOT,
    Obj,
    find,
    one,
    pod_specs,
    render,
    restricted_violations,
    run_helm,
    secret_strings,
    template_args,
)
from support.certs import tls_handshake
from support.kube import Kube

from berth.coordinator.command.main import build_parser as coordinator_parser
from berth.coordinator.http.auth import TokenSet
from berth.coordinator.http.replicas import replication_config
from berth.coordinator.store.etcd.copy import build_parser as copy_parser
from berth.operator.planners.statefulset import pod_labels
from berth.pipeline.main import analyze_parser

pytestmark = [pytest.mark.tools, pytest.mark.usefixtures("helm_bin")]

DIGEST = "sha256:" + "ab" * 32


def container(docs: list[Obj], kind: str, name: str) -> Obj:
    for pod_name, spec in pod_specs(docs):
        if pod_name == f"{kind}/{name}":
            first: Obj = spec["containers"][0]
            return first
    raise AssertionError(f"no {kind}/{name} among {[n for n, _ in pod_specs(docs)]}")


def arg_after(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def operator_args(docs: list[Obj]) -> list[str]:
    args: list[str] = container(docs, "Deployment", "berth-operator")["args"]
    return args


def coordinator_args(docs: list[Obj]) -> list[str]:
    args: list[str] = container(docs, "StatefulSet", "berth-coordinator")["args"]
    return args


# --- what each option must do -----------------------------------------------------------------------------------


def check_defaults(docs: list[Obj]) -> None:
    # docs/architecture.md pins: <release>-operator Deployment, <release>-coordinator StatefulSet, cluster RBAC.
    deployment = one(docs, "Deployment", "berth-operator")
    # Two replicas, one acting (leader election on a Lease), spread over nodes, one kept through a drain.
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    operator = operator_args(docs)
    assert "--leader-elect" in operator and arg_after(operator, "--leader-election-lease") == "berth-operator"
    assert [
        arg_after(operator, f"--leader-elect-{t}-s") for t in ("lease-duration", "renew-deadline", "retry-period")
    ] == [
        "15",
        "10",
        "2",
    ]
    spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (preferred,) = spread["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert selects(preferred["podAffinityTerm"]["labelSelector"], deployment["spec"]["template"]["metadata"]["labels"])
    budget = one(docs, "PodDisruptionBudget", "berth-operator")
    assert budget["spec"]["maxUnavailable"] == 1
    assert selects(budget["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    # The Lease only, in the release namespace, through a Role of its own (never the ClusterRole).
    lease_role = one(docs, "Role", "berth-operator-lease")
    assert lease_role["metadata"]["namespace"] == NAMESPACE
    assert {r for rule in lease_role["rules"] for r in rule["resources"]} == {"leases"}
    assert one(docs, "RoleBinding", "berth-operator-lease")["roleRef"]["name"] == "berth-operator-lease"
    cluster_role = one(docs, "ClusterRole", "berth-operator")
    assert not [rule for rule in cluster_role["rules"] if "leases" in rule["resources"]]
    statefulset = one(docs, "StatefulSet", "berth-coordinator")
    assert statefulset["spec"]["replicas"] == 1
    assert [t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]] == ["data"]
    assert one(docs, "ClusterRole", "berth-operator")
    assert one(docs, "ClusterRoleBinding", "berth-operator")["subjects"] == [
        {"kind": "ServiceAccount", "name": "berth-operator", "namespace": NAMESPACE}
    ]
    assert not find(docs, "CronJob") and not find(docs, "ServiceMonitor")
    assert not find(docs, "PrometheusRule") and not find(docs, "ConfigMap", "berth-dashboard")
    service = one(docs, "Service", "berth-coordinator")
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("http", 9094), ("probes", 9095)]
    args = operator_args(docs)
    assert args[0] == "berth-operator"
    assert arg_after(args, "--coordinator-url") == "https://berth-coordinator.berth:9094"
    assert "--namespace" not in args and "--advice-configmap" not in args
    assert (arg_after(args, "--max-fleets"), arg_after(args, "--max-fleets-per-namespace")) == ("2000", "500")
    assert arg_after(args, "--group-owners-namespace") == "berth-group-owners" and "--adopt-groups" not in args
    coordinator = coordinator_args(docs)
    assert coordinator[0] == "berth-coordinator"
    # The coordinator's default host (127.0.0.1) would be unreachable from other pods.
    assert arg_after(coordinator, "--host") == "0.0.0.0"
    assert "--group-max-size" not in coordinator
    check_generated_tls(docs)
    assert (arg_after(coordinator, "--probe-port"), arg_after(coordinator, "--max-connections-per-client")) == (
        "9095",
        "1000",
    )
    assert not find(docs, "Certificate")
    # Drains stay possible: a healthy coordinator may be evicted, and an unhealthy one never blocks.
    pdb = one(docs, "PodDisruptionBudget", "berth-coordinator")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert one(docs, "Secret", "berth-coordinator-tokens")
    check_network_policies(docs)


def selects(selector: Obj, labels: Obj) -> bool:
    """Whether a LabelSelector (matchLabels, matchExpressions with Exists/In) selects ``labels``."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        if (operator == "Exists" and key not in labels) or (
            operator == "In" and labels.get(key) not in expression["values"]
        ):
            return False
    return True


def check_network_policies(docs: list[Obj]) -> None:
    """The coordinator admits its port from the operator, the analytics job and fleet pods only; the operator admits
    only its liveness port. The selectors are checked against the labels the pods really carry."""
    coordinator_pod = one(docs, "StatefulSet", "berth-coordinator")["spec"]["template"]["metadata"]["labels"]
    operator_pod = one(docs, "Deployment", "berth-operator")["spec"]["template"]["metadata"]["labels"]
    policy = one(docs, "NetworkPolicy", "berth-coordinator")["spec"]
    assert selects(policy["podSelector"], coordinator_pod) and not selects(policy["podSelector"], operator_pod)
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": 9094, "protocol": "TCP"}]
    fleet_pod = pod_labels("orders")
    peers = rule["from"]
    assert any(selects(p["podSelector"], operator_pod) and "namespaceSelector" not in p for p in peers)
    # A fleet pod passes only in the release namespace or one an administrator labelled (issue 22): the pod label
    # berth.dev/fleet, which any pod may set, is never enough on its own.
    fleet_peers = [p for p in peers if selects(p["podSelector"], fleet_pod)]
    labelled = {"kubernetes.io/metadata.name": "shop", "berth.dev/fleets": "enabled"}
    unlabelled = {"kubernetes.io/metadata.name": "shop"}
    release = {"kubernetes.io/metadata.name": NAMESPACE}
    assert all("namespaceSelector" in p and p["namespaceSelector"] for p in fleet_peers), fleet_peers
    assert any(selects(p["namespaceSelector"], labelled) for p in fleet_peers)
    assert any(selects(p["namespaceSelector"], release) for p in fleet_peers)
    assert not any(selects(p["namespaceSelector"], unlabelled) for p in fleet_peers)
    assert not any(selects(p["podSelector"], {"app": "anything-else"}) for p in peers)
    operator_policy = one(docs, "NetworkPolicy", "berth-operator")["spec"]
    assert selects(operator_policy["podSelector"], operator_pod)
    # Liveness from anywhere (the kubelet), metrics from any pod (networkPolicy.operator.metricsFrom narrows it).
    assert operator_policy["ingress"] == [
        {"ports": [{"port": 8080, "protocol": "TCP"}]},
        {"ports": [{"port": 8081, "protocol": "TCP"}]},
    ]
    assert arg_after(operator_args(docs), "--metrics-port") == "8081"


def check_generated_tls(docs: list[Obj]) -> None:
    """TLS by default (issue 22): with no certificate given the chart makes a CA and a certificate for the Service's
    names, the coordinator serves it and every client verifies against the CA alone (never the private key)."""
    secret = one(docs, "Secret", "berth-coordinator-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    assert set(data) == {"tls.crt", "tls.key", "ca.crt"}
    names = (
        "berth-coordinator",
        "berth-coordinator.berth",
        "berth-coordinator.berth.svc",
        "berth-coordinator.berth.svc.cluster.local",
    )
    for name in names:  # a real handshake: the certificate chains to the CA and names the Service
        assert tls_handshake(data, name) is None, name
    assert "Hostname mismatch" in (tls_handshake(data, "evil.example") or "")
    assert arg_after(coordinator_args(docs), "--tls-cert-file") == "/etc/berth/tls/tls.crt"
    assert arg_after(operator_args(docs), "--coordinator-ca-file") == "/etc/berth/ca/ca.crt"
    for name, spec in pod_specs(docs):
        if name.startswith("StatefulSet/"):
            continue
        ca_volume = next(v for v in spec["volumes"] if v["name"] == "coordinator-ca")["secret"]
        assert ca_volume["secretName"] == "berth-coordinator-tls", name
        assert ca_volume["items"] == [{"key": "ca.crt", "path": "ca.crt"}], name


def tokens_secret(docs: list[Obj]) -> Obj:
    """The generated tokens Secret (the generated TLS Secret holds no token)."""
    (secret,) = [d for d in find(docs, "Secret") if d["metadata"]["name"].endswith("-coordinator-tokens")]
    return secret


def check_trusted_coordinators(docs: list[Obj]) -> None:
    args = operator_args(docs)
    trusted = [args[i + 1] for i, arg in enumerate(args) if arg == "--trusted-coordinator"]
    assert trusted == ["http://orders-coordinator.team-a:9094", "https://coordinator.example.net:9443"]
    assert arg_after(args, "--coordinator-url") == "https://berth-coordinator.berth:9094"


def check_no_network_policies(docs: list[Obj]) -> None:
    assert not find(docs, "NetworkPolicy")


def check_namespace_scope(docs: list[Obj]) -> None:
    assert not find(docs, "ClusterRole", "berth-operator") and not find(docs, "ClusterRoleBinding")
    role = one(docs, "Role", "berth-operator")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert one(docs, "RoleBinding", "berth-operator")["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "berth-operator",
    }
    assert arg_after(operator_args(docs), "--namespace") == NAMESPACE
    # A Role cannot grant cluster-scoped resources.
    assert all("customresourcedefinitions" not in rule["resources"] for rule in role["rules"])


def check_analytics(docs: list[Obj]) -> None:
    cronjob = one(docs, "CronJob", "berth-analytics")
    analytics_pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    (rule,) = one(docs, "NetworkPolicy", "berth-coordinator")["spec"]["ingress"]
    assert any(selects(peer["podSelector"], analytics_pod) for peer in rule["from"])
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    analyze = container(docs, "CronJob", "berth-analytics")
    assert analyze["args"] == [
        "berth-analyze",
        "--journal-url",
        "https://berth-coordinator.berth:9094",
        "--token-file",
        "/etc/berth/analytics/token",
        "--ca-file",
        "/etc/berth/ca/ca.crt",
        "--also-journal",
        "/etc/berth/kafka-evidence/evidence.jsonl",
        "--out",
        "/tmp/berth-analytics",
        "--publish-configmap",
        "berth-advice",
        # Two task threads, as the benchmark measures the job (docs/pipeline.md, "Performance"): not the node's cores.
        "--master",
        "local[2]",
        "--driver-memory",
        "auto",
    ]
    analyze_parser().parse_args(analyze["args"][1:])  # the real command line accepts them (exits 2 otherwise)
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    # The Kafka evidence is the ConfigMap the operator writes, optional until the first Kafka fleet.
    (evidence,) = [v for v in pod["volumes"] if v["name"] == "kafka-evidence"]
    assert evidence["configMap"] == {"name": arg_after(operator_args(docs), "--evidence-configmap"), "optional": True}
    assert {"name": "kafka-evidence", "mountPath": "/etc/berth/kafka-evidence", "readOnly": True} in analyze[
        "volumeMounts"
    ]
    assert pod["serviceAccountName"] == "berth-analytics"
    rules = one(docs, "Role", "berth-analytics")["rules"]
    assert {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["berth-advice"],
        "verbs": ["patch"],  # berth.pipeline.publish patches, and creates on the first run: nothing else
    } in rules
    # create cannot be limited by name; it is the only unnamed rule.
    assert [r for r in rules if "resourceNames" not in r] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}
    ]
    assert arg_after(operator_args(docs), "--advice-configmap") == "berth-advice"
    assert arg_after(operator_args(docs), "--evidence-configmap") == "berth-kafka-evidence"
    advice = one(docs, "Role", "berth-operator-advice")
    assert advice["rules"] == [
        # The advice is watched by name: new advice reaches the fleets it sizes on the watch, not at a resync.
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["berth-advice"],
            "verbs": ["get", "list", "watch"],
        },
        # The Kafka evidence journal: by name, and created once.
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["berth-kafka-evidence"],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    ]


def check_service_monitor(docs: list[Obj]) -> None:
    monitor = one(docs, "ServiceMonitor", "berth-coordinator")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = one(docs, "Service", "berth-coordinator")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items(), "the ServiceMonitor selects no Service"
    ports = {p["name"] for p in service["spec"]["ports"]}
    # The probe port: plain HTTP whatever the API speaks, and answered when the API port is full.
    assert [(e["port"], e["path"], e["scheme"]) for e in monitor["spec"]["endpoints"]] == [
        ("probes", "/metrics", "http")
    ]
    assert monitor["spec"]["endpoints"][0]["port"] in ports
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    pod_monitor = one(docs, "PodMonitor", "berth-operator")
    operator = one(docs, "Deployment", "berth-operator")["spec"]["template"]
    assert selects(pod_monitor["spec"]["selector"], operator["metadata"]["labels"]), "the PodMonitor selects no pod"
    metrics_ports = {p["name"] for c in operator["spec"]["containers"] for p in c.get("ports", [])}
    assert [e["port"] for e in pod_monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert "metrics" in metrics_ports


MONITORING = ROOT / "deploy" / "monitoring"


def check_monitoring(docs: list[Obj]) -> None:
    """The dashboard's ConfigMap carries the sidecar's label and exactly the canonical JSON; the PrometheusRule
    carries the rule groups of deploy/monitoring/berth-alerts.yaml, alert templates untouched by Helm."""
    dashboard = one(docs, "ConfigMap", "berth-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "Berth"}
    shipped = dashboard["data"]["berth-dashboard.json"]
    assert json.loads(shipped) == json.loads((MONITORING / "berth-dashboard.json").read_text())
    rule = one(docs, "PrometheusRule", "berth-alerts")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["spec"] == yaml.safe_load((MONITORING / "berth-alerts.yaml").read_text())
    annotations = [r["annotations"]["summary"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert any("{{ $labels.group }}" in a for a in annotations), "Helm must not have expanded the alert templates"


def check_dashboard_label(docs: list[Obj]) -> None:
    labels = one(docs, "ConfigMap", "berth-dashboard")["metadata"]["labels"]
    assert labels["berth.dev/dashboard"] == "berth" and "grafana_dashboard" not in labels
    assert not find(docs, "PrometheusRule")


def check_existing_secret(docs: list[Obj]) -> None:
    assert [s["metadata"]["name"] for s in find(docs, "Secret")] == ["berth-coordinator-tls"]  # no tokens Secret
    for name, spec in pod_specs(docs):
        secrets = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        assert secrets - {"berth-coordinator-tls"} == {"my-tokens"}, name


def check_group_tokens(docs: list[Obj]) -> None:
    data = secret_strings(one(docs, "Secret", "berth-coordinator-tokens"))
    assert set(data) == {"admin-token", "analytics-token", "token-orders", "token-ops", "tokens.yaml"}
    tokens = yaml.safe_load(data["tokens.yaml"])["tokens"]
    assert {"name": "admin", "token": data["admin-token"], "groups": ["*"], "admin": True} in tokens
    assert {
        "name": "analytics",
        "token": data["analytics-token"],
        "groups": [],
        "admin": False,
        "scopes": ["journal:read"],
    } in tokens
    assert {"name": "orders", "token": data["token-orders"], "groups": ["orders", "orders-*"], "admin": False} in tokens
    assert {"name": "ops", "token": data["token-ops"], "groups": ["*"], "admin": True} in tokens
    assert len({t["token"] for t in tokens}) == 4, "tokens must differ"
    # The coordinator reads the file as the chart writes it: names, scopes and all.
    parsed = TokenSet.from_document(yaml.safe_load(data["tokens.yaml"]))
    analytics = parsed.authenticate(f"Bearer {data['analytics-token']}")
    assert analytics is not None and analytics.name == "analytics" and not analytics.admin
    assert analytics.has_scope("journal:read") and not analytics.may_use_group("orders")


def check_external_coordinator(docs: list[Obj]) -> None:
    assert not find(docs, "StatefulSet") and not find(docs, "Service")
    assert not find(docs, "PodDisruptionBudget", "berth-coordinator")
    assert arg_after(operator_args(docs), "--coordinator-url") == "https://coordinator.example.net:9094"


def check_no_pdb(docs: list[Obj]) -> None:
    assert not find(docs, "PodDisruptionBudget", "berth-coordinator")


def check_one_operator(docs: list[Obj]) -> None:
    """Without leader election exactly one operator runs, replaced by Recreate: nothing to elect, nothing to keep."""
    deployment = one(docs, "Deployment", "berth-operator")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "--leader-elect" not in operator_args(docs)
    assert not find(docs, "PodDisruptionBudget", "berth-operator") and not find(docs, "Role", "berth-operator-lease")


def check_maintenance_pdb(docs: list[Obj]) -> None:
    pdb = one(docs, "PodDisruptionBudget", "berth-coordinator")
    assert pdb["spec"]["maxUnavailable"] == 0
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "IfHealthyBudget"


def check_liveness_off(docs: list[Obj]) -> None:
    operator = container(docs, "Deployment", "berth-operator")
    assert "livenessProbe" not in operator and [p["name"] for p in operator["ports"]] == ["metrics"]
    assert arg_after(operator["args"], "--liveness-port") == "0"


def check_image_digest(docs: list[Obj]) -> None:
    for name, spec in pod_specs(docs):
        # The analytics job runs from its own image (pyspark and Java), pinned the same way.
        image = "berth-analytics" if name == "CronJob/berth-analytics" else "berth"
        assert {c["image"] for c in spec["containers"]} == {f"registry.example.net/{image}@{DIGEST}"}, name
        assert {c["imagePullPolicy"] for c in spec["containers"]} == {"Always"}, name
        assert spec["imagePullSecrets"] == [{"name": "regcred"}], name


def check_coordinator_tuning(docs: list[Obj]) -> None:
    args = coordinator_args(docs)
    assert arg_after(args, "--group-max-size") == "50"
    assert arg_after(args, "--group-min-session-timeout-ms") == "10000"
    assert arg_after(args, "--max-stored-bytes") == "402653184"  # with a larger memory limit, more kept
    assert arg_after(args, "--metrics-max-groups-per-token") == "0"
    assert arg_after(args, "--log-level") == "debug"
    claim = one(docs, "StatefulSet")["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "fast-ssd"
    assert claim["resources"]["requests"]["storage"] == "5Gi"
    operator = operator_args(docs)
    assert (arg_after(operator, "--session-min-ms"), arg_after(operator, "--session-max-ms")) == ("10000", "600000")
    assert arg_after(operator, "--log-format") == "text"


def check_platform_uids(docs: list[Obj]) -> None:
    for name, spec in pod_specs(docs):
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, name
        assert not {"runAsUser", "runAsGroup", "fsGroup"} & context.keys(), name


def check_no_user_roles(docs: list[Obj]) -> None:
    assert not [d for d in find(docs, "ClusterRole") if "consumerfleets-" in d["metadata"]["name"]]


def check_tls_from_a_secret(docs: list[Obj]) -> None:
    """The coordinator serves HTTPS from the given Secret; every client uses https and verifies with the CA, which
    comes from the same Secret's ca.crt and nothing else of it."""
    coordinator = container(docs, "StatefulSet", "berth-coordinator")
    args = coordinator["args"]
    assert (arg_after(args, "--tls-cert-file"), arg_after(args, "--tls-key-file")) == (
        "/etc/berth/tls/tls.crt",
        "/etc/berth/tls/tls.key",
    )
    pod = one(docs, "StatefulSet", "berth-coordinator")["spec"]["template"]["spec"]
    tls = next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]
    assert tls["secretName"] == "coordinator-cert"
    assert {(i["key"], i["path"]) for i in tls["items"]} == {("tls.crt", "tls.crt"), ("tls.key", "tls.key")}
    mount = next(m for m in coordinator["volumeMounts"] if m["name"] == "tls")
    assert mount["mountPath"] == "/etc/berth/tls" and "subPath" not in mount  # a subPath never sees a renewal
    # Probes stay on the plain probe port: the kubelet needs no CA.
    assert coordinator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert arg_after(operator_args(docs), "--coordinator-url") == "https://berth-coordinator.berth:9094"
    assert arg_after(operator_args(docs), "--coordinator-ca-file") == "/etc/berth/ca/ca.crt"
    operator = container(docs, "Deployment", "berth-operator")
    assert "BERTH_CA_FILE" not in {e["name"] for e in operator.get("env") or []}  # the flag says it
    for name, spec in pod_specs(docs):
        if name.startswith("StatefulSet/"):
            continue
        ca = next(v for v in spec["volumes"] if v["name"] == "coordinator-ca")["secret"]
        assert ca["secretName"] == "coordinator-cert", name
        assert ca["items"] == [{"key": "ca.crt", "path": "ca.crt"}], f"{name}: only the CA, never the key"
        mounts = {m["name"]: m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
        assert mounts["coordinator-ca"] == "/etc/berth/ca", name
    analyze = container(docs, "CronJob", "berth-analytics")["args"]
    assert arg_after(analyze, "--journal-url") == "https://berth-coordinator.berth:9094"
    assert arg_after(analyze, "--ca-file") == "/etc/berth/ca/ca.crt"
    analyze_parser().parse_args(analyze[1:])
    test_pod = one(docs, "Pod", "berth-coordinator-test")["spec"]
    test = test_pod["containers"][0]["args"]
    assert arg_after(test, "--ca-file") == "/etc/berth/ca/ca.crt" and test[-1] == "list"
    assert test_pod["volumes"] == [
        {
            "name": "coordinator-ca",
            "secret": {
                "secretName": "coordinator-cert",
                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                "defaultMode": 0o444,
            },
        }
    ]
    assert one(docs, "Service", "berth-coordinator")["spec"]["ports"][0]["appProtocol"] == "https"


def check_tls_from_cert_manager(docs: list[Obj]) -> None:
    certificate = one(docs, "Certificate", "berth-coordinator")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    spec = certificate["spec"]
    assert spec["secretName"] == "berth-coordinator-tls"
    # Every name a client may use for the Service.
    assert spec["dnsNames"] == [
        "berth-coordinator",
        "berth-coordinator.berth",
        "berth-coordinator.berth.svc",
        "berth-coordinator.berth.svc.cluster.local",
    ]
    assert spec["issuerRef"] == {"name": "berth-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert spec["privateKey"]["rotationPolicy"] == "Always"
    pod = one(docs, "StatefulSet", "berth-coordinator")["spec"]["template"]["spec"]
    assert next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]["secretName"] == "berth-coordinator-tls"
    operator = one(docs, "Deployment", "berth-operator")["spec"]["template"]["spec"]
    ca = next(v for v in operator["volumes"] if v["name"] == "coordinator-ca")["secret"]
    assert ca == {
        "secretName": "berth-coordinator-tls",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
        "defaultMode": 0o444,
    }
    check_service_monitor(docs)


def check_external_coordinator_over_tls(docs: list[Obj]) -> None:
    assert not find(docs, "StatefulSet") and not find(docs, "Certificate")
    assert arg_after(operator_args(docs), "--coordinator-url") == "https://coordinator.example.net:9094"
    operator = one(docs, "Deployment", "berth-operator")["spec"]["template"]["spec"]
    ca = next(v for v in operator["volumes"] if v["name"] == "coordinator-ca")["secret"]
    assert ca["secretName"] == "coordinator-ca-bundle" and ca["items"] == [{"key": "bundle.pem", "path": "ca.crt"}]


def check_probes_open_to_prometheus(docs: list[Obj]) -> None:
    rules = one(docs, "NetworkPolicy", "berth-coordinator")["spec"]["ingress"]
    assert [r["ports"] for r in rules] == [[{"port": 9094, "protocol": "TCP"}], [{"port": 9095, "protocol": "TCP"}]]
    assert rules[1]["from"] == [PROMETHEUS]  # the probe port: nobody else, fleet pods included
    assert PROMETHEUS in rules[0]["from"]


def check_ha(docs: list[Obj]) -> None:
    """Replicas on etcd: no data volume, the etcd the chart installs, limits that agree on both sides, readiness every
    second (only the active replica is Ready), spread over nodes, and no budget that would pin the active replica."""
    statefulset = one(docs, "StatefulSet", "berth-coordinator")
    spec = statefulset["spec"]
    assert (spec["replicas"], spec["podManagementPolicy"], spec["updateStrategy"]) == (
        2,
        "Parallel",
        {"type": "OnDelete"},
    )
    assert "volumeClaimTemplates" not in spec
    coordinator = container(docs, "StatefulSet", "berth-coordinator")
    args = coordinator["args"]
    assert "--data-dir" not in args and not any(m["mountPath"] == "/var/lib/berth" for m in coordinator["volumeMounts"])
    member_args = container(docs, "StatefulSet", "berth-etcd")["args"]
    etcd_flag = {a.split("=", 1)[0]: [*a.split("=", 1), ""][1] for a in member_args}
    assert arg_after(args, "--etcd-max-txn-ops") == etcd_flag["--max-txn-ops"] == "131072"
    assert arg_after(args, "--etcd-max-request-bytes") == etcd_flag["--max-request-bytes"] == "16777216"
    members = [f"berth-etcd-{i}.berth-etcd.{NAMESPACE}.svc" for i in range(3)]
    # Clients and peers over TLS, each with a certificate (tests/chart/test_chart_etcd_tls.py starts it for real).
    assert arg_after(args, "--etcd-endpoints") == ",".join(f"https://{m}:2379" for m in members)
    assert etcd_flag["--initial-cluster"] == ",".join(f"berth-etcd-{i}=https://{m}:2380" for i, m in enumerate(members))
    assert etcd_flag["--advertise-client-urls"] == f"https://$(POD_NAME).berth-etcd.{NAMESPACE}.svc:2379"
    assert {"--client-cert-auth", "--peer-client-cert-auth"} <= set(member_args)
    assert (arg_after(args, "--etcd-ca-file"), arg_after(args, "--etcd-cert-file")) == (
        "/etc/berth/etcd/ca.crt",
        "/etc/berth/etcd/tls.crt",
    )
    assert one(docs, "Secret", "berth-etcd-tls") and one(docs, "Secret", "berth-etcd-client-tls")
    assert (arg_after(args, "--etcd-prefix"), arg_after(args, "--etcd-lease-ttl-s")) == ("/berth/", "5")
    assert arg_after(args, "--replica-name") == "$(POD_NAME)"
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in coordinator["env"]
    parsed = coordinator_parser().parse_args(args[1:])  # the real command line takes them ...
    replication = replication_config(parsed)
    assert replication is not None and replication.problems(parsed.group_metadata_max_bytes) == []  # ... and starts
    readiness = coordinator["readinessProbe"]
    assert (readiness["periodSeconds"], readiness["failureThreshold"], readiness["timeoutSeconds"]) == (1, 1, 1)
    pod = spec["template"]
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert selects(term["podAffinityTerm"]["labelSelector"], pod["metadata"]["labels"])
    assert not find(docs, "PodDisruptionBudget", "berth-coordinator")
    etcd = one(docs, "StatefulSet", "berth-etcd")
    etcd_pod = etcd["spec"]["template"]["metadata"]["labels"]
    assert (etcd["spec"]["replicas"], etcd["spec"]["podManagementPolicy"]) == (3, "Parallel")
    assert [t["metadata"]["name"] for t in etcd["spec"]["volumeClaimTemplates"]] == ["data"]
    budget = one(docs, "PodDisruptionBudget", "berth-etcd")["spec"]
    assert budget["maxUnavailable"] == 1 and selects(budget["selector"], etcd_pod)
    headless = one(docs, "Service", "berth-etcd")["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert selects({"matchLabels": headless["selector"]}, etcd_pod)
    (client, peer) = one(docs, "NetworkPolicy", "berth-etcd")["spec"]["ingress"]
    assert client["ports"] == [{"port": 2379, "protocol": "TCP"}] and peer["ports"] == [
        {"port": 2380, "protocol": "TCP"}
    ]
    assert any(selects(p["podSelector"], pod["metadata"]["labels"]) for p in client["from"])
    assert not any(selects(p["podSelector"], {"berth.dev/fleet": "orders"}) for p in client["from"])
    assert [selects(p["podSelector"], etcd_pod) for p in peer["from"]] == [True]
    assert not find(docs, "Job")


def check_ha_copy(docs: list[Obj]) -> None:
    assert one(docs, "StatefulSet", "berth-coordinator")["spec"]["replicas"] == 0
    job = one(docs, "Job", "berth-coordinator-copy-to-etcd")
    copy = job["spec"]["template"]["spec"]["containers"][0]
    assert copy["args"][:2] == ["berth-coordinator", "copy-to-etcd"]
    copy_parser().parse_args(copy["args"][2:])
    assert arg_after(copy["args"], "--data-dir") == "/var/lib/berth"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-berth-coordinator-0"}} in job["spec"][
        "template"
    ]["spec"]["volumes"]
    (client, _) = one(docs, "NetworkPolicy", "berth-etcd")["spec"]["ingress"]
    assert any(selects(p["podSelector"], job["spec"]["template"]["metadata"]["labels"]) for p in client["from"])


def check_ha_required_spread(docs: list[Obj]) -> None:
    pod = one(docs, "StatefulSet", "berth-coordinator")["spec"]["template"]
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and selects(term["labelSelector"], pod["metadata"]["labels"])
    assert one(docs, "StatefulSet", "berth-coordinator")["spec"]["replicas"] == 3


def check_fullname_override(docs: list[Obj]) -> None:
    assert one(docs, "Deployment", "shop-operator")
    assert one(docs, "StatefulSet", "shop-coordinator")
    assert arg_after(container(docs, "Deployment", "shop-operator")["args"], "--coordinator-url") == (
        "https://shop-coordinator.berth:9094"
    )


def check_everything(docs: list[Obj]) -> None:
    check_namespace_scope(docs)
    check_service_monitor(docs)
    check_group_tokens(docs)
    # Namespace scope + analytics: the advice rule joins the operator's Role instead of a second Role.
    rules = one(docs, "Role", "berth-operator")["rules"]
    assert {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["berth-advice"],
        "verbs": ["get", "list", "watch"],
    } in rules
    assert not find(docs, "Role", "berth-operator-advice")


@dataclass(frozen=True)
class Case:
    id: str
    values: Obj
    check: Callable[[list[Obj]], None]


GROUP_TOKENS = [
    {"name": "orders", "groups": ["orders", "orders-*"]},
    {"name": "ops", "groups": ["*"], "admin": True},
]
SERVICE_MONITOR = {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}}
PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}

CASES = [
    Case("defaults", {}, check_defaults),
    Case("namespace-scope", {"operator": {"scope": "namespace"}}, check_namespace_scope),
    Case("analytics", {"analytics": {"enabled": True, "timeZone": "Europe/Berlin"}}, check_analytics),
    Case("service-monitor", {"metrics": SERVICE_MONITOR}, check_service_monitor),
    Case(
        "monitoring",
        {
            "monitoring": {
                "dashboard": {"enabled": True, "annotations": {"grafana_folder": "Berth"}},
                "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            }
        },
        check_monitoring,
    ),
    Case(
        "dashboard-label",
        {"monitoring": {"dashboard": {"enabled": True, "label": "berth.dev/dashboard", "labelValue": "berth"}}},
        check_dashboard_label,
    ),
    Case("existing-secret", {"auth": {"existingSecret": "my-tokens"}}, check_existing_secret),
    Case("group-tokens", {"auth": {"groupTokens": GROUP_TOKENS}}, check_group_tokens),
    Case(
        "external-coordinator",
        {
            "coordinator": {"enabled": False, "tls": {"enabled": False}},
            "operator": {"coordinatorUrl": "https://coordinator.example.net:9094"},
            "auth": {"existingSecret": "external-coordinator-token"},
        },
        check_external_coordinator,
    ),
    Case("no-pdb", {"coordinator": {"podDisruptionBudget": {"enabled": False}}}, check_no_pdb),
    Case("one-operator", {"operator": {"replicas": 1, "leaderElection": {"enabled": False}}}, check_one_operator),
    Case("no-network-policies", {"networkPolicy": {"enabled": False}}, check_no_network_policies),
    Case(
        "trusted-coordinators",
        {
            "operator": {
                "trustedCoordinators": ["http://orders-coordinator.team-a:9094", "https://coordinator.example.net:9443"]
            }
        },
        check_trusted_coordinators,
    ),
    Case(
        "maintenance-pdb",
        {
            "coordinator": {
                "podDisruptionBudget": {"maxUnavailable": 0, "unhealthyPodEvictionPolicy": "IfHealthyBudget"}
            }
        },
        check_maintenance_pdb,
    ),
    Case("liveness-off", {"operator": {"livenessPort": 0}}, check_liveness_off),
    Case(
        "image-digest",
        {
            "image": {"repository": "registry.example.net/berth", "digest": DIGEST, "pullPolicy": "Always"},
            "imagePullSecrets": [{"name": "regcred"}],
            "analytics": {
                "enabled": True,
                "image": {
                    "repository": "registry.example.net/berth-analytics",
                    "tag": "",
                    "digest": DIGEST,
                    "pullPolicy": "",
                },
            },
        },
        check_image_digest,
    ),
    Case(
        "coordinator-tuning",
        {
            "coordinator": {
                "groupMaxSize": 50,
                "groupMinSessionTimeoutMs": 10000,
                "maxStoredBytes": 402653184,
                "metricsMaxGroupsPerToken": 0,
                "logLevel": "debug",
                "persistence": {"size": "5Gi", "storageClassName": "fast-ssd"},
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "berth", "effect": "NoSchedule"}],
            },
            "operator": {
                "sessionMinMs": 10000,
                "sessionMaxMs": 600000,
                "logFormat": "text",
                "extraEnv": [{"name": "KOPF_VERBOSE", "value": "1"}],
                "priorityClassName": "system-cluster-critical",
            },
        },
        check_coordinator_tuning,
    ),
    Case(
        "platform-assigned-uids",
        {"podSecurity": {"runAsUser": None, "runAsGroup": None, "fsGroup": None}, "analytics": {"enabled": True}},
        check_platform_uids,
    ),
    Case("no-user-roles", {"rbac": {"aggregateToDefaultRoles": False}}, check_no_user_roles),
    Case("fullname-override", {"fullnameOverride": "shop"}, check_fullname_override),
    Case("ha", {"coordinator": {"ha": {"enabled": True}}}, check_ha),
    Case(
        "ha-copy-from-sqlite",
        {"coordinator": {"ha": {"enabled": True, "replicas": 0, "copyFromClaim": "data-berth-coordinator-0"}}},
        check_ha_copy,
    ),
    Case(
        "ha-required-spread",
        {"coordinator": {"ha": {"enabled": True, "replicas": 3, "antiAffinity": "required"}}},
        check_ha_required_spread,
    ),
    Case(
        "tls-from-a-secret",
        {"coordinator": {"tls": {"enabled": True, "secretName": "coordinator-cert"}}, "analytics": {"enabled": True}},
        check_tls_from_a_secret,
    ),
    Case(
        "tls-from-cert-manager",
        {
            "coordinator": {
                "tls": {
                    "enabled": True,
                    "certManager": {"enabled": True, "issuerRef": {"name": "berth-ca", "kind": "ClusterIssuer"}},
                }
            },
            "metrics": SERVICE_MONITOR,
        },
        check_tls_from_cert_manager,
    ),
    Case(
        "external-coordinator-over-tls",
        {
            "coordinator": {
                "enabled": False,
                "tls": {"enabled": True, "caSecretName": "coordinator-ca-bundle", "caKey": "bundle.pem"},
            },
            "operator": {"coordinatorUrl": "https://coordinator.example.net:9094"},
            "auth": {"existingSecret": "external-coordinator-token"},
        },
        check_external_coordinator_over_tls,
    ),
    Case(
        "probes-open-to-prometheus",
        {"networkPolicy": {"coordinator": {"extraIngressFrom": [PROMETHEUS]}}},
        check_probes_open_to_prometheus,
    ),
    Case(
        "everything",
        {
            "operator": {"scope": "namespace"},
            "analytics": {"enabled": True},
            "metrics": SERVICE_MONITOR,
            "auth": {"groupTokens": GROUP_TOKENS},
            "commonLabels": {"team": "streaming"},
        },
        check_everything,
    ),
]
IDS = [case.id for case in CASES]

#: Kinds the tests' API server does not serve (no Prometheus Operator, no cert-manager); their checks look instead.
NOT_SERVED = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("cert-manager.io/v1", "Certificate"),
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition"}
STANDARD_LABELS = {
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_helm_lint_strict_passes(case: Case) -> None:
    result = run_helm(["lint", "--strict", "--namespace", NAMESPACE, str(ROOT / "charts" / "berth")], case.values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_option_has_its_documented_effect(case: Case) -> None:
    case.check(render(case.values))


@pytest.mark.kube
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_object_is_accepted_by_a_real_api_server(case: Case, kube: Kube) -> None:
    """Every rendered object passes the server's own validation (``--dry-run=server``: nothing is stored), under a
    release and namespace of its own so that nothing collides with other tests' objects. A dry run creates no
    namespace, so the records' (``operator.groupOwners.namespace``, created by an install) must exist."""
    kube.create_namespace("render-check")
    kube.create_namespace("berth-group-owners")
    docs = render(case.values, release="render-check", namespace="render-check")
    # That namespace exists now: an install's lookup finds it and renders no Namespace (an offline render cannot).
    docs = [d for d in docs if d["kind"] != "Namespace"]
    result = kube.dry_run([d for d in docs if (d["apiVersion"], d["kind"]) not in NOT_SERVED])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_object_is_labelled_and_placed(case: Case) -> None:
    for doc in render(case.values):
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        labels = doc["metadata"].get("labels") or {}
        assert labels.keys() >= STANDARD_LABELS, f"{name} lacks {STANDARD_LABELS - labels.keys()}"
        assert labels["app.kubernetes.io/instance"] == "berth", name
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"], name
        elif doc["metadata"]["name"].endswith("-group-owners"):
            # The owner records of Kafka groups: in the namespace every install shares (operator.groupOwners).
            assert doc["metadata"]["namespace"] == "berth-group-owners", name
        else:
            assert doc["metadata"]["namespace"] == NAMESPACE, name
        assert len(doc["metadata"]["name"]) <= 63, name
        for key, value in (case.values.get("commonLabels") or {}).items():
            assert labels.get(key) == value, name


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_no_rbac_rule_uses_a_wildcard(case: Case) -> None:
    for doc in render(case.values):
        for rule in doc.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in (rule.get(field) or []), f"{doc['kind']}/{doc['metadata']['name']}: {rule}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_pod_meets_the_restricted_pod_security_standard(case: Case) -> None:
    for name, spec in pod_specs(render(case.values)):
        assert restricted_violations(spec) == [], name
        for c in spec["containers"]:
            # Beyond "restricted": a read-only root filesystem, so every writable path is a volume.
            assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
            assert "/tmp" in {m["mountPath"] for m in c.get("volumeMounts", [])}, f"{name}: no writable /tmp"
            # Requests for scheduling, and a memory limit, for every container.
            assert {"cpu", "memory"} <= c["resources"]["requests"].keys(), name
            assert "memory" in c["resources"]["limits"], name


def test_pod_security_check_finds_a_violation() -> None:
    _, spec = next(pod_specs(render({})))
    spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    spec["securityContext"].pop("seccompProfile")
    spec["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    problems = "\n".join(restricted_violations(spec))
    assert "allowPrivilegeEscalation" in problems and "seccomp" in problems and "volume host" in problems


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_file_argument_is_mounted_from_the_right_secret_key(case: Case) -> None:
    """Every file argument points into a Secret volume that projects the key it needs."""
    wanted = {
        "--token-file": {"/etc/berth/admin/token": "admin-token", "/etc/berth/analytics/token": "analytics-token"},
        "--tokens-file": {"/etc/berth/tokens/tokens.yaml": "tokens.yaml"},
        "--tls-cert-file": {"/etc/berth/tls/tls.crt": "tls.crt"},
        "--tls-key-file": {"/etc/berth/tls/tls.key": "tls.key"},
        "--ca-file": {
            "/etc/berth/ca/ca.crt": (case.values.get("coordinator") or {}).get("tls", {}).get("caKey", "ca.crt")
        },
    }
    for name, spec in pod_specs(render(case.values)):
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for c in spec["containers"]:
            mounts = {m["mountPath"]: volumes[m["name"]] for m in c.get("volumeMounts", []) if m["name"] in volumes}
            for flag, keys in wanted.items():
                path = arg_after(c["args"], flag)
                if path is None:
                    continue
                assert path in keys, f"{name}: {flag} {path} is not a documented place"
                directory, _, filename = path.rpartition("/")
                secret = mounts[directory]["secret"]
                assert {"key": keys[path], "path": filename} in secret["items"], f"{name}: {flag} {path}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_probes_use_the_documented_endpoints(case: Case) -> None:
    docs = render(case.values)
    for statefulset in find(docs, "StatefulSet"):
        if statefulset["metadata"]["labels"]["app.kubernetes.io/component"] != "coordinator":
            continue  # etcd (coordinator.ha): check_ha
        coordinator = container(docs, "StatefulSet", statefulset["metadata"]["name"])
        # The probe listener: answered while the API port is at its connection limit (docs/api.md §10 "Probes").
        assert coordinator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
        assert coordinator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
        assert coordinator["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
        assert {p["name"] for p in coordinator["ports"]} == {"http", "probes"}
        probes = next(p["containerPort"] for p in coordinator["ports"] if p["name"] == "probes")
        assert arg_after(coordinator["args"], "--probe-port") == str(probes)
    operator = container(docs, "Deployment", operator_name(docs))
    ports = {p["name"]: p["containerPort"] for p in operator.get("ports", [])}
    if arg_after(operator["args"], "--liveness-port") != "0":
        assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "liveness"}
        assert ports.pop("liveness") == int(arg_after(operator["args"], "--liveness-port") or 0)
    if arg_after(operator["args"], "--metrics-port") != "0":
        assert ports.pop("metrics") == int(arg_after(operator["args"], "--metrics-port") or 0)
    assert ports == {}


def operator_name(docs: list[Obj]) -> str:
    name: str = one(docs, "Deployment")["metadata"]["name"]
    return name


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_commands_are_console_scripts_of_the_package(case: Case) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for name, spec in pod_specs(render(case.values)):
        for c in spec["containers"]:
            if c["name"] == "etcd":
                continue  # etcd's own image (coordinator.ha): its one command is etcd (check_ha)
            # args, not command: the image's ENTRYPOINT (tini) must stay PID 1.
            assert "command" not in c, name
            assert c["args"][0] in scripts, f"{name}: {c['args'][0]} is not in [project.scripts]"


@pytest.mark.parametrize("case", [c for c in CASES if "existingSecret" not in json.dumps(c.values)], ids=lambda c: c.id)
def test_generated_tokens_appear_only_in_their_secret(case: Case) -> None:
    docs = render(case.values)
    secret = tokens_secret(docs)
    tokens = [v for k, v in secret_strings(secret).items() if k != "tokens.yaml"]
    assert tokens and all(len(t) == 48 and t.isalnum() for t in tokens)
    others = yaml.safe_dump_all([d for d in docs if d is not secret])
    encoded = {t: base64.b64encode(t.encode()).decode() for t in tokens}
    leaked = [t[:6] + "..." for t in tokens if t in others or encoded[t] in others]
    assert not leaked, f"tokens in plain text outside the Secret: {leaked}"


def test_tokens_are_random_per_render_but_notes_never_show_them() -> None:
    """`helm install --dry-run=client` renders NOTES.txt too; neither the tokens nor their base64 may be in it."""
    values: Obj = {"auth": {"groupTokens": GROUP_TOKENS}}
    result = run_helm(
        ["install", "berth", str(ROOT / "charts" / "berth"), "--namespace", NAMESPACE, "--dry-run=client"], values
    )
    assert result.returncode == 0, result.stderr
    manifest, _, notes = result.stdout.partition("NOTES:")
    assert "kubectl -n berth get cf -w" in notes and "describe cf orders" in notes
    assert "involvedObject.kind=ConsumerFleet" in notes
    # The first fleet the notes offer is copy-pastable as a heredoc (tests/kube applies it to a real server).
    fleet = yaml.safe_load(notes.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0])
    assert fleet["spec"]["coordinator"]["tokenSecretRef"] == {"name": "orders-token", "key": "token"}
    assert "jsonpath='{.data.token-orders}'" in notes
    secret = tokens_secret([d for d in yaml.safe_load_all(manifest.split("MANIFEST:")[-1]) if d])
    for key, encoded in secret["data"].items():
        assert encoded not in notes, key
        assert secret_strings(secret)[key] not in notes, key
    # A second render draws new tokens: nothing is hard-coded in the chart.
    again = tokens_secret(render(values))
    assert secret_strings(again)["admin-token"] != secret_strings(secret)["admin-token"]


def test_crds_are_shipped_in_the_chart_not_templated() -> None:
    """Helm installs crds/ before the templates and never deletes them; the templates must not repeat them."""
    assert not find(render({}), "CustomResourceDefinition")
    result = run_helm(["show", "crds", str(ROOT / "charts" / "berth")])
    assert result.returncode == 0, result.stderr
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout) if d] == ["consumerfleets.berth.dev"]


@pytest.mark.kube
def test_the_server_check_rejects_a_misspelt_field_and_a_wrong_type(kube: Kube) -> None:
    """The check above can fail: the server refuses an unknown field and a wrong type, naming them."""
    kube.create_namespace("render-check")
    deployment = one(render({}, release="render-check", namespace="render-check"), "Deployment")
    context: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    context["readOnlyRootFileSystem"] = True
    assert "readOnlyRootFileSystem" in kube.dry_run([deployment]).stderr
    deployment["spec"]["replicas"] = "1"
    assert "spec.replicas" in kube.dry_run([deployment]).stderr


def test_release_name_and_namespace_flow_into_names() -> None:
    result = run_helm(template_args(release="prod", namespace="streaming"))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert one(docs, "Deployment", "prod-operator")["metadata"]["namespace"] == "streaming"
    assert one(docs, "StatefulSet", "prod-coordinator")
    args = container(docs, "Deployment", "prod-operator")["args"]
    assert arg_after(args, "--coordinator-url") == "https://prod-coordinator.streaming:9094"


def test_longest_release_name_keeps_every_name_within_kubernetes_limits() -> None:
    """Helm allows 53-character release names; the chart shortens its prefix so that every name stays a valid
    label value (63) and the StatefulSet's pods can carry their controller-revision-hash label (name + 11)."""
    release = "r" * 53
    result = run_helm([*template_args(release=release)], {"analytics": {"enabled": True}})
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    for doc in docs:
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]
    (statefulset,) = find(docs, "StatefulSet")
    assert len(statefulset["metadata"]["name"]) + 11 <= 63
