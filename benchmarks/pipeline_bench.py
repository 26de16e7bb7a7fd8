"""Benchmark 6: ``berth-analyze`` over synthetic journals of 1M and 10M events, from JSON Lines and from Parquet.

``python -m benchmarks pipeline`` (or ``python -m benchmarks.pipeline_bench [--sizes 1000000,10000000] [--data DIR]``)

Journals come from ``benchmarks.synthetic`` (deterministic, seed 1, one group per 500 events) and are kept in
``--data`` (default ``$BERTH_BENCH_DATA``, else ``$XDG_CACHE_HOME/berth/pipeline-bench``, i.e. ``~/.cache/...``) so
that a rerun measures the analysis, not the generator: a cache, so it lives with caches and not under /tmp.
Each size is analysed from its JSON Lines segments, converted to Parquet, and analysed again
from Parquet, every run a fresh ``berth-analyze`` process at ``local[2]`` exactly as a user would start it; the
wall time includes the JVM's start (about 10 s). Figures: seconds and events/s per run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Result, progress
from benchmarks.goals import GOALS

DEFAULT_SIZES = (1_000_000, 10_000_000)
EVENTS_PER_GROUP = 500
SEED = 1
MASTER = "local[2]"

GOAL_EVENTS = 10_000_000
GOAL_SECONDS = 120


def default_data() -> Path:
    """Where generated journals are cached between runs (tens of GB at 10M events: a cache, not a temp dir)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "berth" / "pipeline-bench"


def journal_for(events: int, data: Path) -> Path:
    """The synthetic journal of ``events`` events, generated once and reused."""
    groups = max(1_000, events // EVENTS_PER_GROUP)
    directory = data / f"journal-{events}-{groups}-{SEED}"
    done = directory / ".complete"
    if not done.exists():
        shutil.rmtree(directory, ignore_errors=True)
        progress(f"generating {events:,} events for {groups:,} groups -> {directory}")
        started = time.monotonic()
        generate = ["--events", str(events), "--groups", str(groups), "--seed", str(SEED), "--out", str(directory)]
        subprocess.run([sys.executable, "-m", "benchmarks.synthetic", *generate], check=True)
        done.write_text(f"{time.monotonic() - started:.1f} s\n")
    return directory


def timed_run(args: list[str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "berth.pipeline.main", *args, "--master", MASTER], check=True)
    return time.monotonic() - started


def bench_size(events: int, data: Path) -> dict[str, Any]:
    journal = journal_for(events, data)
    parquet = data / f"parquet-{events}"
    out = data / f"out-{events}"
    jsonl_s = timed_run(["--journal", str(journal), "--out", str(out / "jsonl")])
    progress(f"{events:,} events from JSON Lines: {jsonl_s:.1f} s ({events / jsonl_s:,.0f} events/s)")
    convert_s = timed_run(["convert", "--journal", str(journal), "--out", str(parquet)])
    progress(f"converted to Parquet: {convert_s:.1f} s")
    parquet_s = timed_run(["--journal", str(parquet), "--out", str(out / "parquet")])
    progress(f"{events:,} events from Parquet: {parquet_s:.1f} s ({events / parquet_s:,.0f} events/s)")
    same = _advice_without_timestamp(out / "jsonl") == _advice_without_timestamp(out / "parquet")
    return {
        "events": events,
        "journal_bytes": sum(f.stat().st_size for f in journal.glob("*.jsonl")),
        "parquet_bytes": sum(f.stat().st_size for f in parquet.rglob("*.parquet")),
        "jsonl_s": round(jsonl_s, 1),
        "jsonl_events_per_s": round(events / jsonl_s),
        "convert_s": round(convert_s, 1),
        "parquet_s": round(parquet_s, 1),
        "parquet_events_per_s": round(events / parquet_s),
        "same_advice_from_both": same,
    }


def _advice_without_timestamp(out: Path) -> dict[str, Any]:
    advice: dict[str, Any] = json.loads((out / "advice.json").read_text())
    advice.pop("generated_at_ms")
    return advice


def main(argv: Sequence[str] | None = None) -> Result:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="comma-separated events")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("BERTH_BENCH_DATA") or default_data()))
    args = parser.parse_args([] if argv is None else argv)
    args.data.mkdir(parents=True, exist_ok=True)
    runs = [bench_size(int(size), args.data) for size in args.sizes.split(",")]
    summary = "; ".join(
        f"{r['events']:,} events: {r['jsonl_events_per_s']:,} events/s from JSON Lines, "
        f"{r['parquet_events_per_s']:,} from Parquet"
        for r in runs
    )
    ten_million = next((r for r in runs if r["events"] == GOAL_EVENTS), None)
    return Result(
        name="pipeline",
        title="berth-analyze over synthetic journals (local[2])",
        command="python -m benchmarks pipeline",
        goal=GOALS["pipeline"],
        met=None if ten_million is None else ten_million["parquet_s"] < GOAL_SECONDS,
        summary=summary,
        figures={"master": MASTER, "runs": runs},
        note="One run per size and format, wall time of a fresh process including JVM start; the machine's other "
        "load is not controlled. Journals: benchmarks.synthetic, seed 1, one group per 500 events.",
    )


if __name__ == "__main__":
    result = main(sys.argv[1:])
    print(json.dumps(result.figures, indent=2))
    result.save()
