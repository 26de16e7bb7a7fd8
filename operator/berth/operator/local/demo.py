"""``berth-demo``: static membership at work on one machine, in one command (``make demo``).

An embedded coordinator on a temporary data directory (or ``--data-dir``) and a fleet of member processes
reconciled by the operator's own loop (``FleetPass`` on local ports: ``demo_support``), which sizes the session
timeout, pre-registers, scales, leaves and keeps the fleet's status as the operator does. Scenarios, with live
progress lines:

1. rolling restart of every static member: expect 0 rebalances and 0 partitions moved;
2. scale-down 6 -> 4: one batch leave the moment the processes are gone, one rebalance, partitions reassigned
   within about a second instead of after the session timeout;
3. scale-up 4 -> 6 with pre-registration: one rebalance for both newcomers;
4. the same rolling restart with dynamic members, for contrast.

It ends with a table (``--json``: the same rows as JSON) and, when the Spark pipeline is installed, the
pipeline's report on the journal the run produced. A temporary directory is removed at the end unless the report
was written into it (then its path is printed).

The report and the table count the same journal: every rebalance the journal holds is in a row of the table (the
fleets forming are rows too), and nothing after the scenarios is journaled. The fleets run until the last
scenario has ended and the coordinator has stopped; only then are their processes stopped, so the demo's own
teardown (static members expiring, dynamic ones leaving) never reaches the journal. The report sizes its advice
with the heartbeat interval the members ran with, not the pipeline's default.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from berth.coordinator.client import CoordinatorAdmin
from berth.coordinator.formats.advice import AdviceError, read_advice
from berth.operator.adapters.coordinators import Coordinators
from berth.operator.command.cli import HelpFormatter, add_version, quiet_on_closed_pipe
from berth.operator.local.coordinator_process import CoordinatorProcess
from berth.operator.local.demo_support import LocalFleets, Tracker, local_context, reconcile_until_converged
from berth.operator.local.fleet import LocalFleet
from berth.operator.planners.instances import instance_ids
from berth.operator.planners.sizing import size_session_timeout
from berth.operator.planners.statefulset import ENV_HEARTBEAT_INTERVAL_MS, plan_statefulset
from berth.operator.spec.fleet import OperatorDefaults, parse_fleet


@dataclass(frozen=True)
class Row:
    scenario: str
    membership: str
    group_id: str
    rebalances: int
    partitions_moved: int
    seconds_to_reassignment: float


class Demo:
    def __init__(self, args: argparse.Namespace, coordinator_url: str, *, quiet: bool) -> None:
        self.args = args
        self.url = coordinator_url
        self.quiet = quiet
        self.started = time.monotonic()
        self.admin = CoordinatorAdmin(coordinator_url)
        self.coordinators = Coordinators(token=None)
        self.port = self.coordinators.port(coordinator_url)
        self.defaults = OperatorDefaults(
            coordinator_url=coordinator_url, preferred_heartbeat_interval_ms=args.heartbeat_interval_ms
        )
        self.fleets = LocalFleets()
        self.context = local_context(self.fleets, self.coordinators, self.defaults, self.say)
        self.partitions = {f"orders:{p}" for p in range(args.partitions)}
        self.workloads: list[LocalFleet] = []
        # What the static members heartbeat with, as planned for them (the pipeline's advice adds one interval).
        self.heartbeat_interval_ms = args.heartbeat_interval_ms

    def say(self, message: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.started:6.1f}s] {message}", flush=True)

    async def _last_seq(self) -> int:
        seq = 0
        async for event in self.admin.journal_events(after=0, page_size=10_000):
            seq = int(event["seq"])
        return seq

    async def rebalances_since(self, group_id: str, seq: int) -> int:
        count = 0
        async for event in self.admin.journal_events(after=seq, page_size=10_000):
            if event["group_id"] == group_id and event["type"] == "rebalance_started":
                count += 1
        return count

    def fleet_object(self, name: str, group_id: str, replicas: int) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": "local", "uid": f"local-{name}"},
            "spec": {
                "groupId": group_id,
                "replicas": replicas,
                "coordinator": {"url": self.url},
                "sessionTimeout": {"policy": "Fixed", "fixedMs": self.args.session_timeout_ms},
                "rebalanceTimeoutMs": 60_000,
                "template": {"spec": {"containers": [{"name": "member", "image": "local"}]}},
            },
        }

    async def start_fleet(self, name: str, group_id: str, *, static: bool) -> tuple[LocalFleet, Tracker]:
        body = self.fleet_object(name, group_id, 0 if static else self.args.members)
        fleet = parse_fleet(body)
        decision = size_session_timeout(
            fleet.spec.session_timeout, fleet.spec.template, None, await self.port.get_config()
        )
        planned = plan_statefulset(fleet, operator_defaults=self.defaults, session_timeout_ms=decision.ms, replicas=0)
        tracker = Tracker()
        workload = LocalFleet(
            name,
            on_event=tracker.on_event,
            static=static,
            extra_env={"BERTH_TOPICS": f"orders:{self.args.partitions}", "BERTH_ASSIGNORS": "sticky,range"},
        )
        self.workloads.append(workload)
        heartbeat = planned.member_env.get(ENV_HEARTBEAT_INTERVAL_MS)
        if static and heartbeat is not None:
            self.heartbeat_interval_ms = int(heartbeat)
        if static:
            self.fleets.add(body, workload)  # the operator's loop applies and scales it
        else:
            await workload.apply(planned)  # dynamic members: no operator, just processes
        self.say(
            f"fleet {name}: {self.args.members} {'static' if static else 'dynamic'} members over orders:"
            f"{self.args.partitions}, session timeout {decision.ms / 1000:.1f} s, heartbeat every "
            f"{heartbeat} ms"
        )
        return workload, tracker

    async def form(self, name: str, group_id: str, workload: LocalFleet, tracker: Tracker) -> Row:
        mark = await self._last_seq()
        started = time.monotonic()
        if workload.static:
            await reconcile_until_converged(self.context, self.fleets, name, replicas=self.args.members)
        else:
            await workload.scale(self.args.members)
        names = set(instance_ids(name, self.args.members))
        await tracker.until(lambda: tracker.covers(names, self.partitions), f"{name} to own every partition")
        generation = next(iter(tracker.assigned.values()))["generation"]
        row = Row(
            "form",
            "static" if workload.static else "dynamic",
            group_id,
            await self.rebalances_since(group_id, mark),
            tracker.moves,
            round(time.monotonic() - started, 2),
        )
        self.say(
            f"{name} formed: generation {generation}, {len(self.partitions)} partitions owned, "
            f"{row.rebalances} rebalance(s)"
        )
        return row

    async def rolling_restart(self, name: str, group_id: str, workload: LocalFleet, tracker: Tracker) -> Row:
        names = set(instance_ids(name, self.args.members))
        mark = await self._last_seq()
        moves_before = tracker.moves
        gaps = []
        for member in instance_ids(name, self.args.members):
            await workload.restart_member(member)
            exited = tracker.exited_at[member]
            await tracker.until(
                lambda: tracker.covers(names, self.partitions), f"{member} to rejoin and every partition to be owned"
            )
            gaps.append(time.monotonic() - exited)
            self.say(f"restarted {member}: every partition owned again {gaps[-1]:.1f} s after it exited")
        rebalances = await self.rebalances_since(group_id, mark)
        row = Row(
            "rolling_restart",
            "static" if workload.static else "dynamic",
            group_id,
            rebalances,
            tracker.moves - moves_before,
            round(sum(gaps) / len(gaps), 2),
        )
        self.say(
            f"rolling restart ({row.membership}): {row.rebalances} rebalances, {row.partitions_moved} partitions moved"
        )
        return row

    async def scale(self, name: str, group_id: str, tracker: Tracker, to: int) -> Row:
        before_names = set(instance_ids(name, max(to, len(tracker.assigned))))
        moves_before = tracker.moves
        names = set(instance_ids(name, to))
        mark = await self._last_seq()
        started = time.monotonic()
        scenario = "scale_down" if to < self.args.members else "scale_up"
        self.say(f"{scenario.replace('_', '-')} to {to} members")
        await reconcile_until_converged(self.context, self.fleets, name, replicas=to)
        await tracker.until(lambda: tracker.covers(names, self.partitions), f"{to} members to own every partition")
        gone = [tracker.exited_at[n] for n in before_names - names if n in tracker.exited_at]
        since = max(gone) if scenario == "scale_down" and gone else started
        seconds = time.monotonic() - since
        row = Row(
            scenario,
            "static",
            group_id,
            await self.rebalances_since(group_id, mark),
            tracker.moves - moves_before,
            round(seconds, 2),
        )
        what = "the processes exited" if scenario == "scale_down" else "the newcomers started"
        self.say(f"{scenario}: {row.rebalances} rebalance(s); every partition owned {seconds:.1f} s after {what}")
        return row

    async def run(self) -> list[Row]:
        """Every scenario, one row each. The fleets keep running: ``close`` stops them, after the coordinator."""
        rows: list[Row] = []
        workload, tracker = await self.start_fleet("orders", "orders", static=True)
        rows.append(await self.form("orders", "orders", workload, tracker))
        rows.append(await self.rolling_restart("orders", "orders", workload, tracker))
        smaller = self.args.members - self.args.scale_by
        rows.append(await self.scale("orders", "orders", tracker, smaller))
        rows.append(await self.scale("orders", "orders", tracker, self.args.members))
        if not self.args.skip_dynamic:
            dynamic, dynamic_tracker = await self.start_fleet("dynamic", "orders-dynamic", static=False)
            rows.append(await self.form("dynamic", "orders-dynamic", dynamic, dynamic_tracker))
            rows.append(await self.rolling_restart("dynamic", "orders-dynamic", dynamic, dynamic_tracker))
        return rows

    async def close(self) -> None:
        """Stop every member process and the clients. Called once the coordinator has stopped, so that stopping the
        fleets (static members expiring, dynamic ones leaving) is not journaled as if it were part of the demo; with
        no coordinator to leave, the members are killed rather than asked to leave."""
        try:
            for workload in self.workloads:
                await workload.close(kill=True)
        finally:
            await self.coordinators.close()
            await self.admin.close()


def print_table(rows: Sequence[Row], session_timeout_ms: int) -> None:
    print()
    print(f"{'scenario':<18}{'membership':<12}{'rebalances':>11}{'partitions moved':>18}{'time to reassignment':>22}")
    for row in rows:
        print(
            f"{row.scenario:<18}{row.membership:<12}{row.rebalances:>11}{row.partitions_moved:>18}"
            f"{row.seconds_to_reassignment:>20.1f} s"
        )
    print(
        f"{'all':<30}{sum(row.rebalances for row in rows):>11}  (the journal's rebalances, as the report counts them)"
    )
    print(
        f"\nWithout the batch leave, a scale-down waits out the session timeout ({session_timeout_ms / 1000:.0f} s) "
        "before anyone takes over the departed members' partitions."
    )


def pipeline_arguments(data_dir: Path, out: Path, heartbeat_interval_ms: int) -> list[str]:
    """``berth-analyze``'s arguments for the demo's journal: the advice adds the heartbeat the members ran with; the
    class-data archive is used when there is one, never written (writing it made the first demo wait about 74 s for
    Spark's JVM after the report was written: issue 30)."""
    return [
        "--journal",
        str(data_dir / "journal"),
        "--out",
        str(out),
        "--heartbeat-interval-ms",
        str(heartbeat_interval_ms),
        "--class-data-write",
        "never",
    ]


def in_short(out: Path, rows: Sequence[Row], session_timeout_ms: int) -> list[str]:
    """The demo's last three lines: the rebalances avoided (the report's card, ``headline.json``), the scale-down's
    saving (the demo's own clock: every partition owned again after the departed processes exited, against the
    session timeout a static member's departure waits for without the batch leave) and the advice
    (``advice.json``). A line whose source is missing says so."""
    lines = []
    try:
        head = json.loads((out / "headline.json").read_text())
        lines.append(f"rebalances avoided: {head['rebalances_avoided']} ({head['rebalances_avoided_detail']})")
    except (OSError, ValueError, KeyError, TypeError):
        lines.append("rebalances avoided: not in the report (no headline.json)")
    down = next((row for row in rows if row.scenario == "scale_down"), None)
    if down is not None:
        saved = session_timeout_ms / 1000 - down.seconds_to_reassignment
        lines.append(
            f"the scale-down: every partition owned {down.seconds_to_reassignment:.1f} s after the departed processes"
            f" exited, {saved:.1f} s sooner than the {session_timeout_ms / 1000:g} s session timeout without the"
            " batch leave"
        )
    try:
        advice = read_advice((out / "advice.json").read_text())
    except (OSError, AdviceError):
        lines.append("the advice: none (no advice.json)")
    else:
        advised = [
            f"group {group}: session timeout {entry.advised_session_timeout_ms / 1000:g} s from {entry.samples}"
            f" restart gap{'s' if entry.samples != 1 else ''}"
            f" ({'confident' if entry.confident else 'not confident yet'})"
            for group, entry in sorted(advice.groups.items())
        ]
        lines.append("the advice: " + ("; ".join(advised) if advised else "none (no restart gap to size it from)"))
    return lines


def run_pipeline_report(data_dir: Path, say: Any, heartbeat_interval_ms: int) -> tuple[bool, Path | None]:
    """Run berth-analyze on the demo's journal: whether it ran (then the directory is kept), and the folder of its
    report (None when it failed or did not run)."""
    if importlib.util.find_spec("pyspark") is None:  # look, don't import: Spark is optional
        say("the Spark pipeline is not installed: skipping its report (pip install 'berth[pipeline]')")
        return False, None
    # This interpreter, not whatever berth-analyze PATH finds: the demo may run from a venv nobody activated.
    analyze = [sys.executable, "-m", "berth.pipeline.main"]
    out = data_dir.parent / "analysis"
    arguments = pipeline_arguments(data_dir, out, heartbeat_interval_ms)
    say(f"running the pipeline on the journal: berth-analyze {' '.join(arguments)}")
    import subprocess

    result = subprocess.run([*analyze, *arguments], check=False)
    if result.returncode == 0:
        say(f"report: {out / 'report.html'}  (advice: {out / 'advice.json'})")
        return True, out
    say(f"the pipeline failed (exit {result.returncode}); the journal is in {data_dir / 'journal'}")
    return True, None


DESCRIPTION = (
    "Static membership at work on one machine, in one command: an embedded coordinator and a fleet of member"
    " processes reconciled by the operator's own loop, through a rolling restart (0 rebalances), a scale-down (one"
    " batch leave), a scale-up with pre-registration (one rebalance) and, for contrast, dynamic members; then a table"
    " and the Spark pipeline's report on the journal it produced."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="berth-demo", description=DESCRIPTION, formatter_class=HelpFormatter)
    add_version(p)
    p.add_argument("--data-dir", type=Path, default=None, help="the coordinator's data dir (default: a new temp dir)")
    p.add_argument("--members", type=int, default=6, help="static members in the fleet")
    p.add_argument("--scale-by", type=int, default=2, help="members removed in the scale-down and added back")
    p.add_argument("--partitions", type=int, default=24, help="partitions of the one topic the members consume")
    p.add_argument("--session-timeout-ms", type=int, default=10_000, help="the members' session timeout")
    p.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=500,
        help="members learn of a rebalance on their next heartbeat: the demo keeps it short",
    )
    p.add_argument("--json", action="store_true", help="print the final table as JSON (and nothing else on stdout)")
    p.add_argument("--no-report", action="store_true", help="skip the Spark pipeline's report at the end")
    p.add_argument("--skip-dynamic", action="store_true", help="skip the dynamic-membership contrast")
    return p


