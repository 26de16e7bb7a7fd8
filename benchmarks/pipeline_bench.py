"""Benchmark 6: ``berth-analyze`` beside a single-node columnar engine (DuckDB) on 1M and 10M events, what the
chart's hourly job costs, and the time to a report on a 100-event journal.

``python -m benchmarks pipeline`` (or ``python -m benchmarks.pipeline_bench [--sizes 1000000,10000000] [--runs 2]
[--data DIR]``; ``--only-small`` measures the 100-event journal alone and saves it beside the other sections)

Journals come from ``benchmarks.synthetic`` (deterministic, seed 1, one group per 500 events) and are kept with
their Parquet conversion in ``--data`` (default ``$BERTH_BENCH_DATA``, else ``$XDG_CACHE_HOME/berth/pipeline-bench``,
i.e. ``~/.cache/...``: tens of GB at 10M events, a cache and not a temporary folder), so that a rerun measures the
analyses, not the generator. Every run is a fresh process, as a user starts it, at two cores (``local[2]``,
DuckDB with two threads), measured as a whole process tree (``benchmarks.process_cost``: wall time, CPU-seconds,
peak resident memory). Per size, from the same Parquet, interleaved run by run so the machine's load falls on both:
- Berth: ``berth-analyze --no-report`` (summary.parquet and advice.json);
- DuckDB: ``benchmarks.duckdb_reference``, the same summary and advice, compared with Berth's group by group,
  with partitions moved as an expert writes it (unnest and hash joins: the ratio the goal is checked on);
- DuckDB's first reference (``--moved lambdas``: partitions moved by nested list lambdas, quadratic in an
  assignment), compared with the expert one group by group: the figure the goal was first checked on;
- the issue's subset (rebalances by group and cause, restart gaps, durations) in DuckDB and, with Berth's own
  transforms, in Spark (``benchmarks.spark_subset``): what the first measurement compared, and Spark's floor for it;
- once, Berth with the report (what report.html adds).
``--only-sizes`` measures the sizes alone and keeps the other sections (and other sizes) from the saved results.
Then the chart's job: ``berth-analyze`` with the report on a JSON Lines journal of the coordinator's default
retention (256 MiB), as the CronJob reads it; and a 100-event journal to a report. The goal is checked on CPU
seconds (the machine is shared: wall time moves with the neighbours, CPU time much less).
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

import pyarrow.parquet as pq

from benchmarks.common import RESULTS, Result, progress, spread
from benchmarks.goals import GOALS
from benchmarks.process_cost import Cost, measure

DEFAULT_SIZES = (1_000_000, 10_000_000)
EVENTS_PER_GROUP = 500
SEED = 1
MASTER = "local[2]"
THREADS = 2
RUNS = 2
GOAL_EVENTS = 10_000_000
GOAL_CPU_RATIO = 5.0  # against the expert reference (issue 31); 3.0 was against the lambdas reference
SMALL_EVENTS = 100
GOAL_SMALL_SECONDS = 20.0
# The coordinator's default --journal-retention-bytes: the most JSON Lines the chart's job downloads.
CHART_JOURNAL_BYTES = 256 * 2**20
SYNTHETIC_EVENT_BYTES = 1_100  # what benchmarks.synthetic writes per event, on average
RUN_TIMEOUT_S = 4 * 3600
PYTHON = sys.executable


def default_data() -> Path:
    """Where generated journals are cached between runs (tens of GB at 10M events: a cache, not a temp dir)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "berth" / "pipeline-bench"


