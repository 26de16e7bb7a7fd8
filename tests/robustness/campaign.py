"""A campaign: many runs, each from its seed, printed as they go and kept in ``benchmarks/results/robustness.json``.

``python -m robustness --runs N [--seed S] [--kind sqlite|replicated] [--faults a,b] [--seconds 20]``
``[--bugs ...]`` (from ``tests/``; ``make robustness`` runs it); ``--check DIR`` checks a kept run's history again.
Seeds are S, S+1, ...; the first seed defaults to one drawn at random and printed, so a campaign never repeats the
last one by accident and any run can be repeated alone with ``--runs 1 --seed <its seed>``. Each run prints one
line (its seed, topology, faults, operations checked, verdict, time) and, for a run with violations, each violation
and where its history and logs were kept.

The results file accumulates over campaigns: ``runs``, ``violations`` (runs with one or more), ``operations_checked``,
``faults`` (how many runs had each fault kind, per topology), ``runs_per_hour`` (of the last campaign), and each
campaign's summary (``campaigns``); runs with ``--bugs`` (the checker's own tests) are not counted there. The file
is rewritten after every run (the campaign's own entry grows), so a campaign stopped half way keeps the runs it
finished; one campaign at a time writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from robustness import faults
from robustness.checker import Plan, check
from robustness.history import History
from robustness.run import KINDS, Outcome, run

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "robustness.json"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m robustness", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="how many runs (default 10)")
    p.add_argument("--seed", type=int, default=None, help="the first run's seed (default: one at random, printed)")
    p.add_argument("--kind", choices=KINDS, default=None, help="one topology only (default: the seed picks)")
    p.add_argument("--faults", default=None, help="comma-separated fault kinds for every run (default: the seed picks)")
    p.add_argument("--seconds", type=float, default=20.0, help="load per run, seconds (default 20)")
    p.add_argument("--bugs", default="", help="BERTH_FAILPOINTS for the coordinators (re-introduced bugs)")
    p.add_argument("--results", type=Path, default=RESULTS, help="where the record accumulates")
    p.add_argument("--no-record", action="store_true", help="do not add this campaign to the record")
    p.add_argument("--list", action="store_true", help="list the fault kinds and exit")
    p.add_argument("--check", type=Path, default=None, metavar="DIR", help="check a kept run again (its history)")
    return p.parse_args(argv)


async def campaign(args: argparse.Namespace) -> list[Outcome]:
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**9)
    print(f"robustness: {args.runs} run(s) from seed {first}", flush=True)
    keep = not args.no_record and not args.bugs
    base: dict[str, Any] = json.loads(args.results.read_text()) if keep and args.results.exists() else {}
    started = time.monotonic()
    outcomes: list[Outcome] = []
    fault_kinds = args.faults.split(",") if args.faults else None
    for i in range(args.runs):
        outcome = await run(first + i, kind=args.kind, fault_kinds=fault_kinds, seconds=args.seconds, bugs=args.bugs)
        outcomes.append(outcome)
        print(f"[{i + 1}/{args.runs}] {outcome.line()}", flush=True)
        for said in outcome.said:
            print(f"    fault: {said}", flush=True)
        for violation in outcome.violations:
            print(f"    VIOLATION {violation}", flush=True)
        if outcome.history:
            print(f"    history and logs: {Path(outcome.history).parent}", flush=True)
        if keep:
            data = record(base, outcomes, time.monotonic() - started, first)
            args.results.write_text(json.dumps(data, indent=2) + "\n")
    return outcomes


def record(base: dict[str, Any], outcomes: list[Outcome], took_s: float, first_seed: int) -> dict[str, Any]:
    """The record ``base`` (what earlier campaigns left) with this campaign's runs so far added."""
    data = json.loads(json.dumps(base))
    runs = [o for o in outcomes if not o.bugs]
    faults_by: dict[str, Counter[str]] = {k: Counter(data.get("faults", {}).get(k, {})) for k in KINDS}
    for o in runs:
        faults_by[o.kind].update(set(o.faults))
    data["runs"] = data.get("runs", 0) + len(runs)
    data["violations"] = data.get("violations", 0) + sum(1 for o in runs if not o.ok)
    data["operations_checked"] = data.get("operations_checked", 0) + sum(o.operations for o in runs)
    data["runs_by_topology"] = dict(Counter(data.get("runs_by_topology", {})) + Counter(o.kind for o in runs))
    data["faults"] = {k: dict(sorted(v.items())) for k, v in faults_by.items()}
    data["fault_kinds"] = {"sqlite": sorted(faults.SOLO), "replicated": sorted(faults.REPLICATED)}
    data["runs_per_hour"] = round(len(runs) / took_s * 3600, 1) if took_s and runs else data.get("runs_per_hour")
    data.setdefault("campaigns", []).append(
        {
            "date": time.strftime("%Y-%m-%d"),
            "first_seed": first_seed,
            "runs": len(runs),
            "violations": sum(1 for o in runs if not o.ok),
            "operations_checked": sum(o.operations for o in runs),
            "seconds": round(took_s),
            "failing_seeds": [o.seed for o in runs if not o.ok],
        }
    )
    return data


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.check is not None:
        report = check(History.read(args.check / "history.jsonl"), Plan.read(args.check / "plan.json"))
        for violation in report.violations:
            print(f"VIOLATION {violation}")
        checked = f"{report.operations_checked} operations, {report.keys_checked} keys"
        print(f"{checked}: {len(report.violations)} violations")
        return 0 if report.ok else 1
    if args.list:
        print("sqlite:     " + ", ".join(sorted(faults.SOLO)))
        print("replicated: " + ", ".join(sorted(faults.REPLICATED)))
        return 0
    started = time.monotonic()
    outcomes = asyncio.run(campaign(args))
    took = time.monotonic() - started
    failed = [o for o in outcomes if not o.ok]
    print(
        f"robustness: {len(outcomes)} run(s), {sum(o.operations for o in outcomes)} operations checked,"
        f" {len(failed)} with violations ({', '.join(str(o.seed) for o in failed) or 'none'}), {took / 60:.1f} min",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
