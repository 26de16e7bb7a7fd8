"""Floods and hostile input (issue 8): while each flood runs, a bystander group of 100 static members keeps
heartbeating at 500/s; we report the bystander's latency and errors, what the flood was answered, and the
coordinator's memory. Floods: anonymous joins (bounded by KIP-394 expiry and the per-group pending cap),
oversized bodies (413), deep JSON (400), a 200,000-id leave (413 or 400), slowloris connections (idle
timeout and connection cap), and slowloris at the connection cap (issue 12, item 11: 10,000 dripping connections
from 11 client addresses on a coordinator with its default limits; the probe port must answer throughout).
Results go to benchmarks/results/floods.json and docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks import bounds_floods
from benchmarks.common import Coordinator, Result, pinned, progress
from benchmarks.heartbeat import form_groups, load

SECONDS = 10
RATE = 500
FLOODS = ["anonymous_joins", "oversized", "deep_json", "huge_lists", "slowloris"]


def bystander_during(url: str, members: list[list[Any]], flood: str | None) -> dict[str, Any]:
    flooder = None
    if flood is not None:
        flooder = subprocess.Popen(
            pinned([sys.executable, "-m", "benchmarks.flood_gen", flood, url, str(SECONDS)], 1),
            stdout=subprocess.PIPE,
            text=True,
        )
    latency = load(url, members, rate=RATE, seconds=SECONDS)
    answers: dict[str, Any] = {}
    if flooder is not None:
        out, _ = flooder.communicate(timeout=120)
        answers = json.loads(out.strip().splitlines()[-1])["answers"]
    return {"bystander": latency, "flood_answers": answers}


def main() -> Result:
    figures: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        Coordinator(Path(tmp) / "data", "--idle-timeout-s", "5", "--max-connections", "2000", cpu=0) as coordinator,
    ):
        members = asyncio.run(form_groups(coordinator.url, 1, 100))
        for flood in [None, *FLOODS]:
            name = flood or "baseline"
            figures[name] = bystander_during(coordinator.url, members, flood)
            figures[name]["coordinator_rss_mib"] = coordinator.rss_bytes() / 2**20
            b = figures[name]["bystander"]
            progress(
                f"{name}: bystander p50 {b['p50_ms']:.1f} ms, p99 {b['p99_ms']:.1f} ms, errors {b['errors']}; "
                f"flood answered {figures[name]['flood_answers']}"
            )
    figures["slowloris_at_cap"] = slowloris_at_cap()
    worst_p99 = max(f["bystander"]["p99_ms"] for f in figures.values())
    errors = sum(f["bystander"]["errors"] for f in figures.values())
    at_cap = figures["slowloris_at_cap"]
    # The API port's own /healthz is probed only for comparison: at the cap it is expected to fail.
    on_probe_port = [p for name, p in at_cap["probes"].items() if name.startswith("probe_")]
    probes_ok = all(p["failed"] == 0 for p in on_probe_port)
    return Result(
        name="floods",
        title="Floods and hostile input, with a bystander group heartbeating",
        command="python -m benchmarks.floods",
        goal="bounded by limits with clear errors; the bystander keeps being served",
        met=errors == 0 and probes_ok,
        summary=(
            f"bystander errors {errors}; worst p99 {worst_p99:.1f} ms across {len(FLOODS) + 1} floods; at the "
            f"connection cap ({at_cap['api_connections_max']} open) the probe port answered "
            f"{sum(p['ok'] for p in on_probe_port)} of {sum(p['ok'] + p['failed'] for p in on_probe_port)} probes "
            f"(the API port's /healthz {at_cap['probes']['api_healthz']['ok']} of "
            f"{at_cap['probes']['api_healthz']['ok'] + at_cap['probes']['api_healthz']['failed']})"
        ),
        figures=figures,
        note=f"Bystander: 100 static members, {RATE} heartbeats/s open loop; each flood {SECONDS} s, 32 connections.",
    )


# ------------------------------------------------------------------------------------------ slowloris at the cap

AT_CAP_SECONDS = 30
AT_CAP_CONNECTIONS = 10_000
AT_CAP_SOURCES = 11  # 11 client addresses x the default 1,000 each: more than the 10,000 the coordinator holds
PROBE_INTERVAL_S = 0.25
PROBE_TIMEOUT_S = 3.0  # the chart's readiness probe timeout


def probe(url: str, path: str, until: float, seen: dict[str, Any], parse_connections: bool = False) -> None:
    """GET ``path`` on a fresh connection every PROBE_INTERVAL_S until ``until``, as the kubelet does."""
    parts = urlsplit(url)
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=PROBE_TIMEOUT_S)
            conn.request("GET", path)
            answer = conn.getresponse()
            body = answer.read()
            conn.close()
            status = str(answer.status)
        except (OSError, http.client.HTTPException) as error:
            status, body = type(error).__name__, b""
        seen["statuses"][status] = seen["statuses"].get(status, 0) + 1
        seen["latencies_ms"].append((time.monotonic() - started) * 1000)
        if parse_connections and status == "200":
            for line in body.decode().splitlines():
                if line.startswith('berth_http_connections{listener="api"}'):
                    seen["api_connections_max"] = max(seen.get("api_connections_max", 0), int(float(line.split()[1])))
        time.sleep(max(0.0, PROBE_INTERVAL_S - (time.monotonic() - started)))


def slowloris_at_cap() -> dict[str, Any]:
    """The bystander heartbeats on connections it opened before the flood; 10,000 dripping connections then hold
    the coordinator at --max-connections (defaults: 10,000, 1,000 per client, a 10 s header timeout) for
    AT_CAP_SECONDS, reconnecting whenever they are closed. The probe port is probed like the kubelet does, and the
    API port's /healthz on a new connection for comparison."""
    with tempfile.TemporaryDirectory() as tmp, Coordinator(Path(tmp) / "data", "--probe-port", "0", cpu=0) as c:
        members = asyncio.run(form_groups(c.url, 1, 100, prefix="cap"))
        spec = {"url": c.url, "members": members, "connections": 64, "seconds": AT_CAP_SECONDS + 8, "rate": RATE}
        bystander = subprocess.Popen(
            pinned([sys.executable, "-m", "benchmarks.loadgen"], 1),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert bystander.stdin is not None and bystander.stdout is not None
        bystander.stdin.write(json.dumps(spec))
        bystander.stdin.close()
        time.sleep(2.0)  # its 64 connections are open (and served) before the flood arrives
        flood_args = [c.url, str(AT_CAP_SECONDS), str(AT_CAP_CONNECTIONS), str(AT_CAP_SOURCES)]
        flooder = subprocess.Popen(
            pinned([sys.executable, "-m", "benchmarks.flood_gen", "slowloris_at_cap", *flood_args], 1),
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(5.0)  # the flood reaches the cap
        until = time.monotonic() + AT_CAP_SECONDS - 8
        seen: dict[str, dict[str, Any]] = {
            name: {"statuses": {}, "latencies_ms": []} for name in ("probe_healthz", "probe_readyz", "api_healthz")
        }
        threads = [
            threading.Thread(target=probe, args=(c.probe_url, "/healthz", until, seen["probe_healthz"])),
            threading.Thread(target=probe, args=(c.probe_url, "/readyz", until, seen["probe_readyz"])),
            threading.Thread(target=probe, args=(c.url, "/healthz", until, seen["api_healthz"])),
        ]
        metrics: dict[str, Any] = {"statuses": {}, "latencies_ms": []}
        threads.append(threading.Thread(target=probe, args=(c.probe_url, "/metrics", until, metrics, True)))
        for thread in threads:
            thread.start()
        rss = 0
        while time.monotonic() < until:
            rss = max(rss, c.rss_bytes())
            time.sleep(1.0)
        for thread in threads:
            thread.join()
        flood_out, _ = flooder.communicate(timeout=120)
        bystander_out = bystander.stdout.read()
        bystander.wait(120)
    return {
        "bystander": json.loads(bystander_out.strip().splitlines()[-1]),
        "flood_answers": json.loads(flood_out.strip().splitlines()[-1])["answers"],
        "probes": {name: _probe_summary(s) for name, s in seen.items()},
        "api_connections_max": metrics.get("api_connections_max", 0),
        "coordinator_rss_mib": rss / 2**20,
        "connections": AT_CAP_CONNECTIONS,
        "client_addresses": AT_CAP_SOURCES,
        "seconds": AT_CAP_SECONDS,
    }


def _probe_summary(seen: dict[str, Any]) -> dict[str, Any]:
    latencies = sorted(seen["latencies_ms"])
    ok = seen["statuses"].get("200", 0)
    return {
        "ok": ok,
        "failed": sum(seen["statuses"].values()) - ok,
        "statuses": seen["statuses"],
        "p50_ms": statistics.median(latencies) if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
    }


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
    # The bounds of issue 12 (journal, groups, metadata): benchmarks/bounds_floods.py, results of their own.
    bounds = bounds_floods.main()
    print(json.dumps(bounds.figures, indent=2))
    bounds.save()