async def amain(args: argparse.Namespace) -> list[Row]:
    temporary = args.data_dir is None
    root = Path(tempfile.mkdtemp(prefix="berth-demo-")) if temporary else args.data_dir.parent
    keep = False
    try:
        data_dir = args.data_dir or root / "coordinator"
        data_dir.mkdir(parents=True, exist_ok=True)
        coordinator = CoordinatorProcess(data_dir).start()
        demo = Demo(args, coordinator.url, quiet=args.json)
        demo.say(f"coordinator on {coordinator.url} (data: {data_dir})")
        try:
            rows = await demo.run()
        finally:
            # The journal ends with the last scenario: stopping the fleets afterwards is not part of the demo.
            coordinator.stop()
            await demo.close()
        if args.json:
            print(json.dumps([asdict(row) for row in rows], indent=2))
        else:
            print_table(rows, args.session_timeout_ms)
            if not args.no_report:
                keep, out = run_pipeline_report(data_dir, demo.say, demo.heartbeat_interval_ms)
                if out is not None:
                    print("\nIn short, from the report:")
                    for line in in_short(out, rows, args.session_timeout_ms):
                        print(f"  {line}")
    finally:
        if temporary and not keep:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return quiet_on_closed_pipe(lambda: run(argv))


def run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.members < 2 or not 0 < args.scale_by < args.members:
        print("berth-demo: error: need --members >= 2 and 0 < --scale-by < --members", file=sys.stderr)
        return 2
    try:
        asyncio.run(amain(args))
    except (TimeoutError, RuntimeError) as exc:
        print(f"berth-demo: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
