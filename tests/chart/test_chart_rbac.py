"""The operator's RBAC rules are exactly what its code needs: derived from the source by rbac_scan, compared with
the chart's rendered rules in both scopes."""

from __future__ import annotations

import textwrap

import pytest
from chart_helpers import ROOT, crd, render
from support.rbac_scan import (
    KOPF_CLUSTER_ONLY,
    KOPF_IMPLICIT,
    Permission,
    granted_permissions,
    needed_permissions,
    resource_names,
    scan_sources,
    scan_tree,
)

pytestmark = pytest.mark.tools

OPERATOR_TREE = ROOT / "operator" / "berth" / "operator"
RESOURCES = resource_names([crd()])

NAMES_MODULE = textwrap.dedent(
    """
    GROUP = "berth.dev"
    VERSION = "v1alpha1"
    PLURAL = "consumerfleets"
    """
)

HANDLERS_MODULE = textwrap.dedent(
    """
    import asyncio
    import functools

    import kopf
    import kubernetes
    from kubernetes import client, watch

    from berth.operator.spec.names import GROUP, PLURAL, VERSION


    @kopf.on.create("berth.dev", "v1alpha1", "consumerfleets")
    async def created(spec, **_):
        return {"message": "created"}  # Kopf stores it in status.created


    @kopf.on.event("pods", labels={"app.kubernetes.io/name": "berth"})
    def pod_changed(event, **_):
        pass


    @kopf.timer("consumerfleets.berth.dev", interval=10)
    def mirror(patch, **_):
        patch.status["group"] = {}


    @kopf.on.delete(GROUP, VERSION, PLURAL)
    def deleted(**_):
        kopf.info({}, reason="Deleted", message="left the group: orders-0")


    class Workload:
        def __init__(self, api_client):
            self.core = client.CoreV1Api(api_client)
            self.apps = kubernetes.client.AppsV1Api(api_client)
            self.custom = client.CustomObjectsApi(api_client)

        async def create(self, namespace, body):
            await asyncio.to_thread(self.apps.create_namespaced_stateful_set, namespace, body)
            scale = functools.partial(self.apps.patch_namespaced_stateful_set_scale, "n", namespace, {})
            await asyncio.to_thread(scale)

        async def token(self, name, namespace):
            return await asyncio.to_thread(self.core.read_namespaced_secret, name, namespace)

        def pods(self, namespace):
            for event in watch.Watch().stream(self.core.list_namespaced_pod, namespace):
                yield event

        def patch_status(self, namespace, name, body):
            self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, body)

        def reread(self, group, namespace, name):
            return self.custom.get_namespaced_custom_object(group, "v1", namespace, "consumerfleets", name)

        def purge(self, namespace):
            self.core.delete_collection_namespaced_pod(namespace)

        def raw_service(self, namespace, name):
            return self.core.read_namespaced_service_with_http_info(name, namespace)


    CLAIMS = WatchedResource("", "v1", "persistentvolumeclaims")


    def announce(api: client.EventsV1Api, namespace, body):
        api.create_namespaced_event(namespace, body)


    def announce_somehow(recorder, namespace, body):
        recorder.create_namespaced_event(namespace, body)


    def owned(fleet):
        return {"ownerReferences": [{"kind": "ConsumerFleet", "controller": True, "blockOwnerDeletion": True}]}
    """
)


@pytest.fixture(scope="module")
def synthetic() -> object:
    return scan_sources({"names.py": NAMES_MODULE, "handlers.py": HANDLERS_MODULE}, RESOURCES)


