"""One run: a seed picks the topology and the faults; the loads run while the faults come; the history is checked.

``run(seed, ...)`` makes a lab, starts the topology, runs every load (``clients.LOADS``) for ``seconds``, injects
the faults one after another at moments the seed picks, heals, reads back everything the loads wrote (recorded
like any other operation), stops, and checks the history (``checker``). Beside the loads it records:

- probes of each coordinator every 0.4 s: its ``/readyz``, and a small commit sent to it directly (to a group of
  its own), which is what the checker's readiness rule reads;
- a watchdog: a coordinator process that exits while no fault is acting on it died unasked (a violation); it is
  started again so that the run can go on.

The same seed gives the same topology, faults, durations and load choices (what the machine's timing does to the
interleaving is not the seed's). ``Outcome`` is what the campaign prints and keeps; the history of a run with
violations is written next to its logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from support import loopdisk, netlab

from robustness import faults
from robustness.checker import Plan, check
from robustness.clients import LOADS, Context, Recorder, commit_body, group_path
from robustness.history import History
from robustness.topology import Replicated, Solo, Topology

KINDS = ("sqlite", "replicated")


@dataclass
class Outcome:
    seed: int
    kind: str
    faults: list[str]  # the kinds, in order
    said: list[str]  # what each fault did
    operations: int
    violations: list[str]
    seconds: float
    bugs: str = ""
    history: str = ""  # where the history was written (runs with violations)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def line(self) -> str:
        verdict = "ok" if self.ok else f"{len(self.violations)} VIOLATION(S)"
        return (
            f"seed {self.seed} {self.kind}: {', '.join(self.faults)}: {self.operations} operations, {verdict}"
            f" ({self.seconds:.0f} s)"
        )


def plan_of(seed: int, kind: str | None = None, fault_kinds: list[str] | None = None) -> tuple[str, list[str]]:
    """The topology and the faults a seed picks (the same for the same arguments)."""
    rng = random.Random(seed)
    chosen = kind or rng.choice(KINDS)
    catalogue = faults.SOLO if chosen == "sqlite" else faults.REPLICATED
    picked = fault_kinds or [rng.choice(sorted(catalogue)) for _ in range(rng.randint(2, 3))]
    return chosen, picked


async def run(
    seed: int,
    *,
    kind: str | None = None,
    fault_kinds: list[str] | None = None,
    seconds: float = 20.0,
    bugs: str = "",
    keep: Path | None = None,
) -> Outcome:
    started = time.monotonic()
    chosen, picked = plan_of(seed, kind, fault_kinds)
    rng = random.Random(f"{seed}-run")
    netlab.reap_stale()
    loopdisk.reap_stale()
    workdir = Path(tempfile.mkdtemp(prefix=f"berth-robustness-{seed}-"))
    lab = netlab.Lab().create()
    topology: Topology = Solo(lab, workdir, bugs) if chosen == "sqlite" else Replicated(lab, workdir, bugs)
    history = History()
    plan = Plan()
    said: list[str] = []
    try:
        await asyncio.to_thread(topology.start)
        stop = asyncio.Event()
        ctx = Context(topology.url, Recorder(history), random.Random(f"{seed}-loads"), stop, plan)
        env = faults.FaultEnv(topology, lab, random.Random(f"{seed}-faults"))
        async with aiohttp.ClientSession() as session:
            loads = [asyncio.create_task(load(ctx, session), name=name) for name, load in LOADS.items()]
            watch = asyncio.create_task(_watchdog(topology, env, plan, stop))
            probe = asyncio.create_task(_probes(topology, plan, stop, session))
            await _inject(env, picked, seconds, said, rng)
            stop.set()
            await _finish(loads, 40.0)
            await _finish([watch, probe], 5.0)
            await _read_back(ctx, session)
        report = check(history, plan)
    finally:
        await asyncio.to_thread(topology.stop)
        lab.delete()
    outcome = Outcome(
        seed,
        chosen,
        picked,
        said,
        len(history),
        [str(v) for v in report.violations],
        time.monotonic() - started,
        bugs,
        notes=ctx.notes,
    )
    if not report.ok or keep is not None:
        outcome.history = await asyncio.to_thread(
            _keep, keep or Path(tempfile.gettempdir()) / f"berth-robustness-{seed}", history, plan, workdir
        )
    shutil.rmtree(workdir, ignore_errors=True)
    return outcome


def _keep(target: Path, history: History, plan: Plan, workdir: Path) -> str:
    """The history, the plan and the processes' logs of a run, for a look afterwards; the history's path."""
    target.mkdir(parents=True, exist_ok=True)
    history.write(target / "history.jsonl")
    (target / "plan.json").write_text(json.dumps(dataclasses.asdict(plan), default=sorted))
    for log in workdir.rglob("*.log"):
        shutil.copy(log, target / log.name)
    return str(target / "history.jsonl")


async def _inject(env: faults.FaultEnv, picked: list[str], seconds: float, said: list[str], rng: random.Random) -> None:
    """The faults one after another, each at a moment the seed picks, within the load's ``seconds``."""
    catalogue = faults.SOLO if isinstance(env.topology, Solo) else faults.REPLICATED
    deadline = time.monotonic() + seconds
    slot = seconds / (len(picked) + 1)
    await asyncio.sleep(rng.uniform(2.0, max(2.5, slot)))  # the groups form first
    for name in picked:
        said.append(await catalogue[name](env))
        await asyncio.sleep(rng.uniform(1.0, max(1.5, slot / 2)))
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))


