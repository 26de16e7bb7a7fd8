"""Benchmark: the watching operator with fleets whose pods run and whose members join (issue 31): ``python -m
benchmarks operator_pods``.

The world of ``benchmarks.operator_world`` (a real control plane with its audit log, the chart's RBAC, a real
coordinator, a ``berth-operator`` as the chart's ServiceAccount and no bound on fleets), plus what
makes pods run without a process each: the stage controller (``tests/support``, run by ``benchmarks.stage_process``:
kwok's job, pods bound to simulated nodes and reported Running and Ready, deletions honoured) and
``benchmarks.pod_members`` (one process playing one static member per running pod against the coordinator, driven by one
watch of the pods). Fleets of ``BERTH_OPERATOR_PODS_PER_FLEET`` (10) pods, ``BERTH_OPERATOR_PODS_FLEETS`` (1,000) of
them, spread over ``BERTH_OPERATOR_PODS_NAMESPACES`` namespaces (a tenth as many as fleets by default: ten fleets a
team; with one, the operator runs with ``--namespace``, else it serves every namespace, the chart's default).
Kubernetes' StatefulSet controller reads its namespace's every pod on each sync of a StatefulSet (to adopt orphans),
so ten thousand pods in one namespace cost the controller manager quadratically: per pod event 5.3 CPU-ms at 1,000
pods, 32.6 at 8,000 (``results/operator_pods_full_size_attempt.json``). The phases:

- **creation**: the fleets created by four ``kubectl create`` at once (a namespace's fleets each); seconds until
  every fleet is Stable (from the benchmark's own watch of the fleets: status for its spec, the group ``Stable`` with
  every instance id a member, ``Ready`` True), each fleet's wait (median, max);
- **the roll**: every fleet rolled at once: by default an annotation added to each fleet's pod template, eight patches
  at a time, which the operator applies ``--max-concurrent-rolls`` fleets at a time (``planners.roll_pacing``); with
  ``BERTH_OPERATOR_PODS_ROLL=statefulsets``, ``kubectl rollout restart statefulset`` of every fleet (a namespace each,
  four at a time), which the StatefulSet controller starts at once (results ``operator_pods_rollout_restart``). Every
  pod replaced, one at a time per fleet, each new pod's member rejoining under its instance id: seconds until every
  pod was replaced and its member back in its generation; the rebalances (generation moves, described at the
  coordinator before and after: the goal is 0); the fleets with their ``Restarted`` Event (and what the Events say),
  seconds until the last;
- **the scale-down**: every fleet's ``spec.replicas`` lowered by one at once: the batch leaves per fleet (the
  operator's ``berth_operator_batch_leaves_total``: the goal is one each), the generation moves (one rebalance each),
  seconds until every fleet recorded its ``lastScaleDown`` and was Stable again;
- for each phase: the operator's CPU-seconds, its API requests (exactly, from the API server's audit log, watches
  left out), the pod watch events (the benchmark's own watch) and the requests per pod event, the
  CPU-seconds of the other processes (API server, controller manager, etcd, coordinator, the members' process,
  the stage controller's: each helper runs in a process of its own); the restart gaps the members saw (old pod's
  member silenced -> its replacement's member started, against the session timeout); the fleets' status changes
  the benchmark's watch saw, per fleet, and the fields each moved (``status_fields_changed``: what the operator's
  status writes were for; a write that changes nothing is no watch event);
  the operator's peak RSS; then **idle**: its requests and CPU over a minute once it has gone quiet.

Figures are printed and saved; nothing is asserted on time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.common import ROOT, Result, progress
from benchmarks.goals import GOALS
from benchmarks.operator_scale import FleetStatusTimes, NamespaceWatch, idle, request_kinds
from benchmarks.operator_world import (
    World,
    cpu_seconds,
    create_fleets,
    fleet_group,
    fleet_name,
    has_status,
    metrics_text,
    rss_mib,
    world,
)
from berth.operator.command.options import DEFAULT_MAX_CONCURRENT_ROLLS

sys.path.insert(0, str(ROOT / "tests"))

from support.coordinator import coordinator_get
from support.fleet_stage import ADMIN_TOKEN, MEMBER_TOKEN

FLEETS = int(os.environ.get("BERTH_OPERATOR_PODS_FLEETS", "1000"))
PODS = int(os.environ.get("BERTH_OPERATOR_PODS_PER_FLEET", "10"))
NAMESPACES = max(1, min(FLEETS, int(os.environ.get("BERTH_OPERATOR_PODS_NAMESPACES", str(max(1, FLEETS // 10))))))
#: Each namespace, with how many fleets it holds (``f-0000``...: a group each, ``<namespace>-f-<n>``).
SPACES = {
    ("pods" if NAMESPACES == 1 else f"pods-{k:03d}"): FLEETS // NAMESPACES + (1 if k < FLEETS % NAMESPACES else 0)
    for k in range(NAMESPACES)
}
#: ``BERTH_OPERATOR_PODS_SESSION_TIMEOUT_MS``: every fleet's session timeout fixed at it (``spec.sessionTimeout``
#: policy Fixed; results ``operator_pods_fixed_session_timeout``), where the operator's defaults estimate one from the
#: pod spec until journal advice says more (a restart that outlasts it costs a rebalance).
SESSION_TIMEOUT_MS = int(os.environ.get("BERTH_OPERATOR_PODS_SESSION_TIMEOUT_MS", "0")) or None
FLEET_SPEC = {"sessionTimeout": {"policy": "Fixed", "fixedMs": SESSION_TIMEOUT_MS}} if SESSION_TIMEOUT_MS else {}
#: Every fleet: its namespace and number.
FLEET_KEYS = [(namespace, i) for namespace, count in SPACES.items() for i in range(count)]
OPERATOR_ARGS = ("--max-fleets-per-namespace", "0")
#: ``BERTH_OPERATOR_PODS_ROLL``: how every fleet is rolled at once. ``fleets`` (the default): an annotation added to
#: each fleet's pod template (``spec.template``), as a change pushed to every fleet would, so the operator applies
#: the new templates a few fleets at a time (``--max-concurrent-rolls``); ``statefulsets``: ``kubectl rollout
#: restart statefulset`` of every fleet, which reaches the StatefulSet controller at once, past the operator.
ROLL = os.environ.get("BERTH_OPERATOR_PODS_ROLL", "fleets")
if ROLL not in ("fleets", "statefulsets"):
    raise SystemExit(f"BERTH_OPERATOR_PODS_ROLL={ROLL!r}: fleets or statefulsets")
ROLL_ANNOTATION = "benchmarks.berth.dev/rolled-at"
#: The StatefulSet controller's client allowance (kube-controller-manager's default is 20 requests/s, burst 30: ten
#: thousand pods created, then each replaced, would wait on it alone). kwok's scale clusters raise it likewise.
CONTROLLER_FLAGS = ("--kube-api-qps=200", "--kube-api-burst=400")
#: Every member here connects from 127.0.0.1, where real pods each have an address of their own: the coordinator's
#: bound per client address (1,000 connections) would refuse the parked joins of a thousand fleets coming up.
COORDINATOR_FLAGS = ("--max-connections-per-client", "0")
SELECTOR = "berth.dev/fleet"
#: A phase's allowance; generous, because a busy 2-core machine is where it runs.
PHASE_TIMEOUT_S = float(os.environ.get("BERTH_OPERATOR_PODS_TIMEOUT_S", "3600"))
#: The whole run's allowance (``BERTH_OPERATOR_PODS_BUDGET_S``, from the benchmark's start; none by default): the
#: phase under way when it runs out stops there, its cost so far recorded, and the results are saved.
BUDGET_ENDS = time.monotonic() + float(os.environ.get("BERTH_OPERATOR_PODS_BUDGET_S", "inf"))


def allowance() -> float:
    """How long the next wait may take: ``PHASE_TIMEOUT_S``, or what is left of the run's budget if less."""
    return max(1.0, min(PHASE_TIMEOUT_S, BUDGET_ENDS - time.monotonic()))


