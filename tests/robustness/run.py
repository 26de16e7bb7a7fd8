"""One run: a seed picks the topology and the faults; the loads run while the faults come; the history is checked.

``run(seed, ...)`` makes a lab, starts the topology, runs every load (``clients.LOADS``) for ``seconds``, injects
the faults one after another at moments the seed picks, heals, reads back everything the loads wrote (recorded
like any other operation), stops, and checks the history (``checker``). Beside the loads it records:

- probes (``_probes``): every coordinator's readiness, commits to the one that should act, fetches from every one
  that says it is ready: how two replicas acting at once would show, and what the checker's readiness rule reads;
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from support import loopdisk, netlab

from berth.coordinator.store.etcd import EtcdClient
from berth.coordinator.store.etcd.client import EtcdError
from berth.coordinator.store.etcd.keys import Keys
from berth.operator.local.coordinator_process import CoordinatorProcess
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
        return not self.violations and not self.harness_failures

    @property
    def harness_failures(self) -> list[str]:
        """Faults that could not be made (the run then did not test what it says)."""
        return [s for s in self.said if "the fault itself FAILED" in s]

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
        plan.unexpected_exits += await asyncio.to_thread(topology.start)
        stop = asyncio.Event()
        ctx = Context(topology.url, Recorder(history), random.Random(f"{seed}-loads"), stop, plan)
        env = faults.FaultEnv(topology, lab, random.Random(f"{seed}-faults"))
        async with aiohttp.ClientSession() as session:
            loads = [asyncio.create_task(load(ctx, session), name=name) for name, load in LOADS.items()]
            watch = asyncio.create_task(_watchdog(topology, env, plan, stop))
            probe = asyncio.create_task(_probes(topology, lab, ctx, plan, stop))
            await _inject(env, picked, seconds, said, rng)
            stop.set()
            await _finish(loads, 40.0)
            await _finish([watch, probe], 5.0)
            await _read_back(ctx, session)
            report = check(history, plan)
            if not report.ok:
                await _keep_journal(ctx, session, workdir / "journal.jsonl")
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


async def _keep_journal(ctx: Context, session: aiohttp.ClientSession, path: Path) -> None:
    """The coordinator's journal, as it stands after the run, beside a failed run's history: what the coordinator
    did (each rebalance and its cause, expiries, loads) that the clients' answers do not say."""
    after, lines = 0, []
    try:
        for _ in range(1_000):
            async with session.get(f"{ctx.url}/v1/journal", params={"after": after, "limit": 1000}) as response:
                page = await response.json()
            events = page.get("events") or []
            lines += [json.dumps(event) for event in events]
            if not events or page.get("next", after) == after:
                break
            after = page["next"]
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        lines.append(json.dumps({"journal_read_failed": str(error)}))
    await asyncio.to_thread(path.write_text, "\n".join(lines) + "\n")


def _keep(target: Path, history: History, plan: Plan, workdir: Path) -> str:
    """The history, the plan and the processes' logs of a run, for a look afterwards; the history's path."""
    target.mkdir(parents=True, exist_ok=True)
    history.write(target / "history.jsonl")
    (target / "plan.json").write_text(json.dumps(dataclasses.asdict(plan), default=sorted))
    for log in [*workdir.rglob("*.log"), *workdir.glob("journal.jsonl")]:
        shutil.copy(log, target / log.name)
    return str(target / "history.jsonl")


async def _inject(env: faults.FaultEnv, picked: list[str], seconds: float, said: list[str], rng: random.Random) -> None:
    """The faults one after another, each at a moment the seed picks, within the load's ``seconds``."""
    catalogue = faults.SOLO if isinstance(env.topology, Solo) else faults.REPLICATED
    deadline = time.monotonic() + seconds
    slot = seconds / (len(picked) + 1)
    await asyncio.sleep(rng.uniform(2.0, max(2.5, slot)))  # the groups form first
    for name in picked:
        try:
            said.append(await catalogue[name](env))
        except Exception as exc:  # the harness's failure, not the coordinator's: said, and the run goes on
            said.append(f"{name}: the fault itself FAILED: {exc!r}")
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


async def _probes(topology: Topology, lab: netlab.Lab, ctx: Context, plan: Plan, stop: asyncio.Event) -> None:
    """Every 0.3 s, from the lab's second address (a fault that cuts the clients off leaves the probes alone): each
    coordinator's ``/readyz``; a commit of a unique offset to the group ``probe``, sent directly to the one that should
    act (the SQLite coordinator; the replica etcd's leader key names); and a fetch of it from every coordinator that
    said it was ready. The commits and fetches are history like any other operations (the ``probe`` group is an
    offset register: a replica that answers from a deposed term's memory shows an offset the newest write replaced);
    the readiness answers and the commits' outcomes per coordinator feed the checker's readiness rule."""
    plan.offset_keys["probe"] = {("t", 0)}
    holder_of = _holder_reader(topology)
    connector = aiohttp.TCPConnector(local_addr=(lab.second, 0))
    timeout = aiohttp.ClientTimeout(total=1.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        while not stop.is_set():
            ready = []
            for i, process in enumerate(topology.processes):
                if not process.running or not process.probe_url:
                    continue
                seen = plan.probes.setdefault(f"coordinator-{i}", [])
                invoke = time.monotonic_ns()
                try:
                    async with session.get(f"{process.probe_url}/readyz") as answer:
                        yes = answer.status == 200
                except (TimeoutError, aiohttp.ClientError, OSError):
                    continue
                seen.append((invoke, time.monotonic_ns(), "ready" if yes else "unready"))
                if yes:
                    ready.append(process)
            holder = await holder_of()
            if holder is not None and holder.running:
                i = topology.processes.index(holder)
                body = commit_body({("t", 0): next(ctx.offsets)})
                invoke = time.monotonic_ns()
                answer = await ctx.recorder.raw(
                    session, holder.url, "probe-writer", "POST", group_path("probe", "/offsets"), body
                )
                kind = (
                    "lost"
                    if answer is None
                    else "written"
                    if answer["error_code"] == 0
                    else "refused"
                    if answer["error_code"] == 15
                    else "lost"
                )
                plan.probes.setdefault(f"coordinator-{i}", []).append((invoke, time.monotonic_ns(), kind))
            for process in ready:
                i = topology.processes.index(process)
                path = group_path("probe", "/offsets?topic=t")
                await ctx.recorder.raw(session, process.url, f"probe-reader-{i}", "GET", path)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.3)


def _holder_reader(topology: Topology) -> Callable[[], Awaitable[CoordinatorProcess | None]]:
    """Who should act now: the SQLite coordinator, or the replica named by etcd's leader key."""
    if isinstance(topology, Solo):

        async def solo() -> CoordinatorProcess | None:
            return topology.process

        return solo
    client = EtcdClient(tuple(topology.etcd.endpoints), timeout_s=1.0)
    leader = Keys("/berth/").leader
    by_name = {p.etcd.name: p for p in topology.processes if p.etcd is not None}

    async def replicated() -> CoordinatorProcess | None:
        try:
            found, _, _, _ = await asyncio.to_thread(client.range, leader)
        except EtcdError:
            return None
        return by_name.get(json.loads(found[0].value)["name"]) if found else None

    return replicated


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
