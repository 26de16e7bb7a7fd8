"""Floods and hostile input (issue 8): while each flood runs, a bystander group of 100 static members keeps
heartbeating at 500/s; we report the bystander's latency and errors, what the flood was answered, and the
coordinator's memory. Floods: anonymous joins (bounded by KIP-394 expiry and the per-group pending cap),
oversized bodies (413), deep JSON (400), a 200,000-id leave (413 or 400), slowloris connections (idle
timeout and connection cap). Results go to benchmarks/results/floods.json and docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
    worst_p99 = max(f["bystander"]["p99_ms"] for f in figures.values())
    errors = sum(f["bystander"]["errors"] for f in figures.values())
    return Result(
        name="floods",
        title="Floods and hostile input, with a bystander group heartbeating",
        command="python -m benchmarks floods",
        goal="bounded by limits with clear errors; the bystander keeps being served",
        met=errors == 0,
        summary=f"bystander errors {errors}; worst p99 {worst_p99:.1f} ms across {len(FLOODS)} floods",
        figures=figures,
        note=f"Bystander: 100 static members, {RATE} heartbeats/s open loop; each flood {SECONDS} s, 32 connections.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
    # The bounds of issue 12 (journal, groups, metadata): benchmarks/bounds_floods.py, results of their own.
    bounds = bounds_floods.main()
    print(json.dumps(bounds.figures, indent=2))
    bounds.save()
