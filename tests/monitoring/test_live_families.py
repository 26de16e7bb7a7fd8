"""The families the dashboard and the alert rules use, as a real scrape shows them: a coordinator process's
``/metrics`` (after a group formed, so per-group series exist) and the operator's metrics endpoint (its own server,
in a thread of its own, after a pass, a batch leave and a fleet's state were recorded). Each family must be there
with ``# HELP`` and ``# TYPE``, of a type that fits the sample names the queries use."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest
from promql_names import coordinator_samples, dashboard, dashboard_queries, metric_names, operator_samples, rule_queries
from support.coordinator import CoordinatorProcess
from support.net import free_port
from support.rawhttp import post_json, send

from berth.operator.adapters.metrics import OperatorMetrics, serving

pytestmark = pytest.mark.timeout(120)

USED = set().union(*(metric_names(expr) for _, expr in [*dashboard_queries(dashboard()), *rule_queries()]))


def declared(text: str) -> dict[str, tuple[str, str]]:
    """family -> (type, help) from an exposition's ``# HELP`` and ``# TYPE`` lines."""
    helps = dict(re.findall(r"^# HELP (\S+) (.+)$", text, re.MULTILINE))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    return {name: (types[name], helps.get(name, "")) for name in types}


def check(used: set[str], families_of: dict[str, str], text: str) -> None:
    found = declared(text)
    for sample in sorted(used):
        family = families_of[sample]
        assert family in found, f"{sample}: no # TYPE {family} in the scrape"
        kind, help_text = found[family]
        assert help_text, f"{family} has no # HELP text"
        expected = "histogram" if sample != family and not sample.endswith("_total") else None
        if expected:
            assert kind == expected, f"{sample} is used as a histogram's sample but {family} is a {kind}"
        if sample.endswith("_total"):
            assert kind == "counter", f"{family} is a {kind}"


def test_the_coordinator_scrape_declares_every_family_used(tmp_path: Path) -> None:
    used = USED & coordinator_samples().keys()
    assert used, "the dashboard and rules use coordinator families"
    with CoordinatorProcess(tmp_path / "data", "--group-initial-rebalance-delay-ms", "0") as proc:
        join = {
            "member_id": "",
            "group_instance_id": "i-0",
            "session_timeout_ms": 30_000,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}],
        }
        assert (
            send(proc.url, "PUT", "/v1/groups/orders/expected-members", b'{"group_instance_ids":["i-0"]}', JSON)[0]
            == 200
        )
        assert post_json(proc.url, "/v1/groups/orders/join", join)[1]["error"] == "NONE"
        status, text = send(proc.url, "GET", "/metrics")
    assert status == 200
    check(used, coordinator_samples(), text)
    assert 'berth_group_members{group="orders"} 1' in text


async def test_the_operator_endpoint_declares_every_family_used() -> None:
    used = USED & operator_samples().keys()
    assert used, "the dashboard and rules use operator families"
    metrics = OperatorMetrics()
    metrics.pass_done("shop", "orders", "converged")
    metrics.pass_done("shop", "orders", "error")
    metrics.left("shop", "orders", removed=2, delay_s=0.2, since_start_s=4.0)
    metrics.state("shop", "orders", ready=True, refused=False, departing=0)
    port = free_port()
    async with (
        serving(metrics, port, host="127.0.0.1"),
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as answer,
    ):
        assert answer.status == 200
        text = await answer.text()
    check(used, operator_samples(), text)
    assert 'berth_operator_reconciles_total{fleet="orders",namespace="shop",outcome="error"} 1.0' in text


JSON = {"Content-Type": "application/json"}


def test_a_fleets_counters_exist_at_zero_from_its_first_pass_until_it_is_released() -> None:
    """``increase()`` sees only increments between samples: a fleet's first batch leave or reconcile error must
    move a series that was already scraped at 0, or the dashboard and the alerts would miss it."""
    metrics = OperatorMetrics()
    metrics.state("shop", "orders", ready=False, refused=False, departing=0)
    text = metrics.exposition().decode()
    for sample in (
        'berth_operator_batch_leaves_total{fleet="orders",namespace="shop"} 0.0',
        'berth_operator_members_left_total{fleet="orders",namespace="shop"} 0.0',
        'berth_operator_static_restarts_total{fleet="orders",namespace="shop"} 0.0',
        'berth_operator_rolls_total{fleet="orders",namespace="shop"} 0.0',
        'berth_operator_reconciles_total{fleet="orders",namespace="shop",outcome="error"} 0.0',
        "berth_operator_leave_delay_seconds_count 0.0",  # the operator's, over every fleet
        "berth_operator_scale_down_seconds_count 0.0",
    ):
        assert sample in text, sample
    assert len([line for line in text.splitlines() if 'fleet="orders"' in line]) == metrics.series_per_fleet() == 20
    metrics.forget("shop", "orders")
    assert 'fleet="orders"' not in metrics.exposition().decode()
    metrics.state("shop", "orders", ready=True, refused=False, departing=0)  # a fleet of that name again
    assert 'berth_operator_batch_leaves_total{fleet="orders",namespace="shop"} 0.0' in metrics.exposition().decode()


def test_the_operators_exposition_parses_strictly_with_twenty_series_per_fleet() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    metrics = OperatorMetrics()
    for fleet in ("orders", 'we"ird\\name'):
        metrics.state("shop", fleet, ready=True, refused=False, departing=2)
        metrics.pass_done("shop", fleet, "waiting")
    metrics.left("shop", "orders", removed=2, delay_s=0.3, since_start_s=12.0)
    metrics.pass_done("shop", "orders", "no-such-outcome")  # ignored, never a new series
    families = {family.name: family for family in text_string_to_metric_families(metrics.exposition().decode())}
    assert families["berth_operator_reconciles"].type == "counter"
    assert families["berth_operator_leave_delay_seconds"].type == "histogram"
    per_fleet = [
        sample for family in families.values() for sample in family.samples if sample.labels.get("fleet") == "orders"
    ]
    assert len(per_fleet) == 20
    assert {s.labels["fleet"] for f in families.values() for s in f.samples if "fleet" in s.labels} == {
        "orders",
        'we"ird\\name',
    }
    delay = {s.name: s.value for s in families["berth_operator_leave_delay_seconds"].samples if not s.labels.get("le")}
    assert delay == {"berth_operator_leave_delay_seconds_count": 1.0, "berth_operator_leave_delay_seconds_sum": 0.3}