GOAL = GOALS["operator_pods"]


def group_status(fleet: Any) -> dict[str, Any]:
    return dict((fleet.get("status") or {}).get("group") or {})


def ready(fleet: Any) -> bool:
    conditions = (fleet.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def stable_at(size: int) -> Any:
    """Whether a fleet has status for its spec, its group Stable with ``size`` members, and Ready True."""

    def stable(fleet: Any) -> bool:
        group = group_status(fleet)
        members = group.get("members") or []
        return has_status(fleet) and group.get("state") == "Stable" and len(members) == size and ready(fleet)

    return stable


def restarted(fleet: Any) -> bool:
    """Whether a fleet's last burst of restarts has ended (its ``Restarted`` Event posted) after a roll."""
    restarts = (fleet.get("status") or {}).get("restarts") or {}
    return bool(restarts.get("last")) and not restarts.get("ongoing") and int(restarts.get("rolls") or 0) >= 1


def scaled_down(fleet: Any) -> bool:
    return bool((fleet.get("status") or {}).get("lastScaleDown")) and stable_at(PODS - 1)(fleet)


class PodEvents(NamespaceWatch):
    """The fleets' pod watch events (what the operator's pod watch is told), counted once each: by pod UID and
    resourceVersion, so a watch listed again (after a 410) does not count the pods it lists again."""

    def __init__(self, world: World) -> None:
        super().__init__(world, None)
        self.seen: set[tuple[str, str]] = set()

    @property
    def count(self) -> int:
        return len(self.seen)

    def listing(self) -> tuple[Any, ...]:
        import kubernetes

        return (kubernetes.client.CoreV1Api(self.client).list_pod_for_all_namespaces,)

    def saw(self, obj: Any, at: float) -> str:
        version = str(obj.metadata.resource_version)
        self.seen.add((obj.metadata.uid, version))
        return version


class Meter:
    """One phase's cost: CPU-seconds per process, the operator's requests, the pod events, wall seconds."""

    def __init__(
        self, world: World, operator: Any, helpers: dict[str, subprocess.Popen[bytes]], pods: PodEvents
    ) -> None:
        self.world, self.operator, self.pods = world, operator, pods
        self.pids = {
            "operator": operator.process.pid,
            "coordinator": world.coordinator.pid,
            **{name: process.pid for name, process in helpers.items()},
            "benchmark (its watches)": os.getpid(),
            **{name: process.pid for name, process in world.plane.processes.items()},
        }

    def start(self) -> Meter:
        self.cpu = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self.offset = self.world.plane.audit_offset()
        self.events = self.pods.count
        self.began = time.monotonic()
        return self

    def figures(self) -> dict[str, Any]:
        seconds = time.monotonic() - self.began
        cpu = {name: round(cpu_seconds(pid) - self.cpu[name], 2) for name, pid in self.pids.items()}
        requests = [e for e in self.operator.requests(self.world.plane.audit(self.offset)[0]) if e["verb"] != "watch"]
        events = self.pods.count - self.events
        return {
            "seconds": seconds,
            "cpu_s": cpu,
            "operator_requests": len(requests),
            "operator_requests_by_kind": request_kinds(requests),
            "pod_events": events,
            "operator_requests_per_pod_event": len(requests) / events if events else None,
            "operator_cpu_ms_per_pod_event": 1000 * cpu["operator"] / events if events else None,
            "load_average": os.getloadavg()[0],
        }


def in_each_namespace(call: Callable[[str], object]) -> None:
    """``call(namespace)`` for every namespace, four at a time."""
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(call, SPACES))


