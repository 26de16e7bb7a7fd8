"""What tests/monitoring checks the dashboard and the alert rules against: the metric names a PromQL expression
uses, and the sample names Berth exports (the coordinator's ``FAMILIES``, the operator's).

``metric_names`` is a small scanner, not a PromQL parser: it removes string literals, label matchers, range and
subquery brackets and the label lists of ``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``;
what is left that looks like an identifier, is not followed by ``(`` (a function or an aggregation), is not a
keyword and is not part of a number or a Grafana variable is a metric name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from berth.coordinator.http.metrics import FAMILIES
from berth.operator.adapters.metrics import FAMILIES as OPERATOR_FAMILIES

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
ALERTS = MONITORING / "berth-alerts.yaml"
DASHBOARD = MONITORING / "berth-dashboard.json"

KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "inf", "nan", "atan2",
}  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        before = text[match.start() - 1] if match.start() else " "
        after = text[match.end() :].lstrip()[:1]
        if before in "$.0123456789" or after == "(" or match.group().lower() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def coordinator_samples() -> dict[str, str]:
    """Sample name -> family, for every family ``/metrics`` declares (histograms: ``_bucket``/``_sum``/``_count``)."""
    samples = {}
    for name, (kind, _) in FAMILIES.items():
        for suffix in _HISTOGRAM_SUFFIXES if kind == "histogram" else ("",):
            samples[name + suffix] = name
    return samples


def operator_samples() -> dict[str, str]:
    """Sample name -> family as exposed, for every family the operator declares (``adapters.metrics``)."""
    samples = {}
    for family in OPERATOR_FAMILIES:
        for suffix in _HISTOGRAM_SUFFIXES if family.kind == "histogram" else ("",):
            samples[family.name + suffix] = family.name
    return samples


def exported_samples() -> dict[str, str]:
    return {**coordinator_samples(), **operator_samples()}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included (rows themselves are not panels with queries)."""
    for panel in board["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, expression) for every panel target and every query variable."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            yield f"variable {variable['name']}", inner.group(1) if inner else query


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def rule_queries() -> Iterator[tuple[str, str]]:
    for rule in alert_rules():
        yield f"rule {rule.get('alert') or rule.get('record')}", rule["expr"]
