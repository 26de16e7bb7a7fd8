"""What the dashboard's panels of events draw, evaluated by Prometheus' own engine (``promtool test rules`` with
``promql_expr_test``): every bar is the count of events in its interval, each event counted once, in whole numbers
— one rebalance is one bar of 1, not a 10 s plateau of 0.1/s — including a series born after the first scrape (its
first events too) and a counter reset by a restart (the events after it). The rebalance-duration panel shows each
rebalance's duration at the moment it ended."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from promql_names import dashboard, metric_names, panels

pytestmark = pytest.mark.tools

STEP = "1m"  # promtool's input interval, and the panels' $__interval with it
#: Two series of every counter a bar panel counts, differing in every label a panel groups by: one that grows,
#: stalls and is reset by a restart; one born later with events already counted.
SERIES = (
    (
        {"namespace": "berth", "group": "orders", "cause": "new_member", "exported_namespace": "shop"}
        | {"fleet": "orders", "pod": "berth-coordinator-0"},
        (0, 0, 1, 1, 4, 0, 1),
    ),
    (
        {"namespace": "berth", "group": "payments", "cause": "member_left", "exported_namespace": "bank"}
        | {"fleet": "payments", "pod": "berth-coordinator-1"},
        (None, None, None, 2, 2, 2, 2),
    ),
)


def fill(expr: str) -> str:
    return expr.replace("$__interval", STEP).replace('=~"$namespace"', '=~".*"').replace('=~"$group"', '=~".*"')


def bar_targets() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for panel in panels(dashboard()):
        if ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("custom", {}).get("drawStyle") == "bars":
            found += [(f"{panel['title']} {target['refId']}", target) for target in panel["targets"]]
    return found


def counted(expr: str) -> list[dict[str, Any]]:
    """What the expression should show at each minute: each series' growth since the minute before (a new series
    from 0, a reset from its new start), summed by the expression's ``by`` labels, the zeros left out."""
    by = re.match(r"sum(?: by \(([^)]*)\))?", expr)
    assert by is not None, expr
    keys = [key.strip() for key in (by.group(1) or "").split(",") if key.strip()]
    tests = []
    for minute in range(len(SERIES[0][1])):
        totals: dict[tuple[str, ...], float] = {}
        for labels, values in SERIES:
            now, before = values[minute], values[minute - 1] if minute else None
            if now is None:
                continue
            grown = now if before is None or now < before else now - before
            key = tuple(labels[k] for k in keys)
            totals[key] = totals.get(key, 0) + grown
        samples = [
            {"labels": "{" + ",".join(f'{k}="{v}"' for k, v in zip(keys, key, strict=True)) + "}", "value": value}
            for key, value in sorted(totals.items())
            if value > 0
        ]
        tests.append({"expr": expr, "eval_time": f"{minute}m", "exp_samples": samples})
    return tests


def series_text(metric: str, labels: dict[str, str], values: tuple[float | None, ...]) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": " ".join("_" if v is None else f"{v:g}" for v in values)}


def promtool_test(promtool: str, tmp_path: Path, input_series: list[dict[str, str]], tests: list[Any]) -> str:
    spec = {
        "rule_files": [],
        "evaluation_interval": STEP,
        "tests": [{"interval": STEP, "input_series": input_series, "promql_expr_test": tests}],
    }
    path = tmp_path / "counts.test.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = subprocess.run(
        [promtool, "test", "rules", path.name], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def test_every_bar_counts_the_events_of_its_interval_once(promtool: str, tmp_path: Path) -> None:
    targets = bar_targets()
    assert len(targets) >= 8, targets
    input_series, tests = [], []
    for where, target in targets:
        expr = fill(target["expr"])
        counters = {name for name in metric_names(expr) if name.endswith("_total")}
        if not counters:
            continue  # a gauge drawn beside the counts (the departing members still waiting)
        assert f"offset {STEP}" in expr, f"{where}: a count per interval, not rate() or increase() over a window"
        for metric in counters:
            input_series += [series_text(metric, labels, values) for labels, values in SERIES]
        tests += counted(expr)
    unique = list({s["series"]: s for s in input_series}.values())
    failed = promtool_test(promtool, tmp_path, unique, tests)
    assert not failed, failed


def test_the_counting_is_checked_by_what_prometheus_draws(promtool: str, tmp_path: Path) -> None:
    """The check above can fail: the query it replaced (a rate over a window) draws a plateau, not the events."""
    expr = 'sum by (group) (rate(berth_group_rebalances_total{namespace=~".*"}[5m]))'
    failed = promtool_test(promtool, tmp_path, [series_text("berth_group_rebalances_total", *SERIES[0])], counted(expr))
    assert "expr:" in failed


def test_each_rebalance_shows_its_duration_when_it_ended(promtool: str, tmp_path: Path) -> None:
    (panel,) = [p for p in panels(dashboard()) if p["title"] == "Rebalance duration"]
    labels = {"namespace": "berth", "group": "orders"}
    input_series = []
    for prefix in ("berth_rebalance_duration_seconds", "berth_group_rebalance_duration_seconds"):
        input_series += [
            series_text(f"{prefix}_sum", labels, (0, 0, 2.5, 2.5, 3, 3)),
            series_text(f"{prefix}_count", labels, (0, 0, 1, 1, 2, 2)),
        ]
    expected = {2: 2.5, 4: 0.5}  # a 2.5 s rebalance ended in minute 2, a 0.5 s one in minute 4; none otherwise
    tests = []
    for target in panel["targets"]:
        expr = fill(target["expr"])
        keys = "group" in expr.split("/")[0].split("(")[1]
        for minute in range(6):
            value = expected.get(minute)
            samples = [] if value is None else [{"labels": '{group="orders"}' if keys else "{}", "value": value}]
            tests.append({"expr": expr, "eval_time": f"{minute}m", "exp_samples": samples})
    failed = promtool_test(promtool, tmp_path, input_series, tests)
    assert not failed, failed