def journal_for(events: int, data: Path, groups: int | None = None) -> Path:
    """The synthetic journal of ``events`` events, generated once and reused."""
    groups = groups or max(1_000, events // EVENTS_PER_GROUP)
    directory = data / f"journal-{events}-{groups}-{SEED}"
    done = directory / ".complete"
    if not done.exists():
        shutil.rmtree(directory, ignore_errors=True)
        progress(f"generating {events:,} events for {groups:,} groups -> {directory}")
        started = time.monotonic()
        generate = ["--events", str(events), "--groups", str(groups), "--seed", str(SEED), "--out", str(directory)]
        subprocess.run([PYTHON, "-m", "benchmarks.synthetic", *generate], check=True)
        done.write_text(f"{time.monotonic() - started:.1f} s\n")
    return directory


def parquet_for(events: int, journal: Path, data: Path) -> tuple[Path, dict[str, Any]]:
    """The journal converted to Parquet (``berth-analyze convert``), once; the conversion's cost as measured then."""
    directory = data / f"parquet-{events}"
    done = data / f"parquet-{events}.cost.json"
    if not done.exists():
        shutil.rmtree(directory, ignore_errors=True)
        progress(f"converting {events:,} events to Parquet")
        cost = run_checked(berth("convert", "--journal", str(journal), "--out", str(directory)))
        done.write_text(json.dumps(figures(cost)) + "\n")
    return directory, json.loads(done.read_text())


def berth(*args: str) -> list[str]:
    return [PYTHON, "-m", "berth.pipeline.main", *args, "--master", MASTER, "--quiet"]


def duckdb(*args: str) -> list[str]:
    return [PYTHON, "-m", "benchmarks.duckdb_reference", *args, "--threads", str(THREADS)]


def run_checked(command: list[str]) -> Cost:
    cost, result = measure(command, env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"), timeout_s=RUN_TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.decode()[-2000:]}")
    return cost


def load_1m() -> float:
    """The machine's 1-minute load average: recorded beside each section's figures (the machine is shared)."""
    return round(os.getloadavg()[0], 2)


def figures(cost: Cost) -> dict[str, float]:
    return {"wall_s": round(cost.wall_s, 1), "cpu_s": round(cost.cpu_s, 1), "peak_rss_mib": round(cost.peak_rss_mib)}


def summarised(costs: list[Cost]) -> dict[str, Any]:
    return {
        "wall_s": _rounded(spread([c.wall_s for c in costs])),
        "cpu_s": _rounded(spread([c.cpu_s for c in costs])),
        "peak_rss_mib": _rounded(spread([c.peak_rss_mib for c in costs]), 0),
    }


def _rounded(figures_: dict[str, float], digits: int = 1) -> dict[str, float]:
    return {k: (v if k == "runs" else round(v, digits)) for k, v in figures_.items()}


def same_summary(berth_out: Path, duckdb_out: Path) -> dict[str, Any]:
    """Berth's summary.parquet against the reference's, group by group and column by column."""

    def load(path: Path) -> dict[str, dict[str, Any]]:
        rows = pq.read_table(path / "summary.parquet").to_pylist()
        return {r["group_id"]: {**r, "rebalances_by_cause": dict(r["rebalances_by_cause"] or [])} for r in rows}

    ours, theirs = load(berth_out), load(duckdb_out)
    differing = sorted(g for g in ours.keys() | theirs.keys() if ours.get(g) != theirs.get(g))
    return {"groups": len(ours), "groups_differing": len(differing), "first_differing": differing[:5]}


def bench_size(events: int, data: Path, runs: int, extras: bool = True) -> dict[str, Any]:
    """One size: Berth beside both references, run by run; with ``extras``, the subset in Spark and a run with the
    report too (``--no-extras`` leaves them out when the machine is too busy for them: the size then has neither)."""
    journal = journal_for(events, data)
    parquet, convert = parquet_for(events, journal, data)
    out = data / f"out-{events}"
    load_before = load_1m()
    costs: dict[str, list[Cost]] = {"berth": [], "duckdb": [], "duckdb_lambdas": [], "duckdb_subset": []}
    if extras:
        costs["spark_subset"] = []
    for run in range(runs):
        progress(f"{events:,} events, run {run + 1} of {runs}")
        costs["berth"].append(run_checked(berth("--journal", str(parquet), "--out", str(out / "berth"), "--no-report")))
        costs["duckdb"].append(run_checked(duckdb("--journal", str(parquet), "--out", str(out / "duckdb"))))
        lambdas = ("--journal", str(parquet), "--out", str(out / "duckdb-lambdas"), "--moved", "lambdas")
        costs["duckdb_lambdas"].append(run_checked(duckdb(*lambdas)))
        costs["duckdb_subset"].append(run_checked(duckdb("--journal", str(parquet), "--subset")))
        if extras:
            costs["spark_subset"].append(
                run_checked([PYTHON, "-m", "benchmarks.spark_subset", "--journal", str(parquet), "--master", MASTER])
            )
        progress("  " + ", ".join(f"{k} {v[-1].cpu_s:.1f} CPU-s in {v[-1].wall_s:.1f} s" for k, v in costs.items()))
    cpu = {name: spread([c.cpu_s for c in runs_])["median"] for name, runs_ in costs.items()}
    added: dict[str, Any] = {}
    if extras:
        with_report = run_checked(berth("--journal", str(parquet), "--out", str(out / "report")))
        progress(f"  berth with the report: {with_report.cpu_s:.1f} CPU-s in {with_report.wall_s:.1f} s")
        added = {
            "berth_with_report": figures(with_report),
            "cpu_ratio_subset": round(cpu["spark_subset"] / cpu["duckdb_subset"], 2),
        }
    return {
        "events": events,
        "groups": max(1_000, events // EVENTS_PER_GROUP),
        "journal_bytes": sum(f.stat().st_size for f in journal.glob("*.jsonl")),
        "parquet_bytes": sum(f.stat().st_size for f in parquet.rglob("*.parquet")),
        "convert": convert,
        **{name: summarised(runs_) for name, runs_ in costs.items()},
        **added,
        "reference": "joins",
        "cpu_ratio": round(cpu["berth"] / cpu["duckdb"], 2),
        "cpu_ratio_lambdas": round(cpu["berth"] / cpu["duckdb_lambdas"], 2),
        "cpu_ratio_job_to_duckdb_subset": round(cpu["berth"] / cpu["duckdb_subset"], 1),
        "same_summary": same_summary(out / "berth", out / "duckdb"),
        "references_agree": same_summary(out / "duckdb", out / "duckdb-lambdas"),
        "load_1m": [load_before, load_1m()],
    }


def bench_chart(data: Path, runs: int) -> dict[str, Any]:
    """The chart's hourly job at its largest: JSON Lines of the coordinator's default retention, report included."""
    events = CHART_JOURNAL_BYTES // SYNTHETIC_EVENT_BYTES
    journal = journal_for(events, data, groups=max(1, events // EVENTS_PER_GROUP))
    load_before = load_1m()
    costs = []
    for _ in range(runs):
        costs.append(run_checked(berth("--journal", str(journal), "--out", str(data / "out-chart"))))
        progress(f"chart-sized journal ({events:,} events): {costs[-1].cpu_s:.1f} CPU-s in {costs[-1].wall_s:.1f} s")
    return {
        "events": events,
        "journal_bytes": sum(f.stat().st_size for f in journal.glob("*.jsonl")),
        **summarised(costs),
        "load_1m": [load_before, load_1m()],
    }


def bench_small(data: Path, runs: int) -> dict[str, Any]:
    """A 100-event journal to report.html, as berth-demo runs it: the JVM's start and the job's fixed costs.

    The first run on a machine writes the class-data archive (measured on its own, from an empty folder); then
    runs with it and without it (``--class-data off``), interleaved so the machine's load falls on both."""
    journal = journal_for(SMALL_EVENTS, data, groups=2)
    class_data = data / "class-data"
    shutil.rmtree(class_data, ignore_errors=True)
    load_before = load_1m()
    report = ("--journal", str(journal), "--out", str(data / "out-small"))
    first = run_checked(berth(*report, "--class-data", str(class_data)))
    progress(f"{SMALL_EVENTS} events, first run (writes the archive): {first.wall_s:.1f} s, {first.cpu_s:.1f} CPU-s")
    with_archive, without = [], []
    for _ in range(max(runs, 3)):
        with_archive.append(run_checked(berth(*report, "--class-data", str(class_data))))
        without.append(run_checked(berth(*report, "--class-data", "off")))
        progress(
            f"{SMALL_EVENTS} events to a report: {with_archive[-1].wall_s:.1f} s, {with_archive[-1].cpu_s:.1f} CPU-s "
            f"(without the archive: {without[-1].wall_s:.1f} s, {without[-1].cpu_s:.1f} CPU-s)"
        )
    return {
        "events": SMALL_EVENTS,
        **summarised(with_archive),
        "without_class_data": summarised(without),
        "first_run_writing_class_data": figures(first),
        "load_1m": [load_before, load_1m()],
    }


def small_only(data: Path, runs: int) -> Result:
    """``--only-small``: the small journal's section measured again, the other sections kept from the saved
    results (they take hours)."""
    small = bench_small(data, runs)
    saved = json.loads((RESULTS / "pipeline.json").read_text())
    # The small journal's section is the summary's last (and has "; " of its own): everything before it is kept.
    kept = saved["summary"].split(f"{SMALL_EVENTS} events to a report", 1)[0]
    figures_ = {**saved["figures"], "small_journal": small}
    command = saved["command"].split(" (small journal:", 1)[0]
    return Result(
        name="pipeline",
        title=saved["title"],
        command=command + " (small journal: python -m benchmarks.pipeline_bench --only-small)",
        goal=saved["goal"],
        met=goal_met(saved["figures"].get("sizes") or [], small),
        summary=kept + small_summary(small),
        figures=figures_,
        note=saved["note"],
    )


def sizes_only(data: Path, sizes: Sequence[int], runs: int, extras: bool) -> Result:
    """``--only-sizes``: the given sizes measured again; the small journal's and the chart's sections, and sizes
    not measured now, kept from the saved results (a size measured against the first reference says so: it has no
    ``reference``)."""
    saved = json.loads((RESULTS / "pipeline.json").read_text())
    measured = [bench_size(size, data, runs, extras) for size in sizes]
    kept = [r for r in saved["figures"].get("sizes", []) if r["events"] not in sizes]
    all_sizes = sorted([*kept, *measured], key=lambda r: r["events"])
    small = saved["figures"]["small_journal"]
    figures_ = {**saved["figures"], "sizes": all_sizes}
    return Result(
        name="pipeline",
        title=saved["title"],
        command="python -m benchmarks pipeline (sizes: python -m benchmarks.pipeline_bench --only-sizes)",
        goal=GOALS["pipeline"],
        met=goal_met(all_sizes, small),
        summary=sizes_summary(all_sizes) + "; " + small_summary(small),
        figures=figures_,
        note=NOTE,
    )


def sizes_summary(sizes: Sequence[dict[str, Any]]) -> str:
    def one(r: dict[str, Any]) -> str:
        if r.get("reference") != "joins":
            return (
                f"{r['events']:,} events: {r['berth']['cpu_s']['median']:,.0f} CPU-s vs DuckDB's first reference "
                f"(lambdas) {r['duckdb']['cpu_s']['median']:,.0f} ({r['cpu_ratio']}x; not re-measured against the "
                "expert reference)"
            )
        return (
            f"{r['events']:,} events: {r['berth']['cpu_s']['median']:,.0f} CPU-s vs DuckDB "
            f"{r['duckdb']['cpu_s']['median']:,.0f} for the same summary ({r['cpu_ratio']}x; "
            f"{r['cpu_ratio_lambdas']}x against the first reference's {r['duckdb_lambdas']['cpu_s']['median']:,.0f})"
        )

    return "; ".join(one(r) for r in sizes)


def goal_met(sizes: Sequence[dict[str, Any]], small: dict[str, Any]) -> bool | None:
    """The 10M-event ratio against the expert reference within the goal with the same summary, and the small
    journal's report in time (None without a 10M-event measurement against the expert reference)."""
    ten_million = next((r for r in sizes if r["events"] == GOAL_EVENTS and r.get("reference") == "joins"), None)
    if ten_million is None:
        return None
    same = ten_million["same_summary"]["groups_differing"] == 0
    return bool(same and ten_million["cpu_ratio"] <= GOAL_CPU_RATIO and small["wall_s"]["median"] < GOAL_SMALL_SECONDS)


def small_summary(small: dict[str, Any]) -> str:
    without = small["without_class_data"]
    return (
        f"{SMALL_EVENTS} events to a report in {small['wall_s']['median']} s ({small['cpu_s']['median']} CPU-s; "
        f"without the class-data archive {without['wall_s']['median']} s, {without['cpu_s']['median']} CPU-s; "
        f"load average {small['load_1m'][0]}-{small['load_1m'][1]} on 2 cores)"
    )


def main(argv: Sequence[str] | None = None) -> Result:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="comma-separated events")
    parser.add_argument("--runs", type=int, default=RUNS, help="runs of each side per size")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("BERTH_BENCH_DATA") or default_data()))
    parser.add_argument(
        "--only-small",
        action="store_true",
        help="only the 100-event journal to a report, saved into results/pipeline.json beside the other sections",
    )
    parser.add_argument(
        "--only-sizes",
        action="store_true",
        help="only --sizes, saved into results/pipeline.json beside the other sections",
    )
    parser.add_argument(
        "--no-extras", action="store_true", help="with --only-sizes: neither the subset in Spark nor the report run"
    )
    args = parser.parse_args([] if argv is None else argv)
    args.data.mkdir(parents=True, exist_ok=True)
    # Every berth-analyze of the other sections maps the archive the small journal's first run wrote: none of
    # them pays for writing one (the small journal's section reports that once).
    os.environ["BERTH_CLASS_DATA"] = str(args.data / "class-data")
    if args.only_small:
        return small_only(args.data, args.runs)
    if args.only_sizes:
        return sizes_only(args.data, [int(size) for size in args.sizes.split(",")], args.runs, not args.no_extras)
    small = bench_small(args.data, args.runs)
    chart = bench_chart(args.data, 1)
    sizes = [bench_size(int(size), args.data, args.runs) for size in args.sizes.split(",")]
    summary = sizes_summary(sizes) + "; " + small_summary(small)
    return Result(
        name="pipeline",
        title="berth-analyze beside DuckDB (local[2], 2 threads)",
        command="python -m benchmarks pipeline",
        goal=GOALS["pipeline"],
        met=goal_met(sizes, small),
        summary=summary,
        figures={"master": MASTER, "small_journal": small, "chart_journal": chart, "sizes": sizes},
        note=NOTE,
    )


NOTE = (
    "Fresh processes, each measured as a whole process tree (wall, CPU-seconds, peak RSS summed over the "
    "tree); medians of the runs with min and max. Berth and DuckDB read the same Parquet and write the same "
    "summary, compared group by group (same_summary). 'duckdb' is the expert reference (partitions moved by unnest "
    "and hash joins), 'duckdb_lambdas' the first one (nested list lambdas), compared with it group by group "
    "(references_agree); a size without 'reference' was measured against the first one only. 'subset' is the "
    "issue's first comparison (rebalances by group and cause, restart gaps, durations) in DuckDB and, with "
    "Berth's transforms, in Spark. cpu_ratio = Berth / DuckDB (expert) for the same summary, cpu_ratio_lambdas = "
    "Berth / the first reference, cpu_ratio_subset = Spark / DuckDB for the subset, "
    "cpu_ratio_job_to_duckdb_subset = the whole job against DuckDB's subset. The machine is shared with other "
    "work: wall times move with it, CPU-seconds much less; load_1m is the 1-minute load average before and "
    "after each section."
)


if __name__ == "__main__":
    result = main(sys.argv[1:])
    print(json.dumps(result.figures, indent=2))
    result.save()