async def _finish(tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
    done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for task in pending:
        task.cancel()
    for task in [*done, *pending]:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def _watchdog(topology: Topology, env: faults.FaultEnv, plan: Plan, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for process in topology.processes:
            if not process.running and id(process) not in env.expected_down:
                await asyncio.sleep(0.3)  # a fault may be just starting it again
                if process.running or id(process) in env.expected_down:
                    continue
                plan.unexpected_exits.append(f"a coordinator exited unasked:\n{process.stderr()[-1500:]}")
                env.expected_down.add(id(process))
                with contextlib.suppress(Exception):
                    await faults._restart_clean(env, process)
                env.expected_down.discard(id(process))
        await asyncio.sleep(0.2)


async def _probes(topology: Topology, plan: Plan, stop: asyncio.Event, session: aiohttp.ClientSession) -> None:
    timeout = aiohttp.ClientTimeout(total=1.0)
    while not stop.is_set():
        for i, process in enumerate(topology.processes):
            if not process.running or not process.probe_url:
                continue
            seen = plan.probes.setdefault(f"coordinator-{i}", [])
            invoke = time.monotonic_ns()
            try:
                async with session.get(f"{process.probe_url}/readyz", timeout=timeout) as answer:
                    seen.append((invoke, time.monotonic_ns(), "ready" if answer.status == 200 else "unready"))
                    if answer.status != 200:
                        continue
                invoke = time.monotonic_ns()
                body = commit_body({("t", 0): invoke})
                path = group_path(f"probe-{i}", "/offsets")
                async with session.post(f"{process.url}{path}", json=body, timeout=timeout) as answer:
                    code = (await answer.json())["error_code"] if answer.status == 200 else None
                seen.append(
                    (invoke, time.monotonic_ns(), "written" if code == 0 else "refused" if code == 15 else "lost")
                )
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError, KeyError):
                pass
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.4)


async def _read_back(ctx: Context, session: aiohttp.ClientSession) -> None:
    """After healing: read every offset group and admin group until answered (recorded, as any read is)."""
    deadline = time.monotonic() + 60
    reads = [("GET", group_path(g, "/offsets?topic=t")) for g in ctx.plan.offset_keys]
    reads += [("GET", group_path(g, "/expected-members")) for g in sorted(ctx.plan.registers)]
    for group in sorted(ctx.plan.admin_groups):
        reads += [("GET", group_path(group, "/expected-members")), ("GET", group_path(group))]
    for method, path in reads:
        while time.monotonic() < deadline:
            answer = await ctx.recorder.raw(session, ctx.url, "final-reader", method, path)
            if answer is not None and answer.get("error_code") not in (14, 15, 16):
                break
            await asyncio.sleep(0.3)
        else:
            ctx.notes.append(f"{path}: never answered after the faults healed")
