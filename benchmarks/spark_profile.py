"""Where a ``berth-analyze`` run's Spark time goes, from Spark's own metrics: one run with the event log on, then
its stages' task metrics and its SQL plans' per-operator metrics summed.

``python -m benchmarks.spark_profile --journal PARQUET_DIR [--out DIR] [--master local[2]] [--top 25]``

Owns nothing of the product: it runs ``berth.pipeline.main`` as the pipeline benchmark does (``--no-report``), with
``spark.eventLog.enabled`` passed through ``PYSPARK_SUBMIT_ARGS`` (the session's own settings are untouched), and
reads the log it wrote. Printed: per stage, its tasks' executor CPU and run time, shuffle read and write, GC, and
the operators of the plan it ran; per plan operator, each timing metric summed over all tasks (Spark's
``timing`` metrics are milliseconds, ``nsTiming`` nanoseconds: both are printed as seconds). Operator timings
overlap (a whole-stage-codegen ``duration`` includes the scans, filters and projections fused into it); stage CPU
does not. Benchmark tooling only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

NS = 1e9
MS = 1e3


def run_with_event_log(journal: Path, out: Path, master: str, events_dir: Path) -> None:
    submit = f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://{events_dir} pyspark-shell"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_SUBMIT_ARGS=submit)
    command = [sys.executable, "-m", "berth.pipeline.main", "--journal", str(journal), "--out", str(out)]
    subprocess.run([*command, "--no-report", "--master", master, "--quiet"], env=env, check=True)


def log_events(events_dir: Path) -> Iterator[dict[str, Any]]:
    (log,) = [p for p in events_dir.iterdir() if p.is_file()]
    with log.open(encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def _plan_metrics(node: dict[str, Any], into: dict[int, tuple[str, str, str]]) -> None:
    for metric in node.get("metrics", []):
        into[metric["accumulatorId"]] = (node["nodeName"], metric["name"], metric["metricType"])
    for child in node.get("children", []):
        _plan_metrics(child, into)


def profile(events_dir: Path) -> dict[str, Any]:
    metric_of: dict[int, tuple[str, str, str]] = {}
    accumulated: dict[int, float] = defaultdict(float)
    stages: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    stage_names: dict[int, str] = {}
    stage_operators: dict[int, set[str]] = defaultdict(set)
    for event in log_events(events_dir):
        kind = event["Event"]
        if kind.endswith(("SQLExecutionStart", "SQLAdaptiveExecutionUpdate")):
            _plan_metrics(event["sparkPlanInfo"], metric_of)
        elif kind == "SparkListenerStageSubmitted":
            stage_names[event["Stage Info"]["Stage ID"]] = event["Stage Info"]["Stage Name"]
        elif kind == "SparkListenerTaskEnd":
            stage = stages[event["Stage ID"]]
            metrics = event.get("Task Metrics") or {}
            stage["tasks"] += 1
            stage["cpu_s"] += metrics.get("Executor CPU Time", 0) / NS
            stage["run_s"] += metrics.get("Executor Run Time", 0) / MS
            stage["gc_s"] += metrics.get("JVM GC Time", 0) / MS
            stage["deserialize_cpu_s"] += metrics.get("Executor Deserialize CPU Time", 0) / NS
            read = metrics.get("Shuffle Read Metrics") or {}
            write = metrics.get("Shuffle Write Metrics") or {}
            stage["shuffle_read_mib"] += (read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0)) / 2**20
            stage["shuffle_write_mib"] += write.get("Shuffle Bytes Written", 0) / 2**20
            stage["shuffle_write_s"] += write.get("Shuffle Write Time", 0) / NS
            stage["input_mib"] += (metrics.get("Input Metrics") or {}).get("Bytes Read", 0) / 2**20
            for update in event["Task Info"].get("Accumulables", []):
                accumulated[update["ID"]] += float(update.get("Update") or 0)
                if update["ID"] in metric_of:
                    stage_operators[event["Stage ID"]].add(metric_of[update["ID"]][0])
    operators: dict[str, float] = defaultdict(float)
    for accumulator, total in accumulated.items():
        if accumulator not in metric_of:
            continue
        node, name, kind = metric_of[accumulator]
        if kind == "timing":
            operators[f"{node}: {name}"] += total / MS
        elif kind == "nsTiming":
            operators[f"{node}: {name}"] += total / NS
    return {
        "stages": {
            stage_id: {
                "name": stage_names.get(stage_id, ""),
                "operators": sorted(stage_operators[stage_id]),
                **{k: round(v, 2) for k, v in figures.items()},
            }
            for stage_id, figures in sorted(stages.items())
        },
        "operator_seconds": dict(sorted(((k, round(v, 2)) for k, v in operators.items()), key=lambda kv: -kv[1])),
        "task_cpu_s": round(sum(s["cpu_s"] for s in stages.values()), 1),
        "task_run_s": round(sum(s["run_s"] for s in stages.values()), 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--out", type=Path, help="where the run's outputs go (default: a temporary folder)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--top", type=int, default=25, help="operator timings printed")
    parser.add_argument("--json", type=Path, help="also write the whole profile here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="berth-profile-") as scratch:
        events_dir = Path(scratch) / "events"
        events_dir.mkdir()
        run_with_event_log(args.journal, args.out or Path(scratch) / "out", args.master, events_dir)
        result = profile(events_dir)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"tasks: {result['task_cpu_s']} executor CPU-s, {result['task_run_s']} run s")
    for stage_id, stage in result["stages"].items():
        print(
            f"stage {stage_id:>3} {stage['tasks']:>4.0f} tasks {stage['cpu_s']:>7.1f} CPU-s"
            f" {stage['run_s']:>7.1f} run-s gc {stage['gc_s']:>5.1f} in {stage['input_mib']:>7.1f} MiB"
            f" shuffle r/w {stage['shuffle_read_mib']:>7.1f}/{stage['shuffle_write_mib']:>7.1f} MiB"
            f" ({stage['shuffle_write_s']:.1f} s)  {', '.join(stage['operators'])}"
        )
    for name, seconds in list(result["operator_seconds"].items())[: args.top]:
        print(f"{seconds:>9.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
