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
#: Leader election's Lease: a Role in the release namespace, by name (create cannot be limited to a name; list and
#: watch by name are a standby's watch of it, with the metadata.name field selector).
LEASE: frozenset[Permission] = frozenset(
    {("coordination.k8s.io", "leases", verb) for verb in ("get", "list", "watch", "create", "update")}
)
#: The owner records of Kafka groups: Leases, in the records' namespace only (the chart's default, which every install
#: shares).
LEASES: frozenset[Permission] = frozenset(
    {("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "create"),
     ("coordination.k8s.io", "leases", "delete")}
)  # fmt: skip
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
OWNERS = "berth-group-owners"
#: The operator's own ConfigMaps (the advice, the Kafka evidence journal): in the release namespace, by name, with
#: analytics only; none in any fleet's namespace (the coordinator's CA travels in the pod template).
CONFIG_MAPS: frozenset[Permission] = frozenset(
    {("", "configmaps", verb) for verb in ("get", "list", "watch", "create", "patch")}
)
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
    # No ConfigMap anywhere (TLS on by default: the CA is in the pod template; no analytics); the Leases only in the
    # release namespace (the leader's) and the records' namespace; without a RoleBinding in the namespace no Secret
    # may be read there.
    expected = needed() - LEASE - LEASES - SECRETS - CONFIG_MAPS
    assert granted - expected == set(), f"allowed without need: {sorted(granted - expected)}"
    assert expected - granted == set(), f"needed, denied: {sorted(expected - granted)}"
    assert {p for p in allowed(kube, user, OWNERS) if p[1] == "leases"} == LEASES
    assert not {p for p in allowed(kube, user, "berth") if p[1] == "configmaps"}
    # The same answers through kubectl, as a person would ask.
    assert kube.can_i("patch", "consumerfleets.berth.dev/status", as_user=user, namespace=fleets)
    assert not kube.can_i("list", "configmaps", as_user=user, namespace=fleets)
    assert not kube.can_i("get", "configmaps", as_user=user, namespace="kube-system")
    # A Kafka fleet's own principal is read by name (spec.coordinator.kafka.credentialsSecretRef), and only in the
    # namespaces the operator is given (a RoleBinding to the chart's ClusterRole); never listed.
    assert not kube.can_i("get", "secrets", as_user=user, namespace=fleets)
    grant_secret_reads(kube, fleets)
    assert allowed(kube, user, fleets) == needed() - LEASE - LEASES - CONFIG_MAPS
    assert kube.can_i("get", "secrets", as_user=user, namespace=fleets)
    assert not kube.can_i("list", "secrets", as_user=user, namespace=fleets)
    assert not kube.can_i("get", "secrets", as_user=user, namespace="default")
    assert not kube.can_i("delete", "statefulsets.apps", as_user=user, namespace=fleets)
    # Leader election: its own Lease in the release namespace (get, list, watch, update; create, which a name cannot
    # limit); the owner records of Kafka groups: get, create and delete on every Lease of the records' namespace,
    # nowhere else.
    assert lease_verbs(kube, user, "berth", "berth-operator") == {"get", "list", "watch", "create", "update"}
    assert lease_verbs(kube, user, "berth", "another-lease") == {"create"}
    assert lease_verbs(kube, user, OWNERS, "berth-group-0123") == {"get", "create", "delete"}
    assert lease_verbs(kube, user, fleets, "berth-operator") == set()


def test_the_namespaced_install_allows_the_same_in_its_namespace_only(kube: Kube) -> None:
    kube.helm("install", "team", str(CHART), "-n", "team-a", "--create-namespace", "--set", "operator.scope=namespace")
    user = "system:serviceaccount:team-a:team-operator"
    not_leases = {p for p in allowed(kube, user, "team-a") if p[1] != "leases"}
    assert not_leases == {p for p in needed() - KOPF_CLUSTER_ONLY - CONFIG_MAPS if p[1] != "leases"}
    # The leader's Lease: by name (get, list, watch, update) and create; the owner records in the namespace every
    # install shares.
    assert lease_verbs(kube, user, "team-a", "team-operator") == {"get", "list", "watch", "create", "update"}
    assert {p for p in allowed(kube, user, OWNERS) if p[1] == "leases"} == LEASES
    elsewhere = allowed(kube, user, "default")
    assert elsewhere == set(), f"allowed outside its namespace: {sorted(elsewhere)}"
    for verb in ("list", "watch"):
        assert not kube.can_i(verb, "customresourcedefinitions.apiextensions.k8s.io", as_user=user)


def test_the_advice_configmap_is_readable_and_watchable_by_name_only(kube: Kube) -> None:
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


def test_with_tls_the_operator_is_given_no_configmap_in_any_fleet_namespace(kube: Kube) -> None:
    """coordinator.tls.enabled with a certificate of one's own: the CA reaches the fleets' pods in their template, so
    the operator may not read, list, watch or write a ConfigMap of any namespace (issue 30: it could do all of that
    to every ConfigMap of the cluster); everything else as without TLS."""
    kube.helm(
        "install", "secure", str(CHART), "-n", "secure", "--create-namespace",
        "--set", "coordinator.tls.enabled=true", "--set", "coordinator.tls.secretName=coordinator-cert",
    )  # fmt: skip
    fleets = kube.create_namespace("rbac-tls-fleets")
    user = "system:serviceaccount:secure:secure-operator"
    granted = allowed(kube, user, fleets)
    expected = needed() - LEASE - LEASES - SECRETS - CONFIG_MAPS  # Secrets: per namespace (kafka.secretNamespaces)
    assert granted == set(expected), f"differs: {sorted(granted ^ set(expected))}"
    for namespace in (fleets, "secure", "kube-system"):
        assert not {p for p in allowed(kube, user, namespace) if p[1] == "configmaps"}, namespace
