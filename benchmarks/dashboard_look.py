"""A look at the dashboard's panels without Grafana (``python -m benchmarks.dashboard_look``; not part of
``make test`` or ``make bench``).

Starts a real coordinator (a small journal bound, so retention acts within the run), the operator's reconcile loop
(``FleetReconciler`` over a local fleet of member processes, the operator's metrics served on a port of their own
by ``berth.operator.adapters.metrics.serving``) and Debian's Prometheus (``/usr/bin/prometheus``) scraping both every
second with the alert rules loaded. Meanwhile: the fleet forms, every member restarts (static: no rebalance), a second
process takes over an instance id of another group (fenced answers), the fleet scales down 4 → 2 (one batch leave)
and back up. Then every query of every dashboard panel is evaluated through Prometheus' HTTP API, with Grafana's
variables filled in (all namespaces and groups, ``$__interval`` = the 1 s step, ``$__rate_interval`` = 10 s,
``$__range`` = the run), and what each returns is printed (series, points with a value, the largest value, the sum
of all points — for a panel of counts per interval, how many events it shows — and the last values), with the
alerts' state; the redrawn panels are drawn as their field config says (bars, points or lines:
``benchmarks.panel_render``) and headless Chromium (Debian's ``chromium``) takes a picture of each.

Usage::

    .venv/bin/python -m benchmarks.dashboard_look [--seconds 60] [--out /tmp/berth-dashboard-look]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.panel_render import Series, render
from berth.operator.adapters.metrics import OperatorMetrics, serving
from berth.operator.local.coordinator_process import CoordinatorProcess
from berth.operator.local.demo import Demo, build_parser
from berth.operator.planners.pass_timing import PassTiming
from berth.operator.reconcile.reconciler import FleetKey, FleetReconciler

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "monitoring" / "berth-dashboard.json"
ALERTS = ROOT / "deploy" / "monitoring" / "berth-alerts.yaml"
PROMETHEUS = "/usr/bin/prometheus"
JOURNAL_BOUND = 32 * 1024
#: Panels worth a picture (every query of each, one graph per query): (file name, panel title).
SCREENSHOTS = (
    ("groups-by-state", "Groups by state"),
    ("rebalances-by-cause", "Rebalances by cause"),
    ("rebalances-per-group", "Rebalances per group"),
    ("rebalance-duration", "Rebalance duration"),
    ("static-restarts", "Static restarts"),
    ("fenced-members", "Fenced members"),
    ("journal-vs-bound", "Journal bytes vs bound"),
    ("batch-leaves", "Batch leaves"),
    ("departing-members", "Departing members"),
    ("rollouts", "Rollouts"),
)
#: The graphs' step, and Grafana's ``$__interval`` with it: the scrape interval, which Grafana's data source setting
#: "scrape interval" makes the smallest.
STEP_S = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def say(started: float, message: str) -> None:
    print(f"[{time.monotonic() - started:5.1f}s] {message}", flush=True)


# ----------------------------------------------------------------------------------------------- Prometheus


def prometheus_config(coordinator: str, operator: str, rules: Path) -> str:
    """Both targets with the labels a Kubernetes scrape adds (namespace, pod): the operator's own ``namespace``
    label (the fleet's) is kept as ``exported_namespace``, as the Prometheus Operator's PodMonitor does."""
    return f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [{json.dumps(str(rules))}]
scrape_configs:
  - job_name: berth-coordinator
    static_configs:
      - targets: [{json.dumps(coordinator)}]
        labels: {{namespace: berth, pod: berth-coordinator-0}}
  - job_name: berth-operator
    static_configs:
      - targets: [{json.dumps(operator)}]
        labels: {{namespace: berth, pod: berth-operator-0}}
"""


def api(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = json.loads(answer.read())
    if body.get("status") != "success":
        raise RuntimeError(f"{path}: {body}")
    return body["data"]


def wait_scraping(base: str, timeout_s: float = 60.0) -> None:
    """Until both targets were scraped (Prometheus hands new targets to its scrapers every 5 s at first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, RuntimeError):
            if len(api(base, "/api/v1/query", query="up == 1")["result"]) == 2:
                return
        time.sleep(0.2)
    raise TimeoutError("prometheus did not scrape both targets")


def fill(expr: str, range_s: int) -> str:
    return (
        expr.replace("$__rate_interval", "10s")
        .replace("$__interval", f"{STEP_S}s")
        .replace("$__range", f"{range_s}s")
        .replace('=~"$namespace"', '=~".*"')
        .replace('=~"$group"', '=~".*"')
    )


def evaluate(base: str, start: float, end: float) -> tuple[list[dict[str, Any]], dict[str, list[Series]]]:
    """Every query of every panel over the run: a row per query for the report, and each panel's series to draw."""
    board = json.loads(DASHBOARD.read_text())
    found = []
    drawn: dict[str, list[Series]] = {}
    for panel in (p for p in board["panels"] if p["type"] != "row"):
        for target in panel["targets"]:
            expr = fill(target["expr"], int(end - start))
            ranged = api(base, "/api/v1/query_range", query=expr, start=str(start), end=str(end), step=str(STEP_S))
            now = api(base, "/api/v1/query", query=expr, time=str(end))
            series = [
                Series(
                    legend(target["legendFormat"], s["metric"]),
                    tuple((float(t), float(v)) for t, v in s["values"] if not math.isnan(float(v))),
                )
                for s in ranged["result"]
            ]
            drawn.setdefault(panel["title"], []).extend(series)
            last = [
                (legend(target["legendFormat"], s["metric"]), float(s["value"][1]))
                for s in now["result"]
                if not math.isnan(float(s["value"][1]))
            ]
            found.append(
                {
                    "panel": panel["title"],
                    "ref": target["refId"],
                    "expr": expr,
                    "series": len(series),
                    "points": sum(len(one.points) for one in series),
                    "max": max((v for one in series for _, v in one.points), default=None),
                    "total": sum(v for one in series for _, v in one.points),
                    "last": last[:8],
                }
            )
    return found, drawn


def legend(fmt: str, labels: dict[str, str]) -> str:
    out = fmt
    for key, value in labels.items():
        out = out.replace("{{" + key + "}}", value)
    return out.replace("{{exported_namespace}}", "").strip() or "(value)"


def screenshot(page: Path, path: Path) -> bool:
    """Chromium's picture of a page drawn by ``panel_render``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return False
    result = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1240,460",
            f"--screenshot={path}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return result.returncode == 0 and path.exists()


# ------------------------------------------------------------------------------------------------ the run


class Fleets:
    """The reconciler's view of the demo's fleets (a ``FleetReader``): each body with its current status."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo

    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        body = self.demo.fleets.bodies.get(name)
        if body is not None:
            body["status"] = self.demo.fleets.statuses[name].status
        return body


async def converge(reconciler: FleetReconciler, key: FleetKey, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = await reconciler.reconcile(key, lambda _key: ())
        if result.waiting is None:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{key} did not converge")


async def timer(reconciler: FleetReconciler, key: FleetKey) -> None:
    """Kopf's timer: a pass every second, whatever happens."""
    while True:
        with contextlib.suppress(Exception):
            await reconciler.reconcile(key, lambda _key: ())
        await asyncio.sleep(1.0)


def fence(url: str) -> int:
    """Group ``ledger``: static member i-0 joins, a second process joins with the same instance id, and the first
    one's heartbeats are answered FENCED_INSTANCE_ID. Returns how many were."""

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            decoded: dict[str, Any] = json.loads(answer.read())
            return decoded

    put = urllib.request.Request(
        url + "/v1/groups/ledger/expected-members",
        data=b'{"group_instance_ids":["ledger-0"]}',
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    urllib.request.urlopen(put, timeout=30).close()
    join = {
        "member_id": "",
        "group_instance_id": "ledger-0",
        "session_timeout_ms": 30_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": ""}],
    }
    first = post("/v1/groups/ledger/join", join)
    post(
        "/v1/groups/ledger/sync",
        {
            "member_id": first["member_id"],
            "group_instance_id": "ledger-0",
            "generation_id": first["generation_id"],
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": first["member_id"], "assignment": base64.b64encode(b"x").decode()}],
        },
    )
    time.sleep(2.5)  # a group lives a while before trouble comes: its series are scraped at 0 first
    second = post("/v1/groups/ledger/join", join)
    stale = {"member_id": first["member_id"], "group_instance_id": "ledger-0", "generation_id": second["generation_id"]}
    return sum(post("/v1/groups/ledger/heartbeat", stale)["error"] == "FENCED_INSTANCE_ID" for _ in range(5))


async def scenario(coordinator: CoordinatorProcess, metrics: OperatorMetrics, seconds: float, started: float) -> None:
    args = build_parser().parse_args(["--members", "4", "--partitions", "12", "--no-report", "--skip-dynamic"])
    demo = Demo(args, coordinator.url, quiet=True)
    demo.context.metrics = metrics
    # Following the journal, as the operator does: restarts are counted from it.
    reconciler = FleetReconciler(
        demo.context, Fleets(demo), timing=PassTiming(poll_s=0.2), journal_source=demo.coordinators.port
    )
    key = FleetKey("local", "orders")
    run_until = time.monotonic() + seconds
    workload, tracker = await demo.start_fleet("orders", "orders", static=True)
    ticking: asyncio.Task[None] | None = None
    try:
        await demo.form("orders", "orders", workload, tracker)
        say(started, "fleet orders formed: 4 static members")
        ticking = asyncio.create_task(timer(reconciler, key))
        await asyncio.sleep(3)
        workload.rolling = True  # as a StatefulSet's status says while it rolls
        row = await demo.rolling_restart("orders", "orders", workload, tracker)
        workload.rolling = False
        say(started, f"rolling restart of 4 static members: {row.rebalances} rebalances")
        fenced = await asyncio.to_thread(fence, coordinator.url)
        say(started, f"group ledger: a second process took instance ledger-0; {fenced} heartbeats answered fenced")
        await asyncio.sleep(3)
        demo.fleets.bodies["orders"]["spec"]["replicas"] = 2
        demo.fleets.bodies["orders"]["metadata"]["generation"] = 2
        say(started, "scale-down 4 -> 2")
        await converge(reconciler, key)
        say(started, "scale-down converged (batch leave sent)")
        await asyncio.sleep(5)
        demo.fleets.bodies["orders"]["spec"]["replicas"] = 4
        demo.fleets.bodies["orders"]["metadata"]["generation"] = 3
        say(started, "scale-up 2 -> 4")
        await converge(reconciler, key)
        say(started, "scale-up converged")
        await asyncio.sleep(max(0.0, run_until - time.monotonic()))
    finally:
        if ticking is not None:
            ticking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticking
        await reconciler.close()
        await workload.close()
        await demo.coordinators.close()
        await demo.admin.close()


async def look(
    coordinator: CoordinatorProcess, base: str, operator_port: int, seconds: float, out: Path, started: float
) -> None:
    """The scenario while Prometheus scrapes, then every panel's queries, the alerts and the screenshots."""
    metrics = OperatorMetrics()
    async with serving(metrics, operator_port, host="127.0.0.1"):
        await asyncio.to_thread(wait_scraping, base)
        say(started, f"prometheus on {base}, scraping {coordinator.url} and the operator every 1 s")
        t0 = time.time()
        await scenario(coordinator, metrics, seconds, started)
        await asyncio.sleep(3)  # the last scrapes
        t1 = time.time()
    results, drawn = await asyncio.to_thread(evaluate, base, t0, t1)
    alerts = await asyncio.to_thread(api, base, "/api/v1/alerts")
    report(results, alerts["alerts"])
    await asyncio.to_thread(write_json, out / "panels.json", {"panels": results, "alerts": alerts["alerts"]})
    board = {p["title"]: p for p in json.loads(await asyncio.to_thread(DASHBOARD.read_text))["panels"]}
    for name, title in SCREENSHOTS:
        page = out / f"{name}.html"
        page.write_text(render(board[title], drawn.get(title, []), start=t0, end=t1, step=STEP_S))
        path = out / f"{name}.png"
        ok = await asyncio.to_thread(screenshot, page, path)
        print(f"screenshot {title!r}: {path if ok else 'failed (no chromium?)'}")


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2))


def run(seconds: float, out: Path) -> int:
    if not Path(PROMETHEUS).exists():
        print(f"{PROMETHEUS} is missing: apt-get install prometheus (make promtool installs it)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="berth-look-") as tmp:
        work = Path(tmp)
        coordinator = CoordinatorProcess(
            work / "data",
            *("--journal-retention-bytes", str(JOURNAL_BOUND), "--group-initial-rebalance-delay-ms", "0"),
        )
        coordinator.start()
        operator_port = free_port()
        prometheus_port = free_port()
        config = work / "prometheus.yml"
        target = coordinator.url.removeprefix("http://")
        config.write_text(prometheus_config(target, f"127.0.0.1:{operator_port}", ALERTS))
        with (work / "prometheus.log").open("w") as log:
            prometheus = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={work / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prometheus_port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            base = f"http://127.0.0.1:{prometheus_port}"
            asyncio.run(look(coordinator, base, operator_port, seconds, out, started))
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)
            coordinator.stop()
    return 0


def report(results: list[dict[str, Any]], alerts: list[dict[str, Any]]) -> None:
    print()
    print(f"{'panel':<38}{'ref':<4}{'series':>7}{'points':>8}{'max':>12}{'sum':>10}  last values")
    for row in results:
        last = ", ".join(f"{name}={value:.4g}" for name, value in row["last"][:4]) or "(none)"
        peak = "-" if row["max"] is None else f"{row['max']:.4g}"
        print(
            f"{row['panel'][:37]:<38}{row['ref']:<4}{row['series']:>7}{row['points']:>8}{peak:>12}"
            f"{row['total']:>10.4g}  {last}"
        )
    print()
    for alert in alerts:
        labels = {k: v for k, v in alert["labels"].items() if k not in {"alertname", "severity"}}
        print(f"alert {alert['labels']['alertname']}: {alert['state']} {labels}")
    if not alerts:
        print("no alert pending or firing")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the scenario runs (default 60)")
    parser.add_argument("--out", default="/tmp/berth-dashboard-look", help="where panels.json and screenshots go")
    args = parser.parse_args(argv)
    return run(args.seconds, Path(args.out))


if __name__ == "__main__":
    raise SystemExit(main())
