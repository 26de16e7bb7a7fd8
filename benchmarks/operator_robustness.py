"""``python -m benchmarks.operator_robustness --runs N``: the operator's leadership under randomized faults during
scale-downs (``tests/support/control_plane/leader_campaign.py`` says what a run does and what is checked).

Each run's seed, plan (fault, moment, sizes), takeover figures and verdict are printed as it ends; a failing seed
reruns alone with ``--seeds SEED``. One world (private network, control plane, coordinator, fleet) serves the whole
campaign. The results are added to ``benchmarks/results/robustness_operator.json`` (every run ever kept, and totals
over them: runs, violations, writes checked, faults by kind, takeover figures by kind, runs per hour); ``--no-save``
keeps them out. Exit status 1 when any run broke a rule.

Needs root (network namespaces), the control plane's binaries and helm/kubectl, as ``make test``'s kube tier does.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, ROOT, machine, progress

sys.path.insert(0, str(ROOT / "tests"))

from support.leader_campaign import KINDS, History, run_once, seeds, summarize
from support.leader_world import LeaderWorld, Timing, missing

RESULTS_FILE = RESULTS / "robustness_operator.json"
COMMAND = "python -m benchmarks.operator_robustness"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--runs", type=int, default=50, help="randomized runs (default 50)")
    parser.add_argument("--seed", type=int, help="first seed (then consecutive ones); default: drawn at random")
    parser.add_argument("--seeds", help="these seeds only, comma-separated (reruns of failing ones)")
    parser.add_argument("--kinds", help=f"only these faults, comma-separated, of: {', '.join(KINDS)}")
    parser.add_argument("--results", type=Path, default=RESULTS_FILE, help="the results file to add to")
    parser.add_argument("--no-save", action="store_true", help="print only, add nothing to the results file")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"{COMMAND}: {why}", file=sys.stderr)
        return 2
    chosen = [int(s) for s in args.seeds.split(",")] if args.seeds else seeds(args.runs, args.seed)
    kinds = args.kinds.split(",") if args.kinds else None
    if kinds and not set(kinds) <= set(KINDS):
        parser.error(f"--kinds: unknown {sorted(set(kinds) - set(KINDS))}")
    timing = Timing()
    records: list[dict[str, Any]] = []
    started = time.monotonic()
    began = datetime.now(UTC).isoformat(timespec="seconds")
    code = commit()  # what the replicas run: each starts from the checkout, so nothing may change meanwhile
    progress(f"operator robustness: {len(chosen)} runs (lease {timing.lease_s:g} s, renew deadline "
             f"{timing.renew_deadline_s:g} s, retry {timing.retry_s:g} s); setting up the world")  # fmt: skip
    failures = 0
    with (
        tempfile.TemporaryDirectory(prefix="berth-robust-") as tmp,
        LeaderWorld(Path(tmp), timing=timing, max_replicas=12 * len(chosen) + 20) as world,
    ):
        history = History(world)
        for number, seed in enumerate(chosen, 1):
            progress(f"run {number}/{len(chosen)}: seed {seed}")
            try:
                result = run_once(world, history, seed, log=print_flush, kinds=kinds)
            except Exception as error:  # the world itself failed: said, and the campaign goes on
                failures += 1
                progress(f"seed {seed}: the run could not be carried out: {error!r}\n{world.dump()}")
                if failures >= 3:
                    progress("three runs in a row could not be carried out: stopping")
                    break
                continue
            failures = 0
            records.append(result.record())
            if not args.no_save:  # after every run: a campaign stopped midway keeps the runs that finished
                save(args.results, summary(records, started, began, code), records, timing, first=len(records) == 1)
    campaign = summary(records, started, began, code)
    hours = campaign["hours"]
    print_flush(
        f"{campaign['runs']} runs in {hours * 60:.0f} min ({campaign['runs_per_hour']} per hour): "
        f"{campaign['violations']} violations, {campaign['runs_late']} runs late, {campaign['operations_checked']}"
        " writes and leaves checked; "
        f"faults {campaign['faults_by_kind']}"
    )
    for seed in campaign["seeds_violated"] + campaign["seeds_late"]:
        print_flush(f"  rerun alone: {COMMAND} --seeds {seed}")
    if not args.no_save and records:
        progress(f"added to {args.results}")
    return 1 if campaign["seeds_violated"] else 0


def summary(records: list[dict[str, Any]], started: float, began: str, code: str) -> dict[str, Any]:
    """The campaign's totals over the runs it finished so far."""
    hours = (time.monotonic() - started) / 3600
    return {
        "started": began,
        "commit": code,
        "hours": round(hours, 3),
        **summarize(records, hours),
        "seeds_violated": [r["seed"] for r in records if not r["ok"]],
        "seeds_late": [r["seed"] for r in records if r["ok"] and r.get("liveness")],
        "machine": machine(),
    }


def save(path: Path, campaign: dict[str, Any], records: list[dict[str, Any]], timing: Timing, *, first: bool) -> None:
    """Write the campaign so far into ``path``: its entry and runs are added on its ``first`` save and replaced on
    the later ones (the campaign's entry is the last, its runs the last ``len(records) - 1`` kept); the totals are
    made again over every run kept."""
    kept: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"campaigns": [], "runs": []}
    kept["command"] = f"{COMMAND} --runs N"
    kept["timing"] = {"lease_s": timing.lease_s, "renew_deadline_s": timing.renew_deadline_s, "retry_s": timing.retry_s}
    entry = {k: v for k, v in campaign.items() if k not in ("takeover_by_kind",)}
    if first:
        kept["campaigns"].append(entry)
    else:
        kept["campaigns"][-1] = entry
        del kept["runs"][len(kept["runs"]) - (len(records) - 1) :]
    kept["runs"] += records
    hours = sum(c["hours"] for c in kept["campaigns"])
    kept["summary"] = summarize(kept["runs"], hours)
    path.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


def commit() -> str:
    """The code the campaign ran: the checkout's commit, marked ``+changes`` when files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def print_flush(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
