"""Where a ``berth-analyze`` run's CPU goes, by Spark's own metrics: one run with Spark's event log on, read back
stage by stage.

``python -m benchmarks.spark_stages --journal PARQUET_DIR [--master local[2]] [--keep DIR]``
(or ``--log EVENT_LOG`` to read a log written already)

Owns the profile of one run (benchmark 6's Berth side, docs/pipeline.md "Performance"). Rules:
- The run is ``berth-analyze --no-report`` as ``benchmarks.pipeline_bench`` starts it, in a fresh process measured
  as a whole process tree (``benchmarks.process_cost``), with one difference: ``SPARK_CONF_DIR`` names a folder
  whose ``spark-defaults.conf`` turns the event log on (uncompressed). That is the way that reaches the JVM of a
  session PySpark starts (``PYSPARK_SUBMIT_ARGS`` does not: berth-analyze sets the session's own settings). The
  folder is on the JVM's class path, so the class-data archive does not match and the JVM starts without it (a few
  CPU-seconds more than a measured run: compare the totals with the benchmark's, not with each other's runs).
- Per stage: the executors' CPU (``Executor CPU Time``: the task threads' own CPU), run time, the JVM's GC time
  (wall time in collections while the task ran: with the serial collector's pauses two concurrent tasks count the
  same pause each), input rows, shuffle bytes read and written, and the operators of the stage (the RDD scopes'
  names: ``Scan parquet``, ``Exchange``, ``Window``...). What is not in any task (the JVM's start, class loading,
  the compilers, planning, the driver's Python) is the process tree's CPU less the tasks'.
- Benchmark tooling: prints a table and a JSON document, saves nothing in results/.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.process_cost import measure

PYTHON = sys.executable


@dataclass
class Stage:
    """One stage's tasks, summed."""

    stage_id: int
    operators: list[str] = field(default_factory=list)
    tasks: int = 0
    cpu_s: float = 0.0
    run_s: float = 0.0
    gc_s: float = 0.0
    input_rows: int = 0
    shuffle_read_mib: float = 0.0
    shuffle_write_mib: float = 0.0


def read_stages(lines: Iterable[str]) -> list[Stage]:
    """An event log's lines (JSON, one event each) -> its stages in id order."""
    stages: dict[int, Stage] = {}

    def stage(stage_id: int) -> Stage:
        return stages.setdefault(stage_id, Stage(stage_id))

    for line in lines:
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            read = metrics.get("Shuffle Read Metrics") or {}
            s = stage(event["Stage ID"])
            s.tasks += 1
            s.cpu_s += metrics.get("Executor CPU Time", 0) / 1e9
            s.run_s += metrics.get("Executor Run Time", 0) / 1e3
            s.gc_s += metrics.get("JVM GC Time", 0) / 1e3
            s.input_rows += (metrics.get("Input Metrics") or {}).get("Records Read", 0)
            s.shuffle_read_mib += (read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0)) / 2**20
            s.shuffle_write_mib += (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0) / 2**20
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            s = stage(info["Stage ID"])
            for rdd in info.get("RDD Info", []):
                name = json.loads(rdd["Scope"]).get("name", "") if rdd.get("Scope") else ""
                operator = name.split(" (")[0].strip()
                if operator and operator not in s.operators:
                    s.operators.append(operator)
    return [stages[k] for k in sorted(stages) if stages[k].tasks]


def event_log_lines(path: Path) -> Iterable[str]:
    """The lines of an event log: a file, or a rolling log's folder (``eventlog_v2_*``, its ``events_*`` in order)."""
    files = sorted(path.glob("events_*")) if path.is_dir() else [path]
    for file in files:
        with file.open(encoding="utf-8") as f:
            yield from f


def profile_run(journal: Path, master: str, keep: Path | None) -> tuple[dict[str, float], Path]:
    """One ``berth-analyze --no-report`` with the event log on; its process tree's cost and its log."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="berth-stages-"))
    conf, logs, out = work / "conf", work / "events", work / "out"
    for folder in (conf, logs):
        folder.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{logs}\nspark.eventLog.compress false\n"
    )
    command = [PYTHON, "-m", "berth.pipeline.main", "--journal", str(journal), "--out", str(out), "--no-report"]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(conf))
    cost, result = measure([*command, "--master", master, "--quiet"], env=env, timeout_s=4 * 3600)
    if result.returncode != 0:
        raise RuntimeError(f"berth-analyze failed ({result.returncode}): {result.stderr.decode()[-2000:]}")
    written = sorted(logs.iterdir())
    if not written:
        raise RuntimeError(f"the run wrote no event log into {logs}")
    figures = {"wall_s": round(cost.wall_s, 1), "cpu_s": round(cost.cpu_s, 1), "peak_rss_mib": round(cost.peak_rss_mib)}
    return figures, written[-1]


def report(stages: Sequence[Stage], process: dict[str, float] | None) -> dict[str, Any]:
    """The stages as a table on stderr, and the totals (with the CPU outside tasks when the process was measured)."""
    for s in stages:
        print(
            f"stage {s.stage_id:3d}: {s.tasks:3d} tasks, {s.cpu_s:7.1f} CPU-s, GC {s.gc_s:6.1f} s,"
            f" run {s.run_s:7.1f} s, {s.input_rows:>11,} rows in, shuffle {s.shuffle_read_mib:7.1f} MiB read"
            f" {s.shuffle_write_mib:7.1f} written | {', '.join(s.operators)}",
            file=sys.stderr,
        )
    totals: dict[str, Any] = collections.Counter()
    for s in stages:
        for name in ("tasks", "cpu_s", "run_s", "gc_s", "shuffle_read_mib", "shuffle_write_mib"):
            totals[name] += getattr(s, name)
    summary: dict[str, Any] = {k: round(v, 1) for k, v in totals.items()}
    summary["stages"] = [
        {"stage": s.stage_id, "cpu_s": round(s.cpu_s, 1), "gc_s": round(s.gc_s, 1), "operators": s.operators}
        for s in sorted(stages, key=lambda s: -s.cpu_s)[:8]
    ]
    if process is not None:
        summary["process"] = process
        summary["cpu_s_outside_tasks"] = round(process["cpu_s"] - totals["cpu_s"], 1)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--journal", type=Path, help="a converted (Parquet) journal to run berth-analyze on")
    parser.add_argument("--log", type=Path, help="read this event log instead of running")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", type=Path, help="a folder for the run's conf, event log and outputs (kept)")
    args = parser.parse_args(argv)
    if (args.journal is None) == (args.log is None):
        parser.error("give --journal or --log")
    process = None
    log = args.log
    if args.journal is not None:
        process, log = profile_run(args.journal, args.master, args.keep)
    print(json.dumps(report(read_stages(event_log_lines(log)), process), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
