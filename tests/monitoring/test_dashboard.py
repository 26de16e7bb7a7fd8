"""The Grafana dashboard (deploy/monitoring/berth-dashboard.json) as Grafana and its sidecar need it, and its one
canonical copy: the chart's files/ hold the same bytes (deploy/render.py copies them)."""

from __future__ import annotations

from itertools import combinations

from promql_names import MONITORING, ROOT, dashboard, panels

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

#: What the dashboard must show (docs/monitoring.md describes each panel).
REQUIRED_PANELS = {
    "Groups by state",
    "Members",
    "Rebalances by cause",
    "Rebalances per group",
    "Rebalance duration",
    "Static restarts",
    "Generation per group",
    "Fenced members",
    "Store write failures and readiness",
    "Journal bytes vs bound",
    "Journal's oldest event",
    "HTTP answers by status",
    "Reconciles by outcome",
    "Batch leaves",
    "Leave delay and scale-down seconds",
    "Departing members",
    "Fleets ready / refused",
    "Rollouts",
    "Rolls under way and waiting",
}


def test_the_chart_ships_the_canonical_files_byte_for_byte() -> None:
    canonical = {p.name: p.read_bytes() for p in MONITORING.iterdir() if p.is_file()}
    shipped = {p.name: p.read_bytes() for p in (ROOT / "charts" / "berth" / "files").iterdir() if p.is_file()}
    assert canonical.keys() == shipped.keys(), "charts/berth/files/ and deploy/monitoring/ hold different files"
    drifted = [name for name in canonical if canonical[name] != shipped[name]]
    assert not drifted, f"{drifted} differ: run `.venv/bin/python deploy/render.py` to copy deploy/monitoring/"


def test_a_modern_dashboard_with_a_datasource_a_namespace_and_a_group_variable() -> None:
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["uid"] == "berth-overview" and board["title"] == "Berth"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "group"):
        variable = variables[name]
        assert variable["type"] == "query" and variable["datasource"] == DATASOURCE, name
        assert variable["includeAll"] and variable["multi"] and variable["allValue"] == ".*", name
    assert "$namespace" in variables["group"]["query"]["query"], "groups follow the chosen namespace"


def test_every_panel_queries_the_chosen_datasource_and_filters_by_namespace() -> None:
    for panel in panels(dashboard()):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert 'namespace=~"$namespace"' in target["expr"], f"{panel['title']}: {target['expr']}"
            if "berth_group_" in target["expr"]:
                assert 'group=~"$group"' in target["expr"], f"{panel['title']}: {target['expr']}"


def test_the_panels_it_promises_are_there_laid_out_without_overlap() -> None:
    board = dashboard()
    titles = [p["title"] for p in panels(board)]
    assert set(titles) >= REQUIRED_PANELS, REQUIRED_PANELS - set(titles)
    assert len(titles) == len(set(titles))
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    boxes = [p["gridPos"] for p in board["panels"]]
    for box in boxes:
        assert box["x"] >= 0 and box["x"] + box["w"] <= 24, box
    for a, b in combinations(boxes, 2):
        overlap = (
            a["x"] < b["x"] + b["w"]
            and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"]
            and b["y"] < a["y"] + a["h"]
        )
        assert not overlap, (a, b)


#: The unit each kind of series is drawn in (Grafana's unit ids): bytes, seconds (durations, ages, quantiles of
#: seconds), per second (a rate), or a plain number.
UNITS = {
    "bytes": {"bytes", "decbytes"},
    "seconds": {"s"},
    "per second": {"reqps", "ops", "cps"},
    "number": {"short", "none"},
}


def kind_of(expr: str) -> str:
    """What a query's values are, from the metric names it reads (the naming conventions the code keeps:
    ``_bytes``, ``_seconds``, counters read through ``rate``)."""
    if "_bytes" in expr:
        return "bytes"
    if "_seconds" in expr:
        return "seconds"
    if "rate(" in expr:
        return "per second"
    return "number"


def test_every_panel_has_one_unit_on_its_one_axis() -> None:
    """Issue 30: the journal panel put an age (seconds) among bytes. Every panel's queries are of one kind, drawn in
    that kind's unit, and no override gives a series another unit (or another axis)."""
    for panel in panels(dashboard()):
        kinds = {kind_of(target["expr"]) for target in panel["targets"]}
        assert len(kinds) == 1, f"{panel['title']}: queries of {sorted(kinds)}"
        unit = panel["fieldConfig"]["defaults"].get("unit")
        assert unit in UNITS[kinds.pop()], f"{panel['title']}: unit {unit}"
        for override in panel["fieldConfig"].get("overrides") or []:
            changed = {p["id"] for p in override.get("properties") or []}
            assert not changed & {"unit", "custom.axisPlacement"}, f"{panel['title']}: {override}"
