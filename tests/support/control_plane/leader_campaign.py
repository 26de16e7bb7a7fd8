"""Randomized leader faults during scale-downs, each run drawn from a seed that is printed, checked afterwards from
what the API server and the coordinator recorded (``support.leader_history``).

A run (:func:`run_once`): two replicas, one leading (``support.leader_world``); the fleet at ``high`` replicas,
Ready and Stable; then ``kubectl scale`` down to ``low`` and, at a moment drawn from the seed, a fault on the leader
(or, now and then, on the standby):

=====================  ====================================================================================
kind                   what happens
=====================  ====================================================================================
kill                   ``kill -9``; the Deployment's part (``LeaderWorld.tend``) starts a new replica
graceful               ``SIGTERM``: the leader releases its Lease and exits; a new replica is started
freeze                 ``SIGSTOP`` for a drawn time (shorter or longer than the Lease), then ``SIGCONT``
cut                    the leader's host blackholed (iptables DROP both ways): API server and coordinator
cut_api                the same, for the API server's port only
reset                  every connection of the leader's host reset and refused (REJECT with tcp-reset)
lease_delete           ``kubectl delete lease`` by the cluster's admin
lease_expire           the Lease edited to look expired (``renewTime`` in the past, ``leaseDurationSeconds: 1``)
crash_before_leave     failpoint ``operator.before_leave=crash``: the leader dies right before the batch leave
crash_after_leave      failpoint ``operator.after_leave=crash``: it dies once the leave was answered, nothing
                       recorded
stall_before_leave     failpoint ``operator.before_leave=sleep``: the leader's event loop stands still before
                       the leave, past the Lease, then goes on
reinstall              ``helm uninstall``, the replicas stopped as their pods would be, ``helm install``, new
                       replicas
standby_kill           ``kill -9`` of the standby (nothing may change)
=====================  ====================================================================================

The moment is ``scaling`` (a drawn delay after the scale) or ``terminating`` (the departing pods held Terminating
by the fake kubelet until the fault is on: it lands between the shrink and the leave). Afterwards the run waits for
the fleet to converge (Ready, the group Stable with exactly the remaining instances), then checks:

- the leadership rules of ``support.leader_history`` over every write of the run (API server and coordinator);
- exactly one batch leave in the coordinator's journal, naming exactly the departed instances;
- convergence within the deadline.

:func:`takeover` figures (the fault to another replica's Lease, and to its first write) are kept per kind.
"""

from __future__ import annotations

import contextlib
import random
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from support.kube import wait_until
from support.leader_history import (
    Leave,
    Term,
    Write,
    apiserver_writes,
    batch_leaves,
    check,
    coordinator_writes,
    identity_of,
    lease_terms,
    stamp,
    takeover,
)
from support.leader_world import FLEET, GROUP, LEASE, NAMESPACE, LeaderWorld, Replica

KINDS: dict[str, int] = {
    "kill": 3,
    "graceful": 2,
    "freeze": 3,
    "cut": 2,
    "cut_api": 1,
    "reset": 2,
    "lease_delete": 2,
    "lease_expire": 1,
    "crash_before_leave": 1,
    "crash_after_leave": 1,
    "stall_before_leave": 2,
    "reinstall": 1,
    "standby_kill": 1,
}
FAILPOINT_KINDS = {"crash_before_leave", "crash_after_leave", "stall_before_leave"}
LASTING = {"freeze", "cut", "cut_api", "reset"}
CONVERGE_S = 120.0


@dataclass(frozen=True)
class Plan:
    seed: int
    kind: str
    moment: str  # scaling, terminating
    delay_s: float  # after the scale (scaling), or after the pods are Terminating (terminating)
    duration_s: float  # freeze, cut, reset, stall; 0 for the others
    high: int
    low: int

    def describe(self) -> str:
        lasting = f" {self.duration_s:.1f} s" if self.duration_s else ""
        return f"{self.kind}{lasting} at {self.moment}+{self.delay_s:.2f} s, {self.high}->{self.low}"


