"""The alert rules (deploy/monitoring/berth-alerts.yaml) as Prometheus reads them: ``promtool check rules`` accepts
them, and ``promtool test rules`` runs tests/monitoring/*.test.yaml, in which each alert fires on the series it is
for (with the labels and text it promises) and stays silent on a healthy one. Also what docs/monitoring.md promises
of every alert: a ``for:``, a severity, a summary and description, and a runbook section that exists."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from promql_names import ALERTS, ROOT, alert_rules

pytestmark = pytest.mark.tools

HERE = Path(__file__).resolve().parent
TESTS = sorted(HERE.glob("*.test.yaml"))


def run(promtool: str, *args: str, cwd: Path = HERE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def test_promtool_accepts_the_rules(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


@pytest.mark.parametrize("test_file", TESTS, ids=[p.name for p in TESTS])
def test_each_alert_fires_on_its_series_and_not_on_healthy_ones(promtool: str, test_file: Path) -> None:
    result = run(promtool, "test", "rules", test_file.name)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    tested = "\n".join(p.read_text() for p in TESTS)
    for rule in alert_rules():
        assert re.search(rf"alertname: {rule['alert']}\n\s+exp_alerts:\n\s+- exp_labels", tested), rule["alert"]


def test_the_unit_tests_catch_a_broken_rule(promtool: str, tmp_path: Path) -> None:
    """The unit tests can fail: with the journal's age threshold and the stuck-rebalance delay changed, they do."""
    broken = ALERTS.read_text().replace("< 7200", "< 60").replace("for: 5m\n", "for: 30m\n", 1)
    assert broken != ALERTS.read_text()
    (tmp_path / "deploy" / "monitoring").mkdir(parents=True)
    (tmp_path / "deploy" / "monitoring" / ALERTS.name).write_text(broken)
    (tmp_path / "tests" / "monitoring").mkdir(parents=True)
    for test_file in TESTS:
        shutil.copy(test_file, tmp_path / "tests" / "monitoring" / test_file.name)
    result = run(promtool, "test", "rules", *(p.name for p in TESTS), cwd=tmp_path / "tests" / "monitoring")
    assert result.returncode != 0
    assert "BerthJournalNearItsBound" in result.stdout + result.stderr
    assert "BerthGroupStuckRebalancing" in result.stdout + result.stderr


def test_every_alert_says_how_long_how_bad_what_and_where_to_read_more() -> None:
    guide = (ROOT / "docs" / "monitoring.md").read_text()
    headings = {line.removeprefix("### ").strip().lower() for line in guide.splitlines() if line.startswith("### ")}
    for rule in alert_rules():
        name = rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        runbook = annotations["runbook_url"]
        assert runbook.endswith(f"docs/monitoring.md#{name.lower()}"), name
        assert name.lower() in headings, f"docs/monitoring.md has no section '### {name}'"
        # Names the group or the fleet it is about (or the coordinator's pod for coordinator-wide alerts, the
        # operator's namespace for operator-wide ones).
        text = annotations["summary"] + annotations["description"]
        labels = ("$labels.group", "$labels.fleet", "$labels.pod", "$labels.namespace")
        assert any(label in text for label in labels), name