def test_scanner_maps_every_construct_to_its_permission(synthetic: object) -> None:
    from support.rbac_scan import ScanResult

    assert isinstance(synthetic, ScanResult)
    assert synthetic.kopf_handlers == 4
    assert synthetic.permissions == {
        # @kopf.on.create / timer / delete on consumerfleets; create returns a value and the timer writes patch.status.
        ("berth.dev", "consumerfleets", "list"),
        ("berth.dev", "consumerfleets", "watch"),
        ("berth.dev", "consumerfleets", "patch"),
        ("berth.dev", "consumerfleets/status", "patch"),
        # @kopf.on.event("pods") and Watch().stream(core.list_namespaced_pod) and delete_collection.
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "deletecollection"),
        # kopf.info
        ("", "events", "create"),
        # the operator's own watch
        ("", "persistentvolumeclaims", "list"),
        ("", "persistentvolumeclaims", "watch"),
        # the annotated EventsV1Api parameter
        ("events.k8s.io", "events", "create"),
        # to_thread(apps.create_namespaced_stateful_set) and partial(apps.patch_namespaced_stateful_set_scale)
        ("apps", "statefulsets", "create"),
        ("apps", "statefulsets/scale", "patch"),
        # to_thread(core.read_namespaced_secret), and a *_with_http_info variant
        ("", "secrets", "get"),
        ("", "services", "get"),
        # the owner reference with blockOwnerDeletion
        ("berth.dev", "consumerfleets/finalizers", "update"),
    }
    # The custom-object status patch resolved GROUP and PLURAL through the names module.
    assert any(
        "patch_namespaced_custom_object_status" in w
        for w in synthetic.evidence[("berth.dev", "consumerfleets/status", "patch")]
    )
    # A group passed as a variable cannot be resolved: reported, never guessed.
    assert [u for u in synthetic.unresolved if "get_namespaced_custom_object" in u], synthetic.unresolved
    # An event recorder of unknown type could be either API: reported, and both counted.
    assert any("create_namespaced_event on recorder" in a for a in synthetic.ambiguous), synthetic.ambiguous


def test_scanner_adds_kopfs_own_needs_only_with_handlers(synthetic: object) -> None:
    from support.rbac_scan import ScanResult

    assert isinstance(synthetic, ScanResult)
    assert set(KOPF_IMPLICIT) <= needed_permissions(synthetic)
    without_handlers = scan_sources({"planner.py": "def plan():\n    return {}\n"}, RESOURCES)
    assert needed_permissions(without_handlers) == set()


def test_scanner_reports_a_selector_it_cannot_resolve() -> None:
    result = scan_sources({"h.py": "import kopf\n@kopf.on.create(some_variable)\ndef f(**_): pass\n"}, RESOURCES)
    assert result.unresolved and "not made of string constants" in result.unresolved[0]


TLS = {"coordinator": {"tls": {"enabled": True, "secretName": "coordinator-cert"}}}


def operator_grants(values: dict[str, object]) -> set[Permission]:
    return granted_permissions(render(values), "berth-operator")