def plan(seed: int, lease_s: float, kinds: Iterable[str] | None = None) -> Plan:
    """The run that ``seed`` draws (the same seed, the same plan)."""
    rng = random.Random(seed)
    chosen = [k for k in KINDS if kinds is None or k in set(kinds)]
    kind = rng.choices(chosen, weights=[KINDS[k] for k in chosen])[0]
    moment = rng.choice(["scaling", "terminating"])
    delay = rng.uniform(0.0, 1.5) if moment == "scaling" else rng.uniform(0.0, 0.3)
    duration = 0.0
    if kind in LASTING or kind == "stall_before_leave":
        duration = lease_s * rng.uniform(0.3, 2.5)
    high = rng.choice([3, 4])
    low = rng.randint(1, high - 1)
    return Plan(seed, kind, moment, round(delay, 3), round(duration, 2), high, low)


@dataclass
class RunResult:
    seed: int
    plan: str
    kind: str
    ok: bool  # no safety rule broken
    violations: list[str]  # the safety rules broken
    liveness: list[str]  # what did not happen in time (the departed members expired before the leave; no convergence)
    leaves: list[list[str]]
    checked: int
    takeover_s: float | None  # the fault -> another replica took the Lease
    first_write_s: float | None  # the fault -> that replica's first write
    margin_s: float | None
    #: the fault -> the new leader's first request to the API server (it was up and looking), when after the fault
    new_leader_up_s: float | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        verdict = "ok" if self.ok and not self.liveness else "VIOLATED" if not self.ok else "LATE"
        taken = (
            f"takeover {self.takeover_s:.2f} s (first write {self.first_write_s:.2f} s)"
            if self.takeover_s is not None and self.first_write_s is not None
            else (f"takeover {self.takeover_s:.2f} s" if self.takeover_s is not None else "no takeover")
        )
        margin = f", margin {self.margin_s:.2f} s" if self.margin_s is not None else ""
        leaves = "; ".join(",".join(ids) for ids in self.leaves) or "none"
        text = f"seed {self.seed}: {self.plan}: {taken}{margin}; leaves [{leaves}]; {self.checked} writes: {verdict}"
        return text + "".join(f"\n    {v}" for v in [*self.violations, *self.liveness])

    def record(self) -> dict[str, Any]:
        return asdict(self)