def generations(world: World) -> dict[str, int]:
    """Each fleet's group generation, as the coordinator describes it."""

    def one(key: tuple[str, int]) -> tuple[str, int]:
        group = fleet_group(*key)
        return group, int(coordinator_get(world.coordinator, f"/v1/groups/{group}", ADMIN_TOKEN)["generation_id"])

    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(one, FLEET_KEYS))


def moves(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    per_group = [after[g] - before[g] for g in before]
    return {"total": sum(per_group), "per_fleet": dict(sorted(Counter(per_group).items()))}


def member_stats(world: World) -> dict[str, Any]:
    return dict(json.loads((world.work / "pod-members.json").read_text()))


def wait_members(world: World, count: int, *, timeout_s: float) -> None:
    """Until ``count`` members are in a generation (heartbeating) at the members' process."""
    started, last = time.monotonic(), -1
    while (now := member_stats(world)["members_in_generation"]) != count or last != now:
        if now != last:
            progress(f"{now}/{count} members in a generation")
        last = now
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{now}/{count} members in a generation after {timeout_s:g} s")
        time.sleep(2.0)


def restarted_events(world: World) -> dict[str, Any]:
    """The fleets' ``Restarted`` Events: how many fleets have one, and what they say."""
    found = world.kube.get("events", all_namespaces="true", field_selector="reason=Restarted")["items"]
    fleets = {
        (e["involvedObject"].get("namespace"), e["involvedObject"]["name"])
        for e in found
        if e["involvedObject"].get("kind") == "ConsumerFleet"
    }
    messages = Counter(re.sub(r"^\d+ pod", "N pod", e["message"]) for e in found)
    return {"fleets": len(fleets), "events": len(found), "messages": dict(messages.most_common(5))}


def batch_leaves(operator: Any) -> dict[str, int]:
    """Each fleet's ``berth_operator_batch_leaves_total``, by ``namespace/name``."""
    leaves = {}
    for line in metrics_text(operator).splitlines():
        if not line.startswith("berth_operator_batch_leaves_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        if labels.get("namespace") in SPACES:
            leaves[f"{labels['namespace']}/{labels['fleet']}"] = int(float(line.rsplit(" ", 1)[1]))
    return leaves


def roll_counts(operator: Any) -> tuple[int, int]:
    """The operator's roll pacer: (fleets rolling, fleets waiting for a turn), from its metrics."""
    found = dict(re.findall(r"^(berth_operator_rolls_(?:in_progress|waiting)) (\S+)$", metrics_text(operator), re.M))
    return int(float(found.get("berth_operator_rolls_in_progress", 0))), int(
        float(found.get("berth_operator_rolls_waiting", 0))
    )


def patch_fleets(world: World, body: dict[str, Any]) -> None:
    """The same merge patch of every fleet, eight at a time."""
    import kubernetes

    client = kubernetes.config.new_client_from_config(config_file=str(world.kube.kubeconfig))
    custom = kubernetes.client.CustomObjectsApi(client)

    def patch(key: tuple[str, int]) -> None:
        custom.patch_namespaced_custom_object(
            "berth.dev", "v1alpha1", key[0], "consumerfleets", fleet_name(key[1]), body
        )

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(patch, FLEET_KEYS))
    finally:
        client.close()


def watched(world: World, done: Any, what: str) -> FleetStatusTimes:
    times = FleetStatusTimes(world, None, done, what).start()
    time.sleep(2)  # the watch is established
    return times


def fields_changed(times: FleetStatusTimes) -> dict[str, float]:
    """Per fleet, the phase's status changes as watched, and how many moved each field (the twelve most moved)."""
    moved = {field: round(n / FLEETS, 2) for field, n in times.fields_changed.most_common(12)}
    return {"(status changes)": round(times.status_changes / FLEETS, 2), **moved}


def timed_out(figures: dict[str, Any], name: str, meter: Meter, error: TimeoutError, w: World) -> None:
    """What a phase that did not end within its allowance cost so far: where it broke, and who was busy."""
    figures[name] = {**meter.figures(), "timed_out": str(error), "members": member_stats(w)}
    progress(f"{name} did not end: {figures[name]}")


def measure(
    w: World,
    operator: Any,
    helpers: dict[str, subprocess.Popen[bytes]],
    pods: PodEvents,
    figures: dict[str, Any],
) -> None:
    """The phases, each one's figures into ``figures`` as it ends (a phase that times out: its cost so far, and the
    TimeoutError raised)."""
    total = FLEETS * PODS
    progress(f"--- creation: {FLEETS} fleets x {PODS} pods")
    times = watched(w, stable_at(PODS), "Stable")
    meter = Meter(w, operator, helpers, pods).start()
    try:
        if NAMESPACES == 1:
            create_fleets(w.kube, "pods", FLEETS, at_once=4, replicas=PODS, spec=FLEET_SPEC)
        else:
            in_each_namespace(
                lambda namespace: create_fleets(w.kube, namespace, SPACES[namespace], replicas=PODS, spec=FLEET_SPEC)
            )
        times.wait(FLEETS, timeout_s=allowance())
        wait_members(w, total, timeout_s=allowance())
        creation = {**meter.figures(), **times.figures()}
    except TimeoutError as error:
        timed_out(figures, "creation", meter, error, w)
        raise
    finally:
        times.close()
    creation["members"] = member_stats(w)
    creation["status_fields_changed"] = fields_changed(times)
    figures["creation"] = creation
    progress(f"creation: {creation}")

    progress(f"--- the roll: every fleet rolled at once ({total} pods; {ROLL})")
    before = generations(w)
    times = watched(w, restarted, "with their Restarted Event")
    replaced_before = member_stats(w)["counts"].get("members started", 0)
    meter = Meter(w, operator, helpers, pods).start()
    try:
        if ROLL == "statefulsets":
            in_each_namespace(
                lambda namespace: w.kube.kubectl("rollout", "restart", "statefulset", "-n", namespace, "-l", SELECTOR)
            )
        else:
            stamp = {"metadata": {"annotations": {ROLL_ANNOTATION: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}}
            patch_fleets(w, {"spec": {"template": stamp}})
        started, limit = time.monotonic(), allowance()
        at_once: list[tuple[int, int]] = []  # (rolling, waiting) as the operator's metrics said, every 2 s
        while (replaced := member_stats(w)["counts"].get("members started", 0) - replaced_before) < total:
            if time.monotonic() - started > limit:
                raise TimeoutError(f"{replaced}/{total} pods replaced and their members started after {limit:.0f} s")
            at_once.append(roll_counts(operator))
            time.sleep(2.0)
        wait_members(w, total, timeout_s=allowance())
        replaced_s = time.monotonic() - started
        progress(f"every pod replaced and its member back {replaced_s:.0f} s after the roll began")
        times.wait(FLEETS, timeout_s=allowance())
        roll = {**meter.figures(), "seconds_to_every_pod_replaced_and_back": replaced_s}
        roll["fleets_rolling_at_once_max"] = max((rolling for rolling, _ in at_once), default=0)
        roll["fleets_waiting_max"] = max((waiting for _, waiting in at_once), default=0)
        roll["seconds_to_every_restarted_event"] = max(times.with_status.values()) - (time.time() - roll["seconds"])
    except TimeoutError as error:
        timed_out(figures, "roll", meter, error, w)
        raise
    finally:
        times.close()
    roll["rebalances"] = moves(before, generations(w))
    roll["restarted_events"] = restarted_events(w)
    roll["members"] = member_stats(w)
    roll["status_fields_changed"] = fields_changed(times)
    figures["roll"] = roll
    progress(f"roll: {roll}")

    progress("--- the scale-down: every fleet's replicas lowered by one at once")
    before = generations(w)
    times = watched(w, scaled_down, "scaled down and Stable")
    meter = Meter(w, operator, helpers, pods).start()
    try:
        patch_fleets(w, {"spec": {"replicas": PODS - 1}})
        times.wait(FLEETS, timeout_s=allowance())
        scale_down = meter.figures()
    except TimeoutError as error:
        timed_out(figures, "scale_down", meter, error, w)
        raise
    finally:
        times.close()
    leaves = batch_leaves(operator)
    scale_down["batch_leaves_per_fleet"] = {str(k): v for k, v in sorted(Counter(leaves.values()).items())}
    scale_down["fleets_with_one_batch_leave"] = sum(1 for n in leaves.values() if n == 1)
    scale_down["rebalances"] = moves(before, generations(w))
    scale_down["members"] = member_stats(w)
    scale_down["status_fields_changed"] = fields_changed(times)
    figures["scale_down"] = scale_down
    progress(f"scale-down: {scale_down}")

    if BUDGET_ENDS - time.monotonic() < 400:  # its wait for quiet (up to 300 s) and its minute
        raise TimeoutError("no budget left for the idle minute")
    figures["idle"] = idle(w, operator)
    progress(f"idle: {figures['idle']}")


def goal_met(figures: dict[str, Any]) -> bool:
    if "stopped" in figures or FLEETS < 1000 or PODS < 10:
        return False
    roll, down = figures["roll"], figures["scale_down"]
    return (
        roll["rebalances"]["total"] == 0
        and roll["restarted_events"]["fleets"] == FLEETS
        and down["fleets_with_one_batch_leave"] == FLEETS
    )


def summarize(figures: dict[str, Any]) -> str:
    """One paragraph of what ran and what it measured; a phase that did not end says so, with who was busy."""
    parts = [f"{FLEETS} fleets x {PODS} pods ({FLEETS * PODS:,} running pods, a member each)"]
    creation, roll, down = (figures.get(name) for name in ("creation", "roll", "scale_down"))
    if creation and "timed_out" not in creation:
        parts.append(
            f"every fleet Stable {creation['seconds_to_status_after_creation']:.0f} s after the first was created"
            f" (each {creation['wait_for_status_s']['median']:.0f} s median /"
            f" {creation['wait_for_status_s']['max']:.0f} s max; load average {creation['load_average']:.1f} at the"
            " end)"
        )
    if roll and "timed_out" not in roll:
        gaps = roll["members"]["restart_gaps_s"]
        how = (
            "kubectl rollout restart of every StatefulSet"
            if ROLL == "statefulsets"
            else "every fleet's pod template changed, the operator admitting the rolls"
            f" {DEFAULT_MAX_CONCURRENT_ROLLS} fleets at a time"
        )
        if ROLL == "fleets":
            how += f", at most {roll.get('fleets_rolling_at_once_max')} rolling at once (sampled every 2 s)"
        parts.append(
            f"the roll of every fleet at once ({how}): every pod replaced and back in"
            f" {roll['seconds_to_every_pod_replaced_and_back']:.0f} s (restart gaps {gaps['median']:.1f} s median,"
            f" {gaps['p90']:.1f} s p90, {gaps['over_the_session_timeout']} of {gaps['count']} beyond the session"
            f" timeout), {roll['rebalances']['total']} rebalances, {roll['restarted_events']['fleets']}/{FLEETS}"
            f" fleets with their Restarted Event (the last {roll['seconds_to_every_restarted_event']:.0f} s after"
            f" the roll began); load average {roll['load_average']:.1f} at its end"
        )
    if down and "timed_out" not in down:
        parts.append(
            f"every fleet scaled down by one: {down['fleets_with_one_batch_leave']}/{FLEETS} fleets with one batch"
            f" leave, {down['rebalances']['total']} rebalances, {down['seconds']:.0f} s"
        )
    done = [(name, f) for name, f in (("creation", creation), ("roll", roll), ("scale-down", down)) if f]
    parts.append(
        "the operator "
        + ", ".join(
            f"{f['operator_requests_per_pod_event'] or 0:.2f} requests and"
            f" {f['operator_cpu_ms_per_pod_event'] or 0:.1f} CPU-ms per pod event ({name})"
            for name, f in done
        )
        + f", peak RSS {figures.get('operator_peak_rss_mib', 0):.0f} MiB"
    )
    if "idle" in figures:
        parts.append(
            f"idle {figures['idle']['requests_per_min']:.0f} requests/min, {figures['idle']['cpu_s_per_min']:.2f}"
            " CPU-s/min"
        )
    for name, f in done:
        if "timed_out" in f:
            busiest = ", ".join(f"{p} {s:.0f}" for p, s in sorted(f["cpu_s"].items(), key=lambda i: -i[1])[:4])
            parts.append(f"STOPPED in the {name} after {f['seconds']:.0f} s ({f['timed_out']}; CPU-s: {busiest})")
    return "; ".join(parts)


def main() -> Result:
    figures: dict[str, Any] = {"fleets": FLEETS, "pods_per_fleet": PODS, "namespaces": NAMESPACES}
    with world(*COORDINATOR_FLAGS, controller_flags=CONTROLLER_FLAGS) as w:
        for namespace in SPACES:
            w.kube.create_namespace(namespace)
        serving = ("--namespace", "pods") if NAMESPACES == 1 else ()
        operator = w.operator("operator-pods", *serving, *OPERATOR_ARGS)
        spec = {
            "url": w.coordinator.url,
            "token": MEMBER_TOKEN,
            "kubeconfig": str(w.kube.kubeconfig),
            "selector": SELECTOR,
            "stats": str(w.work / "pod-members.json"),
        }
        log = (w.work / "helpers.log").open("wb")
        stats = str(w.work / "stage.json")
        helpers = {
            "pod-members": subprocess.Popen(
                [sys.executable, "-m", "benchmarks.pod_members"], stdin=subprocess.PIPE, stdout=log, stderr=log
            ),
            "stage controller": subprocess.Popen(
                [sys.executable, "-m", "benchmarks.stage_process", str(w.kube.kubeconfig), SELECTOR, "20", "8", stats],
                stdout=log,
                stderr=log,
            ),
        }
        stdin = helpers["pod-members"].stdin
        assert stdin is not None
        stdin.write(json.dumps(spec).encode())
        stdin.close()
        pods = PodEvents(w).start()
        try:
            while not ((w.work / "pod-members.json").exists() and (w.work / "stage.json").exists()):
                time.sleep(0.2)
            try:
                measure(w, operator, helpers, pods, figures)
            except TimeoutError as error:
                figures["stopped"] = str(error)
            figures["operator_peak_rss_mib"] = rss_mib(operator.process.pid, "VmHWM")
            figures["stage_controller"] = json.loads((w.work / "stage.json").read_text())
        finally:
            pods.close()
            for helper in helpers.values():
                helper.terminate()
                helper.wait(timeout=30)
            log.close()
    total = FLEETS * PODS
    return Result(
        name=("operator_pods_fixed_session_timeout" if SESSION_TIMEOUT_MS else "operator_pods")
        + ("_rollout_restart" if ROLL == "statefulsets" else ""),
        title=f"The watching operator with {total:,} running pods and their members (real control plane)"
        + (f", each fleet's session timeout fixed at {SESSION_TIMEOUT_MS:,} ms" if SESSION_TIMEOUT_MS else ""),
        command=f"BERTH_OPERATOR_PODS_FLEETS={FLEETS} BERTH_OPERATOR_PODS_PER_FLEET={PODS}"
        f" BERTH_OPERATOR_PODS_NAMESPACES={NAMESPACES}"
        + (f" BERTH_OPERATOR_PODS_SESSION_TIMEOUT_MS={SESSION_TIMEOUT_MS}" if SESSION_TIMEOUT_MS else "")
        + (f" BERTH_OPERATOR_PODS_ROLL={ROLL}" if ROLL != "fleets" else "")
        + " python -m benchmarks operator_pods",
        goal=GOAL
        + (
            f"; here every fleet's session timeout is fixed at {SESSION_TIMEOUT_MS} ms (spec.sessionTimeout), not"
            " the operator's estimate"
            if SESSION_TIMEOUT_MS
            else ""
        ),
        met=goal_met(figures),
        summary=summarize(figures),
        figures=json.loads(json.dumps(figures)),
        note=f"kube-controller-manager with {' '.join(CONTROLLER_FLAGS)}, the coordinator with"
        f" {' '.join(COORDINATOR_FLAGS)}; pods run on simulated nodes (the stage"
        " controller: kwok's job) and one process plays each pod's static"
        " member against the real coordinator; requests counted exactly from the API server's audit log by the"
        " operator's User-Agent; pod events are the fleets' pod watch events; rebalances are generation moves at"
        " the coordinator",
    )


if __name__ == "__main__":
    print(json.dumps(main().figures, indent=2))
