"""The operator's RBAC as the real authorizer decides it: every permission its code needs (derived from the source by
``support.rbac_scan``) is allowed to the chart's ServiceAccount, and every verb it does not need is denied
(``kubectl auth can-i --as=system:serviceaccount:...``), for the cluster-wide and the namespaced install."""

from __future__ import annotations

import functools

import pytest
import yaml
from support.kafka_stage import grant_secret_reads
from support.kube import Kube
from support.kube_cluster import REPO
from support.rbac_scan import KOPF_CLUSTER_ONLY, Permission, needed_permissions, resource_names, scan_tree

pytestmark = pytest.mark.kube

CHART = REPO / "charts" / "berth"
CRD = yaml.safe_load((REPO / "deploy" / "crds" / "consumerfleets.berth.dev.yaml").read_text())
#: Leader election's Lease: a Role in the release namespace, by name (create cannot be limited to a name).
LEASE: frozenset[Permission] = frozenset(
    {("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}
)
#: The owner records of Kafka groups: Leases, in the records' namespace (the release's) only.
LEASES: frozenset[Permission] = frozenset(
    {("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "create"),
     ("coordination.k8s.io", "leases", "delete")}
)  # fmt: skip
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
#: Reading a Kafka fleet's Secrets: cluster-wide, granted per namespace only (operator.kafka.secretNamespaces).
SECRETS: frozenset[Permission] = frozenset({("", "secrets", "get")})
#: Resources the operator must not be able to touch beyond what its code needs, the sensitive ones included.
PROBED: tuple[tuple[str, str], ...] = (
    ("berth.dev", "consumerfleets"),
    ("berth.dev", "consumerfleets/status"),
    ("berth.dev", "consumerfleets/finalizers"),
    ("berth.dev", "consumerfleets/scale"),
    ("apps", "statefulsets"),
    ("apps", "statefulsets/scale"),
    ("apps", "deployments"),
    ("", "services"),
    ("", "pods"),
    ("", "pods/exec"),
    ("", "pods/eviction"),
    ("", "events"),
    ("", "secrets"),
    ("", "configmaps"),
    ("", "serviceaccounts"),
    ("", "serviceaccounts/token"),
    ("", "namespaces"),
    ("", "nodes"),
    ("", "persistentvolumeclaims"),
    ("policy", "poddisruptionbudgets"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("coordination.k8s.io", "leases"),
)


@functools.cache
def needed() -> frozenset[Permission]:
    scan = scan_tree(REPO / "operator" / "berth" / "operator", resource_names([CRD]))
    assert not scan.unresolved, scan.unresolved
    return frozenset(needed_permissions(scan))


def resource_arg(group: str, resource: str) -> str:
    name, _, sub = resource.partition("/")
    qualified = f"{name}.{group}" if group else name
    return f"{qualified}/{sub}" if sub else qualified


def allowed(kube: Kube, user: str, namespace: str) -> set[Permission]:
    """Every probed (group, resource, verb) the authorizer allows ``user`` in ``namespace``."""
    checks = [(group, resource, verb, namespace) for group, resource in PROBED for verb in VERBS]
    return {(g, r, v) for (g, r, v, _), yes in zip(checks, kube.decide(user, checks), strict=True) if yes}


def lease_verbs(kube: Kube, user: str, namespace: str, lease: str) -> set[str]:
    """The verbs ``user`` may use on the Lease named ``lease`` in ``namespace``."""
    checks = [("coordination.k8s.io", f"leases:{lease}", verb, namespace) for verb in VERBS]
    return {verb for (_, _, verb, _), yes in zip(checks, kube.decide(user, checks), strict=True) if yes}


def test_the_cluster_wide_install_allows_exactly_what_the_code_needs(kube: Kube, chart_release: str) -> None:
    fleets = kube.create_namespace("rbac-fleets")
    user = "system:serviceaccount:berth:berth-operator"
    assert {(g, r) for g, r, _ in needed()} <= set(PROBED), "probe every resource the code needs"
    granted = allowed(kube, user, fleets)
    # TLS is on by default: ConfigMaps get, create, patch, list and watch everywhere (the CA each fleet's pods
    # mount, watched like the other objects fleets own); the Leases (the leader's, the owner records) only in the
    # release namespace; without a RoleBinding in the namespace no Secret may be read there.
    expected = needed() - LEASE - LEASES - SECRETS
    assert granted - expected == set(), f"allowed without need: {sorted(granted - expected)}"
    assert expected - granted == set(), f"needed, denied: {sorted(expected - granted)}"
    assert {p for p in allowed(kube, user, "berth") if p[1] == "leases"} == LEASES
    # The same answers through kubectl, as a person would ask.
    assert kube.can_i("patch", "consumerfleets.berth.dev/status", as_user=user, namespace=fleets)
    # A Kafka fleet's own principal is read by name (spec.coordinator.kafka.credentialsSecretRef), and only in the
    # namespaces the operator is given (a RoleBinding to the chart's ClusterRole); never listed.
    assert not kube.can_i("get", "secrets", as_user=user, namespace=fleets)
    grant_secret_reads(kube, fleets)
    assert allowed(kube, user, fleets) == needed() - LEASE - LEASES
    assert kube.can_i("get", "secrets", as_user=user, namespace=fleets)
    assert not kube.can_i("list", "secrets", as_user=user, namespace=fleets)
    assert not kube.can_i("get", "secrets", as_user=user, namespace="default")
    assert not kube.can_i("delete", "statefulsets.apps", as_user=user, namespace=fleets)
    # Leader election: its own Lease in the release namespace (get, update; create, which a name cannot limit); the
    # owner records of Kafka groups add get, create and delete on every Lease there.
    assert lease_verbs(kube, user, "berth", "berth-operator") == {"get", "create", "update", "delete"}
    assert lease_verbs(kube, user, "berth", "another-lease") == {"get", "create", "delete"}
    assert lease_verbs(kube, user, fleets, "berth-operator") == set()


def test_the_namespaced_install_allows_the_same_in_its_namespace_only(kube: Kube) -> None:
    kube.helm("install", "team", str(CHART), "-n", "team-a", "--create-namespace", "--set", "operator.scope=namespace")
    user = "system:serviceaccount:team-a:team-operator"
    not_leases = {p for p in allowed(kube, user, "team-a") if p[1] != "leases"}
    assert not_leases == {p for p in needed() - KOPF_CLUSTER_ONLY if p[1] != "leases"}
    assert {p for p in allowed(kube, user, "team-a") if p[1] == "leases"} == LEASES
    # The leader's Lease: by name (get, update), and the owner records' Role (get, create, delete on any Lease).
    assert lease_verbs(kube, user, "team-a", "team-operator") == {"get", "create", "update", "delete"}
    elsewhere = allowed(kube, user, "default")
    assert elsewhere == set(), f"allowed outside its namespace: {sorted(elsewhere)}"
    for verb in ("list", "watch"):
        assert not kube.can_i(verb, "customresourcedefinitions.apiextensions.k8s.io", as_user=user)


def test_the_advice_configmap_is_readable_and_watchable_by_name_only(kube: Kube) -> None:
    # Without TLS, whose CA ConfigMaps need get, create and patch everywhere.
    kube.helm(
        "install", "advised", str(CHART), "-n", "advised", "--create-namespace", "--set", "analytics.enabled=true",
        "--set", "coordinator.tls.enabled=false",
    )  # fmt: skip
    user = "system:serviceaccount:advised:advised-operator"
    checks = [
        ("", "configmaps:advised-advice", "get", "advised"),
        ("", "configmaps:another", "get", "advised"),
        ("", "configmaps", "list", "advised"),
        ("", "configmaps:advised-advice", "get", "default"),
        ("", "configmaps:advised-kafka-evidence", "patch", "advised"),
        ("", "configmaps:advised-advice", "patch", "advised"),
        ("", "configmaps:advised-advice", "list", "advised"),  # with a field selector on its name, as watched
        ("", "configmaps:advised-advice", "watch", "advised"),
        ("", "configmaps:another", "watch", "advised"),
    ]
    assert kube.decide(user, checks) == [True, False, False, False, True, False, True, True, False]
    assert kube.can_i("get", "configmaps/advised-advice", as_user=user, namespace="advised")


def test_with_tls_the_operator_may_publish_the_ca_configmap_in_fleet_namespaces_and_nothing_more(kube: Kube) -> None:
    """coordinator.tls.enabled: ConfigMaps get, create and patch in every namespace (the CA each fleet's pods mount),
    and list and watch (the operator watches the ones it made, by their labels); never update or delete; everything
    else as without TLS."""
    kube.helm(
        "install", "secure", str(CHART), "-n", "secure", "--create-namespace",
        "--set", "coordinator.tls.enabled=true", "--set", "coordinator.tls.secretName=coordinator-cert",
    )  # fmt: skip
    fleets = kube.create_namespace("rbac-tls-fleets")
    user = "system:serviceaccount:secure:secure-operator"
    granted = allowed(kube, user, fleets)
    expected = needed() - LEASE - LEASES - SECRETS  # Secrets: per namespace granted (operator.kafka.secretNamespaces)
    assert granted == set(expected), f"differs: {sorted(granted ^ set(expected))}"
    assert {v for g, r, v in granted if r == "configmaps"} == {"get", "create", "patch", "list", "watch"}
