"""Every metric the dashboard and the alert rules query is one Berth exports: a coordinator family
(``FAMILIES``, histograms with ``_bucket``/``_sum``/``_count``) or one of the operator's ``FAMILIES``. Names are read
out of the PromQL by ``promql_names.metric_names``; the scanner's own tests show it finds a misspelt name and is not
fooled by label values, functions, keywords, durations or Grafana variables."""

from __future__ import annotations

import pytest
from promql_names import (
    dashboard,
    dashboard_queries,
    exported_samples,
    metric_names,
    rule_queries,
)

QUERIES = [*dashboard_queries(dashboard()), *rule_queries()]


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[where for where, _ in QUERIES])
def test_every_query_names_only_exported_metrics(where: str, expr: str) -> None:
    names = metric_names(expr)
    assert names, f"{where}: no metric found in {expr!r}"
    unknown = names - exported_samples().keys()
    assert not unknown, f"{where} uses {sorted(unknown)}, which Berth does not export"


def test_a_misspelt_or_unknown_name_is_caught() -> None:
    expr = 'sum by (group) (rate(berth_group_rebalance_total{namespace=~"$namespace", group="berth_groups"}[5m]))'
    assert metric_names(expr) == {"berth_group_rebalance_total"}
    assert "berth_group_rebalance_total" not in exported_samples()
    assert metric_names("berth_operator_reconciles{outcome='error'} > 0") == {"berth_operator_reconciles"}
    assert "berth_operator_reconciles" not in exported_samples(), "a counter is exposed with _total only"


def test_the_scanner_skips_functions_keywords_numbers_and_variables() -> None:
    expr = """
        histogram_quantile(0.99, sum by (le, group) (rate(berth_group_join_duration_seconds_bucket[$__rate_interval])))
        and on (namespace) (time() - berth_journal_oldest_event_timestamp_seconds offset 5m) < 7.2e3
        unless ignoring (pod) berth_ready == bool 0
        or label_replace(berth_members, "x", "$1", "pod", "(.*)")
    """
    assert metric_names(expr) == {
        "berth_group_join_duration_seconds_bucket",
        "berth_journal_oldest_event_timestamp_seconds",
        "berth_ready",
        "berth_members",
    }


def test_histograms_and_counters_expose_the_sample_names_prometheus_sees() -> None:
    exported = exported_samples()
    assert exported["berth_group_join_duration_seconds_bucket"] == "berth_group_join_duration_seconds"
    assert exported["berth_operator_reconciles_total"] == "berth_operator_reconciles_total"
    assert exported["berth_operator_leave_delay_seconds_bucket"] == "berth_operator_leave_delay_seconds"
    assert "berth_operator_departing_members" in exported and "berth_fenced_members_total" in exported
