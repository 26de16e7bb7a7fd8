"""Bad values stop `helm install` before anything is rendered, with a message that names the value.

The expected texts are what a user sees from helm: values.schema.json's violations as helm prints them
("at '/operator/scope': value must be one of ..."), and the chart's own `fail` messages for the checks a JSON
schema cannot express (comparisons between two values).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
import yaml
from chart_helpers import ROOT, Obj, run_helm, template_args

pytestmark = [pytest.mark.tools, pytest.mark.usefixtures("helm_bin")]


@dataclass(frozen=True)
class Bad:
    id: str
    values: Obj
    message: str  # must appear in helm's error output


BAD_VALUES = [
    Bad(
        "trusted-coordinator-with-a-path",
        {"operator": {"trustedCoordinators": ["http://c.team:9094/internal?x=1"]}},
        "/operator/trustedCoordinators/0",
    ),
    Bad(
        "misspelt-key",
        {"operater": {"scope": "namespace"}},
        "additional properties 'operater' not allowed",
    ),
    Bad(
        "misspelt-nested-key",
        {"coordinator": {"persistance": {"size": "1Gi"}}},
        "at '/coordinator': additional properties 'persistance' not allowed",
    ),
    Bad(
        "unknown-scope",
        {"operator": {"scope": "global"}},
        "at '/operator/scope': value must be one of 'cluster', 'namespace'",
    ),
    Bad("port-zero", {"coordinator": {"port": 0}}, "at '/coordinator/port': minimum: got 0, want 1"),
    Bad(
        "session-over-kip-345-cap",
        {"coordinator": {"groupMaxSessionTimeoutMs": 3600000}},
        # helm's own number formatting: 3.6x10^6 written with a multiplication sign and superscripts
        "at '/coordinator/groupMaxSessionTimeoutMs': maximum: "
        "got 3.6\u00d710\u2070\u2076, want 1.8\u00d710\u2070\u2076",
    ),
    Bad(
        "pull-policy",
        {"image": {"pullPolicy": "Sometimes"}},
        "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
    ),
    Bad("digest-format", {"image": {"digest": "latest"}}, "at '/image/digest'"),
    Bad("port-as-string", {"coordinator": {"port": "9094"}}, "at '/coordinator/port': got string, want integer"),
    Bad("root-user", {"podSecurity": {"runAsUser": 0}}, "at '/podSecurity/runAsUser': minimum: got 0, want 1"),
    Bad(
        "token-name",
        {"auth": {"groupTokens": [{"name": "Orders!", "groups": ["orders"]}]}},
        "at '/auth/groupTokens/0/name'",
    ),
    Bad(
        "token-without-groups",
        {"auth": {"groupTokens": [{"name": "orders", "groups": []}]}},
        "at '/auth/groupTokens/0/groups': minItems: got 0, want 1",
    ),
    Bad(
        "pdb-evicting-two",
        {"coordinator": {"podDisruptionBudget": {"maxUnavailable": 2}}},
        "at '/coordinator/podDisruptionBudget/maxUnavailable': maximum: got 2, want 1",
    ),
    Bad(
        "schedule",
        {"analytics": {"enabled": True, "schedule": "hourly"}},
        "at '/analytics/schedule'",
    ),
    Bad(
        "external-coordinator-without-url",
        {"coordinator": {"enabled": False}, "auth": {"existingSecret": "tokens"}},
        "at '/operator/coordinatorUrl': minLength: got 0, want 1",
    ),
    Bad(
        "external-coordinator-without-token",
        {"coordinator": {"enabled": False}, "operator": {"coordinatorUrl": "http://c:9094"}},
        "at '/auth/existingSecret': minLength: got 0, want 1",
    ),
    Bad(
        "coordinator-url-scheme",
        {"operator": {"coordinatorUrl": "berth-coordinator:9094"}},
        "at '/operator/coordinatorUrl'",
    ),
    # The chart's own checks (templates/validate.yaml):
    Bad(
        "operator-min-over-max",
        {"operator": {"sessionMinMs": 60000, "sessionMaxMs": 30000}},
        "operator.sessionMinMs (60000) must not exceed operator.sessionMaxMs (30000)",
    ),
    Bad(
        "coordinator-min-over-max",
        {"coordinator": {"groupMinSessionTimeoutMs": 60000, "groupMaxSessionTimeoutMs": 30000}},
        "coordinator.groupMinSessionTimeoutMs (60000) must not exceed coordinator.groupMaxSessionTimeoutMs (30000)",
    ),
    Bad(
        "operator-range-outside-coordinator",
        {"operator": {"sessionMinMs": 2000}},
        "operator.sessionMinMs..sessionMaxMs (2000..1800000) must lie within "
        "coordinator.groupMinSessionTimeoutMs..groupMaxSessionTimeoutMs (6000..1800000)",
    ),
    Bad(
        "two-operators-without-leader-election",
        {"operator": {"replicas": 2, "leaderElection": {"enabled": False}}},
        "operator.replicas is 2: more than one operator replica needs operator.leaderElection.enabled",
    ),
    Bad(
        "renew-deadline-not-under-the-lease",
        {"operator": {"leaderElection": {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}}},
        "operator.leaderElection: retryPeriodSeconds (2) < renewDeadlineSeconds (10) < leaseDurationSeconds (10)",
    ),
    Bad(
        "group-tokens-with-existing-secret",
        {"auth": {"existingSecret": "mine", "groupTokens": [{"name": "orders", "groups": ["orders"]}]}},
        "auth.groupTokens is only used when the chart generates the tokens Secret",
    ),
    Bad(
        "duplicate-token-name",
        {"auth": {"groupTokens": [{"name": "orders", "groups": ["a"]}, {"name": "orders", "groups": ["b"]}]}},
        'auth.groupTokens: the name "orders" appears twice',
    ),
    Bad(
        "adoption-without-groups",
        {"operator": {"adoptGroups": [{"namespace": "shop", "groups": []}]}},
        "at '/operator/adoptGroups/0/groups'",
    ),
    Bad(
        "adoption-of-a-namespace-that-is-not-one",
        {"operator": {"adoptGroups": [{"namespace": "Shop!", "groups": ["orders"]}]}},
        "at '/operator/adoptGroups/0/namespace'",
    ),
    Bad(
        "negative-fleet-bound",
        {"operator": {"maxFleets": -1}},
        "at '/operator/maxFleets': minimum: got -1, want 0",
    ),
    Bad(
        "cert-manager-without-an-issuer",
        {"coordinator": {"tls": {"enabled": True, "certManager": {"enabled": True}}}},
        "coordinator.tls.certManager.issuerRef.name is required",
    ),
    Bad(
        "cert-manager-without-tls",
        {"coordinator": {"tls": {"enabled": False, "certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}}},
        "coordinator.tls.certManager.enabled needs coordinator.tls.enabled",
    ),
    Bad(
        "external-coordinator-over-tls-without-its-ca",
        {
            "coordinator": {"enabled": False, "tls": {"enabled": True}},
            "operator": {"coordinatorUrl": "https://c:9094"},
            "auth": {"existingSecret": "tokens"},
        },
        "needs coordinator.tls.caSecretName",
    ),
    Bad(
        "tls-with-an-http-url",
        {
            "coordinator": {"tls": {"enabled": True, "secretName": "cert"}},
            "operator": {"coordinatorUrl": "http://c:9094"},
        },
        "coordinator.tls.enabled: operator.coordinatorUrl must be https://",
    ),
    Bad(
        "issuer-kind",
        {"coordinator": {"tls": {"certManager": {"issuerRef": {"name": "x", "kind": "Signer", "group": "g"}}}}},
        "at '/coordinator/tls/certManager/issuerRef/kind'",
    ),
    Bad(
        "per-client-negative",
        {"coordinator": {"maxConnectionsPerClient": -1}},
        "at '/coordinator/maxConnectionsPerClient': minimum: got -1, want 0",
    ),
    Bad(
        "service-monitor-without-coordinator",
        {
            "coordinator": {"enabled": False, "tls": {"enabled": False}},
            "operator": {"coordinatorUrl": "http://c:9094"},
            "auth": {"existingSecret": "tokens"},
            "metrics": {"serviceMonitor": {"enabled": True}},
        },
        "metrics.serviceMonitor.enabled needs coordinator.enabled",
    ),
    Bad("ha-even-etcd", {"coordinator": {"ha": {"etcd": {"replicas": 2}}}}, "at '/coordinator/ha/etcd/replicas'"),
    Bad("ha-prefix", {"coordinator": {"ha": {"etcdPrefix": "berth"}}}, "at '/coordinator/ha/etcdPrefix'"),
    Bad("ha-lease", {"coordinator": {"ha": {"leaseTtlSeconds": 1}}}, "at '/coordinator/ha/leaseTtlSeconds'"),
    Bad(
        "ha-small-transactions",
        {"coordinator": {"ha": {"etcd": {"maxTxnOps": 128}}}},
        "at '/coordinator/ha/etcd/maxTxnOps': minimum",
    ),
    Bad(
        "ha-without-coordinator",
        {
            "coordinator": {"enabled": False, "ha": {"enabled": True}, "tls": {"enabled": False}},
            "operator": {"coordinatorUrl": "http://c:9094"},
            "auth": {"existingSecret": "tokens"},
        },
        "coordinator.ha.enabled needs coordinator.enabled",
    ),
    Bad(
        "ha-copy-while-serving",
        {"coordinator": {"ha": {"enabled": True, "copyFromClaim": "data-berth-coordinator-0"}}},
        "coordinator.ha.copyFromClaim needs coordinator.ha.replicas 0",
    ),
]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=[b.id for b in BAD_VALUES])
def test_bad_values_are_refused_with_a_message_naming_them(bad: Bad) -> None:
    result = run_helm(template_args(), bad.values)
    assert result.returncode != 0, f"helm accepted {bad.values}"
    assert bad.message in result.stderr, result.stderr
    assert not result.stdout.strip(), "nothing may be rendered for bad values"


def test_helm_lint_reports_bad_values_too() -> None:
    result = run_helm(["lint", str(template_args()[2])], {"operator": {"scope": "global"}})
    assert result.returncode != 0
    assert "at '/operator/scope': value must be one of 'cluster', 'namespace'" in result.stdout


def test_documented_null_values_are_accepted() -> None:
    """values.yaml documents null for groupMaxSize and storageClassName, and for the platform-assigned UIDs."""
    values: Obj = {
        "coordinator": {"groupMaxSize": None, "persistence": {"storageClassName": None}},
        "podSecurity": {"runAsUser": None},
    }
    result = run_helm(template_args(), values)
    assert result.returncode == 0, result.stderr


# --- values.yaml documents every setting ------------------------------------------------------------------------

VALUES_FILE = ROOT / "charts" / "berth" / "values.yaml"
SCHEMA_FILE = ROOT / "charts" / "berth" / "values.schema.json"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][\w.-]*):(?P<value>.*)$")


def undocumented_keys(text: str) -> list[str]:
    """Keys of values.yaml with no comment of their own. A key is documented by a comment directly above it; by a
    directly preceding sibling that is documented and holds an inline value (a commented group of lines, such as
    nodeSelector/tolerations/affinity); or by a documented parent mapping (the parts of `resources`)."""
    missing: list[str] = []
    documented_at: dict[int, bool] = {}  # indent -> whether the open mapping at that indent is documented
    previous: tuple[int, bool, bool] | None = None  # (indent, documented, inline value) of the previous key line
    commented = False
    path: list[tuple[int, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            commented, previous = False, None
            continue
        if stripped.startswith("#"):
            commented = True
            continue
        match = KEY_LINE.match(line)
        if match is None:
            continue  # a list item or a continuation of a value
        indent, key, value = len(match["indent"]), match["key"], match["value"].strip()
        path = [(i, k) for i, k in path if i < indent] + [(indent, key)]
        parent_documented = any(documented_at.get(i, False) for i, _ in path[:-1])
        group = previous is not None and previous[0] == indent and previous[1] and previous[2]
        documented = commented or group or parent_documented
        inline = bool(value) and not value.startswith("#")
        if not documented and inline:
            missing.append(".".join(k for _, k in path))
        documented_at = {i: d for i, d in documented_at.items() if i < indent}
        documented_at[indent] = documented
        previous, commented = (indent, documented, inline), False
    return missing


def test_every_value_is_documented_by_a_comment() -> None:
    assert undocumented_keys(VALUES_FILE.read_text()) == []


def test_the_documentation_check_finds_an_undocumented_value() -> None:
    text = "# -- a\nalpha: 1\n\nbeta: 2\nparent:\n  # -- c\n  child: 3\n  sibling: 4\n\n  orphan: 5\n"
    assert undocumented_keys(text) == ["beta", "parent.orphan"]


def schema_paths(schema: Obj, prefix: str = "") -> list[str]:
    paths = []
    for name, child in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        paths.append(path)
        if child.get("type") == "object":
            paths += schema_paths(child, f"{path}.")
    return paths


def test_every_schema_setting_appears_in_values_yaml() -> None:
    """Nothing is configurable without being shown (and commented) in values.yaml."""
    values = yaml.safe_load(VALUES_FILE.read_text())
    schema = json.loads(SCHEMA_FILE.read_text())
    absent = []
    for path in schema_paths(schema):
        node: object = values
        for part in path.split("."):
            node = node.get(part, KeyError) if isinstance(node, dict) else KeyError
        if node is KeyError and path != "global":
            absent.append(path)
    assert absent == []