class History:
    """The campaign's record so far: the Lease's terms, every replica's writes, read incrementally."""

    def __init__(self, world: LeaderWorld) -> None:
        self.world = world
        self.offset = 0
        self.lease_events: list[dict[str, Any]] = []
        self.writes: list[Write] = []
        self.journal: list[dict[str, Any]] = []
        self.identities: dict[str, str] = {}  # replica name (its token) -> Lease identity
        self.first_request: dict[str, float] = {}  # Lease identity -> its first request to the API server

    def read(self) -> tuple[list[Write], list[dict[str, Any]]]:
        """Bring the record up to date; the writes and journal events that are new."""
        assert self.world.plane is not None
        events, self.offset = self.world.plane.audit(self.offset)
        for event in events:
            identity = identity_of(event)
            if identity and "_" in identity:
                self.identities.setdefault(identity.rsplit("_", 1)[0], identity)
                self.first_request.setdefault(identity, stamp(event["requestReceivedTimestamp"]))
        self.lease_events += [e for e in events if e.get("stage") == "ResponseComplete"]
        journal = self.world.journal()
        self.journal += journal
        new = apiserver_writes(events, NAMESPACE, LEASE) + coordinator_writes(journal, self.identities)
        self.writes += new
        return new, journal

    def terms(self) -> list[Term]:
        return lease_terms(self.lease_events, NAMESPACE, LEASE)

    def read_until(self, done: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        """Read until ``done()`` holds or ``timeout_s`` has passed; whether it held. The API server logs a Lease write
        once it has answered it, so its audit log may lag behind what a replica's watch has already shown."""

        def caught_up() -> bool:
            self.read()
            return done()

        try:
            wait_until(caught_up, "the record", timeout_s=timeout_s)
        except AssertionError:
            return False
        return True


def run_once(
    world: LeaderWorld,
    history: History,
    seed: int,
    log: Callable[[str], None] = print,
    kinds: Iterable[str] | None = None,
) -> RunResult:
    return run_plan(world, history, plan(seed, world.timing.lease_s, kinds), log)


def run_plan(world: LeaderWorld, history: History, p: Plan, log: Callable[[str], None] = print) -> RunResult:
    """One run as ``p`` says (see the module docstring)."""
    started = time.monotonic()
    seed = p.seed
    assert world.kubelet is not None
    history.read()
    writes_before = len(history.writes)
    prepare(world, p)
    history.read()
    journal_before = len(history.journal)
    departing = [f"{FLEET}-{i}" for i in range(p.low, p.high)]
    leader = world.wait_for_leader()
    target = world.standby() if p.kind == "standby_kill" else leader
    assert target is not None
    if p.moment == "terminating":
        world.kubelet.hold(*departing)
    scaled_at = time.time()
    world.scale(p.low)
    if p.moment == "terminating":
        # The StatefulSet deletes one pod at a time, the highest ordinal first (OrderedReady): held, it stays.
        wait_until(lambda: terminating(world, departing[-1]), f"{departing[-1]} Terminating")
    if p.kind not in FAILPOINT_KINDS:
        time.sleep(p.delay_s)
    world.busy_hosts.add(target.host.name)
    try:
        fault_at, notes = inflict(world, p, target, scaled_at)
    finally:
        world.busy_hosts.discard(target.host.name)
        world.kubelet.release()
    not_converged = ""
    try:
        world.wait_converged(p.low, "the fleet converged", timeout_s=CONVERGE_S)
    except AssertionError as error:  # a liveness finding of the run, with the world as it was then
        not_converged = f"not converged {CONVERGE_S:g} s after the fault: {error}"
    with contextlib.suppress(AssertionError):
        world.wait_for_leader(timeout_s=CONVERGE_S)  # a takeover the scale-down did not wait for is measured too
    time.sleep(world.timing.retry_s)  # late writes of a deposed replica, if any, are in the record
    history.read()
    writes = history.writes[writes_before:]
    journal = history.journal[journal_before:]
    terms = history.terms()
    verdict = check(terms, writes, precision_s=0.001)
    violations = [str(v) for v in verdict.violations]
    leaves = batch_leaves(journal, GROUP)
    broken, late = leave_rules(leaves, journal, departing)
    violations += broken
    liveness = late
    if p.kind in ("graceful", "reinstall"):
        violations += released(terms, target_identity(history, target), since=scaled_at)
    if not_converged:
        liveness.append(not_converged)
    taken = None
    if p.kind != "standby_kill":
        taken = takeover(terms, writes, after=fault_at, previous=target_identity(history, target))
    result = RunResult(
        seed=seed,
        plan=p.describe(),
        kind=p.kind,
        ok=not violations,
        violations=violations,
        liveness=liveness,
        leaves=[list(leave.ids) for leave in leaves],
        checked=verdict.checked + len(leaves),
        takeover_s=None if taken is None else round(taken.acquired_s, 3),
        first_write_s=None if taken is None or taken.first_write_s is None else round(taken.first_write_s, 3),
        margin_s=None if verdict.margin_s is None else round(verdict.margin_s, 3),
        new_leader_up_s=up_after(history, taken.holder if taken else None, fault_at),
        seconds=round(time.monotonic() - started, 1),
        notes=notes,
    )
    log(result.line())
    return result


def up_after(history: History, identity: str | None, fault_at: float) -> float | None:
    first = history.first_request.get(identity or "")
    return None if first is None or first < fault_at else round(first - fault_at, 3)


def leave_rules(
    leaves: list[Leave], journal: list[dict[str, Any]], departing: list[str]
) -> tuple[list[str], list[str]]:
    """The batch-leave rules of a scale-down: (safety) at most one batch leave, naming departed instances only, none
    of them twice; (liveness) every departed instance left by it, none by its session expiring first (no leader
    could act in time: a leadership lost twice in a row on a starved machine)."""
    found = [list(leave.ids) for leave in leaves]
    named = [instance for leave in leaves for instance in leave.ids]
    broken = []
    if len(leaves) > 1 or len(named) != len(set(named)) or not set(named) <= set(departing):
        broken.append(f"one batch leave of {departing}: found {found}")
    expired = sorted(
        e["group_instance_id"] for e in journal if e.get("group_id") == GROUP and e.get("type") == "member_expired"
    )
    late = []
    if not broken and sorted(named) != departing:
        gone = sorted(set(departing) - set(named))
        why = "their sessions expired first" if set(gone) <= set(expired) else "nor did their sessions expire"
        late.append(f"the batch leave of {departing} named {named}: {gone} did not leave by it ({why})")
        if not set(gone) <= set(expired):
            broken.append(f"{gone} never left the group")
    return broken, late


def released(terms: list[Term], identity: str, *, since: float) -> list[str]:
    """The rule for a graceful stop: the stopping leader released its Lease (its last Lease write names no holder)."""
    if any(t.holder == "" and t.released_by == identity and t.started >= since for t in terms):
        return []
    return [f"a graceful stop releases the Lease: {identity} stopped without releasing it"]


def target_identity(history: History, replica: Replica) -> str:
    return history.identities.get(replica.name, replica.name)


def terminating(world: LeaderWorld, pod: str) -> bool:
    assert world.kube is not None
    found = world.kube.get("pod", pod, namespace=NAMESPACE)
    return found is None or bool((found.get("metadata") or {}).get("deletionTimestamp"))


def prepare(world: LeaderWorld, p: Plan) -> None:
    """Two replicas, the leader with the run's failpoint when it has one (no other replica with one); the fleet at
    ``high``, converged."""
    world.wanted = 2
    for replica in [r for r in world.replicas if r.env]:
        world.stop_replica(replica)  # an earlier run's failpoint must not act in this one
    if p.kind in FAILPOINT_KINDS:
        failpoint = {
            "crash_before_leave": "operator.before_leave=crash@1",
            "crash_after_leave": "operator.after_leave=crash@1",
            "stall_before_leave": f"operator.before_leave=sleep:{int(p.duration_s * 1000)}@1",
        }[p.kind]
        make_leader(world, {"BERTH_FAILPOINTS": failpoint})
    world.tend()
    world.wait_for_leader()
    fleet = world.fleet()
    if not fleet:
        world.apply_fleet(p.high)
    elif (fleet.get("spec") or {}).get("replicas") != p.high:
        world.scale(p.high)
    world.wait_converged(p.high, f"{p.high} members", timeout_s=CONVERGE_S)


def make_leader(world: LeaderWorld, env: dict[str, str]) -> Replica:
    """A replica started with ``env`` leads: the leaders before it are stopped gracefully (their Lease released)."""
    world.wanted = 0
    chosen = world.start_replica(env)
    for _ in range(6):
        leader = world.wait_for_leader()
        if leader is chosen:
            break
        world.stop_replica(leader)
    else:
        raise AssertionError(f"{chosen.name} did not become the leader")
    world.wanted = 2
    return chosen


def inflict(world: LeaderWorld, p: Plan, target: Replica, scaled_at: float) -> tuple[float, list[str]]:
    """Apply the fault of ``p`` to ``target``, and take it back when it lasts: when it struck (for the takeover's
    figures), and notes on what happened."""
    assert world.kube is not None and world.plane is not None and world.kubelet is not None
    kind = p.kind
    at = time.time()
    notes: list[str] = []
    if kind in LASTING:  # the departing pods go while the fault lasts: the leave falls due meanwhile
        threading.Timer(random.Random(p.seed).uniform(0.2, 1.0), world.kubelet.release).start()
    if kind in ("kill", "standby_kill"):
        target.signal(signal.SIGKILL)
    elif kind == "graceful":
        target.signal(signal.SIGTERM)
    elif kind == "freeze":
        target.signal(signal.SIGSTOP)
        time.sleep(p.duration_s)
        target.signal(signal.SIGCONT)
    elif kind in ("cut", "cut_api", "reset"):
        gateway = world.lab.gateway
        if kind == "cut":
            target.host.block(gateway)
        elif kind == "cut_api":
            world.cut_from_api(target)
        else:
            reset = ["REJECT", "--reject-with", "tcp-reset"]
            target.host.sh("iptables", "-I", "OUTPUT", "-d", gateway, "-p", "tcp", "-j", *reset)
        time.sleep(p.duration_s)
        target.host.heal()
    elif kind == "lease_delete":
        world.kube.kubectl("delete", "lease", LEASE, "-n", NAMESPACE)
    elif kind == "lease_expire":
        patch = '{"spec": {"renewTime": "2000-01-01T00:00:00.000000Z", "leaseDurationSeconds": 1}}'
        world.kube.kubectl("patch", "lease", LEASE, "-n", NAMESPACE, "--type=merge", "-p", patch)
    elif kind in ("crash_before_leave", "crash_after_leave"):
        world.kubelet.release()  # the leave is due once the pods are gone: the failpoint acts there
        wait_until(lambda: not target.alive, "the failpoint's crash", timeout_s=60, every_s=0.02)
        at = time.time()
    elif kind == "stall_before_leave":
        world.kubelet.release()
        wait_until(lambda: stalled(world, p, scaled_at), "the stall", timeout_s=60)
        at = time.time()
    elif kind == "reinstall":
        world.wanted = 0
        world.uninstall()
        time.sleep(random.Random(p.seed).uniform(0.2, 1.0))  # the garbage collector reaches the pods
        for replica in list(world.replicas):
            replica.signal(signal.SIGTERM)
        world.install()
        at = time.time()  # the new release's operator may act from here on
        world.wanted = 2
    return at, notes


def stalled(world: LeaderWorld, p: Plan, since: float) -> bool:
    """The departing pods are gone: the leave is due, and the leader's event loop stands still before it."""
    assert world.kubelet is not None
    gone = world.kubelet.gone_at
    return all(gone.get(f"{FLEET}-{i}", 0.0) >= since for i in range(p.low, p.high))


# ------------------------------------------------------------------------------------------------------ results


def summarize(records: list[dict[str, Any]], hours: float) -> dict[str, Any]:
    """Totals over ``records`` (every run ever kept): runs, violations, writes checked, faults by kind, takeover
    figures by kind, runs per hour of campaign."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_kind.setdefault(record["kind"], []).append(record)
    takeovers = {}
    for kind, runs in sorted(by_kind.items()):
        acquired = [r["takeover_s"] for r in runs if r["takeover_s"] is not None]
        first = [r["first_write_s"] for r in runs if r["first_write_s"] is not None]
        takeovers[kind] = {
            "runs": len(runs),
            "takeovers": len(acquired),
            "lease_taken_s": spread(acquired),
            "first_write_s": spread(first),
        }
    margins = [r["margin_s"] for r in records if r.get("margin_s") is not None]
    return {
        "runs": len(records),
        "violations": sum(len(r["violations"]) for r in records),
        "runs_violated": sum(1 for r in records if not r["ok"]),
        "runs_late": sum(1 for r in records if r["ok"] and r.get("liveness")),
        "operations_checked": sum(r["checked"] for r in records),
        "faults_by_kind": {kind: len(runs) for kind, runs in sorted(by_kind.items())},
        "takeover_by_kind": takeovers,
        "smallest_margin_s": min(margins) if margins else None,
        "runs_per_hour": round(len(records) / hours, 1) if hours > 0 else None,
    }


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 2),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 2),
        "max": round(ordered[-1], 2),
        "min": round(ordered[0], 2),
    }


def seeds(count: int, first: int | None = None) -> list[int]:
    """``count`` seeds: from ``first`` on, or drawn at random (printed with each run, so any reruns alone)."""
    if first is not None:
        return list(range(first, first + count))
    rng = random.SystemRandom()
    return [rng.randrange(1, 10**9) for _ in range(count)]