def explain(permissions: set[Permission], evidence: dict[Permission, list[str]] | None = None) -> str:
    lines = []
    for permission in sorted(permissions):
        where = (evidence or {}).get(permission) or [KOPF_IMPLICIT.get(permission, "not needed by any code")]
        lines.append(f"  {permission}: {where[0]}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def operator_scan() -> object:
    return scan_tree(OPERATOR_TREE, RESOURCES)


@pytest.mark.parametrize("scope", ["cluster", "namespace"])
def test_chart_grants_the_operator_exactly_what_its_code_needs(operator_scan: object, scope: str) -> None:
    from support.rbac_scan import ScanResult

    assert isinstance(operator_scan, ScanResult)
    assert operator_scan.kopf_handlers > 0  # the scan found the handlers, whose watches need list and watch
    assert not operator_scan.unresolved, "calls the scanner cannot map:\n" + "\n".join(operator_scan.unresolved)
    needed = needed_permissions(operator_scan)
    if scope == "namespace":
        needed -= KOPF_CLUSTER_ONLY
    # analytics on (the advice and evidence ConfigMaps), TLS and a namespace of Kafka
    # fleets whose Secrets it reads: the widest set of grants.
    widest = {"scope": scope, "kafka": {"secretNamespaces": ["team-a"]}}
    granted = operator_grants({"operator": widest, "analytics": {"enabled": True}, **TLS})
    missing, extra = needed - granted, granted - needed
    assert not missing, "the operator needs, the chart does not grant:\n" + explain(missing, operator_scan.evidence)
    assert not extra, "the chart grants, the operator does not need:\n" + explain(extra)


PLAIN_HTTP = {"coordinator": {"tls": {"enabled": False}}}


def test_default_install_grants_nothing_beyond_the_full_one() -> None:
    """Without analytics the operator is given less (no advice or Kafka evidence ConfigMap), never something else;
    TLS adds nothing (the coordinator's CA travels in the pod template)."""
    full = operator_grants({"analytics": {"enabled": True}})
    plain = operator_grants(PLAIN_HTTP)
    assert plain < full and operator_grants({}) == plain
    assert full - plain == {("", "configmaps", verb) for verb in ("get", "list", "watch", "patch", "create")}


SECRETS_GET = ("", "secrets", "get")


def secret_bindings(values: dict[str, object]) -> set[tuple[str, str | None]]:
    """(kind, namespace) of every binding that gives the operator Secret reads."""
    docs = render(values)
    secret_roles = {
        (d["kind"], d["metadata"]["name"])
        for d in docs
        if d["kind"] in ("Role", "ClusterRole") and any("secrets" in r["resources"] for r in d.get("rules") or [])
    }
    return {
        (d["kind"], d["metadata"].get("namespace"))
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and (d["roleRef"]["kind"], d["roleRef"]["name"]) in secret_roles
        and any(s.get("name") == "berth-operator" for s in d.get("subjects") or [])
    }


def test_a_cluster_wide_install_reads_secrets_only_in_the_namespaces_it_is_given() -> None:
    """No cluster-wide Secret read by default: one RoleBinding per namespace of Kafka fleets (to a ClusterRole an
    administrator can bind for a later one); everywhere only when asked for (secretsClusterWide)."""
    assert secret_bindings({}) == set()
    assert SECRETS_GET not in operator_grants({})
    listed = {"operator": {"kafka": {"secretNamespaces": ["team-a", "team-b"]}}}
    assert secret_bindings(listed) == {("RoleBinding", "team-a"), ("RoleBinding", "team-b")}
    role = next(
        d for d in render({}) if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "berth-operator-kafka-secrets"
    )
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    everywhere = {"operator": {"kafka": {"secretsClusterWide": True}}}
    assert secret_bindings(everywhere) == {("ClusterRoleBinding", None)}
    # Namespaced: the release's namespace's Secrets, in its one Role.
    assert secret_bindings({"operator": {"scope": "namespace"}}) == {("RoleBinding", "berth")}


def configmap_rules(values: dict[str, object]) -> list[tuple[str, str | None, dict[str, object]]]:
    """(kind, namespace, rule) of every rule on ConfigMaps the operator is bound to."""
    return [
        (d["kind"], d["metadata"].get("namespace"), rule)
        for d in render(values)
        if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["name"].startswith("berth-operator")
        for rule in d.get("rules") or []
        if "configmaps" in rule["resources"]
    ]


def test_configmaps_are_granted_only_in_the_release_namespace_by_name_and_never_cluster_wide() -> None:
    """Issue 30: the operator read and wrote every ConfigMap of the cluster (get, list, watch, create, patch, for the
    CA it published in fleet namespaces). Now the CA travels in the pod template: with TLS on or off, whatever the
    scope, no ClusterRole names ConfigMaps; with analytics, a Role in the release namespace reads the advice and
    the evidence journal by name (create alone cannot be limited to a name)."""
    for values in ({}, {"coordinator": {"tls": {"enabled": True, "secretName": "coordinator-cert"}}}, PLAIN_HTTP):
        assert configmap_rules(values) == []
    for scope in ("cluster", "namespace"):
        rules = configmap_rules({"operator": {"scope": scope}, "analytics": {"enabled": True}})
        assert rules and {(kind, namespace) for kind, namespace, _ in rules} == {("Role", "berth")}
        assert all(rule.get("resourceNames") or rule["verbs"] == ["create"] for _, _, rule in rules)


def test_the_owner_records_of_kafka_groups_are_leases_in_one_namespace_and_nothing_more() -> None:
    """get, create and delete on Leases, in the namespace the records are kept in (by default one every install of
    the chart shares, created when missing and kept on uninstall; or the release's)."""
    for values, namespace in (
        ({}, "berth-group-owners"),
        ({"operator": {"groupOwners": {"namespace": "berth-owners"}}}, None),
        ({"operator": {"groupOwners": {"namespace": ""}}}, "berth"),
    ):
        docs = render(values)
        role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "berth-operator-group-owners")
        assert role["metadata"]["namespace"] == (namespace or "berth-owners")
        assert role["rules"] == [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "delete"]}
        ]
        args = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--group-owners-namespace") + 1] == role["metadata"]["namespace"]


def test_namespaced_install_grants_nothing_cluster_scoped() -> None:
    docs = render({"operator": {"scope": "namespace"}, "analytics": {"enabled": True}})
    operator_objects = [d for d in docs if d["metadata"]["name"].startswith("berth-operator")]
    assert {d["kind"] for d in operator_objects} == {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
    }
    cluster_wide = operator_grants({"operator": {"scope": "cluster"}, "analytics": {"enabled": True}})
    namespaced = operator_grants({"operator": {"scope": "namespace"}, "analytics": {"enabled": True}})
    assert cluster_wide - namespaced == KOPF_CLUSTER_ONLY
    assert namespaced - cluster_wide == {SECRETS_GET}  # cluster-wide, Secrets only in the namespaces it is given
