"""Benchmark: the watching operator at 10, 100 and 1,000 fleets on a real control plane.

For each size, in a namespace of its own, with a ``berth-operator`` of its own (``--namespace``, defaults otherwise:
no leader election, 10 s reconcile interval, 10 min resync), as the chart's ServiceAccount, against a real
coordinator (``benchmarks.operator_world``; pods stay Pending):

- **creation** (with the CPU-seconds of the operator, the coordinator and each control-plane process meanwhile):
  the fleets created by four ``kubectl create`` at once (250 fleets each call), and, from the
  benchmark's own watch of the fleets, when each was first seen and first seen with status for its spec: each
  fleet's wait for status (median, max), the seconds from the first fleet created to the last with status, and
  from the last created to the last with status (what the operator lags behind the creation, which the API
  server's pace of creating fleets does not count in);
- **the burst's cost** (issue 31): the operator's API requests from the first fleet created until it has gone quiet,
  counted exactly from the API server's audit log, per new fleet and by verb and resource
  (``requests_per_new_fleet``); when its last pass ran (its pass counters, read every two seconds once every fleet
  has status) after the last fleet had status (``seconds_to_quiet_after_burst``: 0 when no pass ran after it), and
  after the last change of any fleet's status (``seconds_to_quiet_after_the_last_status_write``: the passes after
  it changed nothing); the passes after the last fleet had status by what asked for them
  (``passes_after_the_last_status``, from ``berth_operator_pass_triggers_total``: ``pods/existing`` a pod created,
  ``statefulsets/settled`` its controller's report, ...); the
  API server's CPU-seconds over the same span; the machine's load average before and after;
- **idle**: once the operator has gone quiet, over one minute: its API requests, counted exactly from the API
  server's audit log (by its User-Agent), its CPU seconds and its RSS;
- **spec change**: ``spec.replicas`` 1 -> 2 on one fleet at a time (10 fleets) with all the others present:
  seconds from sending the patch to the StatefulSet's watch event with the new size (the benchmark's own watch);
- **restart**: the operator stopped (SIGTERM) and started again: seconds until every fleet has been passed by the
  new process (its per-fleet pass counters), which is when every status is current again.

``BERTH_OPERATOR_SCALE_SIZES`` (e.g. ``1000``) measures other sizes, ``BERTH_OPERATOR_SCALE_CONTROLLER_FLAGS`` gives
kube-controller-manager more flags (its API rate: the pace at which it creates the fleets' pods),
``BERTH_OPERATOR_SCALE_PARTS=burst`` only the creation and the burst's cost (no idle window, spec changes or restart;
saved as ``operator_scale_burst.json``); the operators run with ``--max-fleets-per-namespace 0`` (a thousand fleets in
one namespace is past the default bound of 500). RSS growth per fleet is the slope between the sizes' idle RSS. Goals
(issue 23): idle requests per fleet ~0; a spec change at the StatefulSet in under a second with 1,000 fleets; 1,000
fleets with status within a minute of creation and of a restart; idle CPU near zero. Issue 31: a new fleet in at most 8
requests, and no pass 30 s after the last fleet has status.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Self

from benchmarks.common import Result, progress, spread
from benchmarks.goals import GOALS
from benchmarks.operator_world import (
    World,
    cpu_seconds,
    create_fleets,
    fleet_name,
    fleets_passed,
    has_status,
    metrics_text,
    quiet,
    rss_mib,
    world,
)

SIZES = tuple(int(n) for n in os.environ.get("BERTH_OPERATOR_SCALE_SIZES", "10,100,1000").split(","))
OPERATOR_ARGS = ("--max-fleets-per-namespace", "0")
IDLE_WINDOW_S = 60.0
SPEC_CHANGES = 10
GOAL = GOALS["operator_scale"]
PARTS = os.environ.get("BERTH_OPERATOR_SCALE_PARTS", "all")
#: More kube-controller-manager flags (e.g. ``--kube-api-qps=200 --kube-api-burst=400``: how fast it creates the
#: fleets' pods, which each change their fleet's status.replicas and so call for a pass).
CONTROLLER_FLAGS = tuple(os.environ.get("BERTH_OPERATOR_SCALE_CONTROLLER_FLAGS", "").split())
#: How long without a pass counts as quiet after the burst, and how often the pass counters are read meanwhile (each
#: read renders every fleet's metrics: not during the burst itself, where it would cost the operator it measures).
QUIET_S = 45.0
PASS_POLL_S = 2.0


class NamespaceWatch:
    """A watch of the benchmark's own on one kind in a namespace (None: in every namespace), in a thread: :meth:`saw`
    is told each object as it is seen, and answers its resourceVersion (the watch resumes from it; a 410 starts it
    over)."""

    def __init__(self, world: World, namespace: str | None) -> None:
        import kubernetes

        self.client = kubernetes.config.new_client_from_config(config_file=str(world.kube.kubeconfig))
        self.namespace = namespace
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def listing(self) -> tuple[Any, ...]:
        """The list call to watch and its arguments."""
        raise NotImplementedError

    def saw(self, obj: Any, at: float) -> str:
        raise NotImplementedError

    def start(self) -> Self:
        self.thread.start()
        return self

    def _run(self) -> None:
        import kubernetes

        version = ""
        method, *args = self.listing()
        while not self.stop.is_set():
            watch = kubernetes.watch.Watch()
            try:
                for event in watch.stream(method, *args, resource_version=version, timeout_seconds=5):
                    version = self.saw(event["object"], time.time())
            except kubernetes.client.ApiException as error:
                if error.status == 410:
                    version = ""
            except Exception as error:  # a read timeout on a starved machine (it killed the thread): watch again
                progress(f"{self.where}: watch ended ({type(error).__name__}), resumed")
                time.sleep(0.5)

    @property
    def where(self) -> str:
        return self.namespace or "every namespace"

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.client.close()


class FleetStatusTimes(NamespaceWatch):
    """When each fleet of a namespace (None: of every namespace, each known as ``namespace/name``) was first seen,
    and first seen with status for its spec (or, with ``done``, first seen as ``done`` says; polling a thousand
    fleets every second would load the API server it measures)."""

    def __init__(
        self, world: World, namespace: str | None, done: Callable[[Any], bool] = has_status, what: str = "with status"
    ) -> None:
        super().__init__(world, namespace)
        self.done, self.what = done, what
        self.created: dict[str, float] = {}
        self.with_status: dict[str, float] = {}
        self.statuses: dict[str, Any] = {}
        #: When a fleet's status last changed (the operator's last status write, as watched).
        self.last_status_change = 0.0
        #: How many watched status changes moved each field (``changed_fields``): what the status writes were for.
        self.fields_changed: Counter[str] = Counter()
        #: How many status changes the watch saw (writes that changed nothing make none).
        self.status_changes = 0

    def listing(self) -> tuple[Any, ...]:
        import kubernetes

        custom = kubernetes.client.CustomObjectsApi(self.client)
        if self.namespace is None:
            return (custom.list_cluster_custom_object, "berth.dev", "v1alpha1", "consumerfleets")
        return (custom.list_namespaced_custom_object, "berth.dev", "v1alpha1", self.namespace, "consumerfleets")

    def saw(self, obj: Any, at: float) -> str:
        meta = obj["metadata"]
        name = meta["name"] if self.namespace is not None else f"{meta['namespace']}/{meta['name']}"
        self.created.setdefault(name, at)
        if self.done(obj):
            self.with_status.setdefault(name, at)
        if obj.get("status") != self.statuses.get(name):
            if name in self.statuses:
                self.fields_changed.update(changed_fields(self.statuses[name], obj.get("status")))
                self.status_changes += 1
            self.statuses[name] = obj.get("status")
            self.last_status_change = at
        return str(obj["metadata"]["resourceVersion"])

    def wait(self, count: int, *, timeout_s: float) -> None:
        started, last = time.monotonic(), -1
        while len(self.with_status) < count:
            if len(self.with_status) != last:
                last = len(self.with_status)
                progress(f"{self.where}: {last}/{count} fleets {self.what} ({len(self.created)} created)")
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"{self.where}: {last}/{count} fleets {self.what} after {timeout_s:g} s")
            time.sleep(0.5)

    def figures(self) -> dict[str, Any]:
        first, last_created = min(self.created.values()), max(self.created.values())
        last_status = max(self.with_status.values())
        return {
            "seconds_to_status_after_creation": last_status - first,
            "seconds_creating": last_created - first,
            "seconds_to_status_after_the_last_created": last_status - last_created,
            "wait_for_status_s": spread([self.with_status[name] - self.created[name] for name in self.with_status]),
        }


def changed_fields(before: Any, after: Any, depth: int = 3, where: str = "") -> set[str]:
    """The status fields that differ between two statuses, to ``depth`` levels (conditions by type, a list by
    position), each named by its path: ``restarts.ongoing``, ``conditions[Ready].status``."""
    if before == after:
        return set()
    if depth == 0 or not isinstance(before, (dict, list)) or type(before) is not type(after):
        return {where or "status"}
    if isinstance(before, list):
        old, new = _keyed(before), _keyed(after)
        keys = [(f"{where}[{key}]", old.get(key), new.get(key)) for key in old.keys() | new.keys()]
    else:
        keys = [(f"{where}.{key}" if where else key, before.get(key), after.get(key)) for key in before | after]
    return {path for name, was, now in keys for path in changed_fields(was, now, depth - 1, name)}


def _keyed(items: list[Any]) -> dict[str, Any]:
    """A list's items by their ``type`` (conditions), else by position."""
    typed = all(isinstance(item, dict) and "type" in item for item in items)
    return {(item["type"] if typed else str(n)): item for n, item in enumerate(items)}


class StatefulSetSizes(NamespaceWatch):
    """When each StatefulSet of a namespace was first seen at each size."""

    def __init__(self, world: World, namespace: str) -> None:
        super().__init__(world, namespace)
        self.seen: dict[tuple[str, int], float] = {}

    def listing(self) -> tuple[Any, ...]:
        import kubernetes

        return (kubernetes.client.AppsV1Api(self.client).list_namespaced_stateful_set, self.namespace)

    def saw(self, obj: Any, at: float) -> str:
        self.seen.setdefault((obj.metadata.name, obj.spec.replicas or 0), at)
        return str(obj.metadata.resource_version)


def spec_changes(world: World, namespace: str, count: int) -> list[float]:
    import kubernetes

    sizes = StatefulSetSizes(world, namespace).start()
    client = kubernetes.config.new_client_from_config(config_file=str(world.kube.kubeconfig))
    custom = kubernetes.client.CustomObjectsApi(client)
    latencies = []
    try:
        time.sleep(2)  # the watch is established
        step = max(1, count // SPEC_CHANGES)
        for i in range(0, count, step)[:SPEC_CHANGES]:
            name = fleet_name(i)
            sent = time.time()
            custom.patch_namespaced_custom_object(
                "berth.dev", "v1alpha1", namespace, "consumerfleets", name, {"spec": {"replicas": 2}}
            )
            deadline = time.monotonic() + 120
            while (name, 2) not in sizes.seen and time.monotonic() < deadline:
                time.sleep(0.005)
            latency = sizes.seen[(name, 2)] - sent
            latencies.append(latency)
            progress(f"{namespace}: spec change of {name} at its StatefulSet after {latency:.3f} s")
            time.sleep(1.0)
    finally:
        sizes.close()
        client.close()
    return latencies


def passes(operator: Any, namespace: str) -> float:
    """Every pass this operator process counted for ``namespace``'s fleets, whatever its outcome."""
    total = 0.0
    for line in metrics_text(operator).splitlines():
        if line.startswith("berth_operator_reconciles_total{") and f'namespace="{namespace}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def pass_triggers(operator: Any) -> Counter[str]:
    """The operator's passes so far by what asked for them (``berth_operator_pass_triggers_total``)."""
    found: Counter[str] = Counter()
    for line in metrics_text(operator).splitlines():
        if line.startswith("berth_operator_pass_triggers_total{"):
            labels, value = line.rsplit(" ", 1)
            found[labels.split('trigger="', 1)[1].split('"', 1)[0]] += int(float(value))
    return found


def last_pass_after(operator: Any, namespace: str, since: float) -> float:
    """When the operator's last pass over ``namespace`` ran (wall clock, to ``PASS_POLL_S``): the last time its pass
    counters moved, once they have stood still for ``QUIET_S``; ``since`` when they never moved after it."""
    count, moved = passes(operator, namespace), since
    started = time.monotonic()
    while time.time() - moved < QUIET_S:
        if time.monotonic() - started > 900:
            progress(f"{namespace}: still passing after 900 s; measuring anyway")
            break
        time.sleep(PASS_POLL_S)
        now = passes(operator, namespace)
        if now != count:
            count, moved = now, time.time()
    return moved


def request_kinds(requests: list[dict[str, Any]]) -> dict[str, int]:
    """``verb resource[/subresource]`` -> count."""

    def kind(e: dict[str, Any]) -> str:
        ref = e.get("objectRef") or {}
        sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
        return f"{e['verb']} {ref.get('resource', '?')}{sub}"

    return dict(Counter(kind(e) for e in requests).most_common())


def burst(
    world: World, operator: Any, namespace: str, size: int, offset: int, times: FleetStatusTimes
) -> dict[str, Any]:
    """The burst's cost, from the audit log since ``offset`` (taken before the first fleet was created) until the
    operator has gone quiet."""
    last_status = max(times.with_status.values())
    triggers = pass_triggers(operator)
    last_pass = last_pass_after(operator, namespace, last_status)
    after = pass_triggers(operator) - triggers
    events, _ = world.plane.audit(offset)
    requests = [e for e in operator.requests(events) if e["verb"] != "watch"]
    return {
        "requests_per_new_fleet": len(requests) / size,
        "requests_while_creating": request_kinds(requests),
        "seconds_to_quiet_after_burst": max(0.0, last_pass - last_status),
        "seconds_to_quiet_after_the_last_status_write": max(0.0, last_pass - times.last_status_change),
        "passes_after_the_last_status": dict(after.most_common()),
        "passes_until_quiet": dict(pass_triggers(operator).most_common()),
    }


def idle(world: World, operator: Any) -> dict[str, Any]:
    quiet(world.plane, operator, for_s=10, timeout_s=300)
    pid = operator.process.pid
    offset = world.plane.audit_offset()
    cpu_before = cpu_seconds(pid)
    time.sleep(IDLE_WINDOW_S)
    cpu = cpu_seconds(pid) - cpu_before
    requests = operator.requests(world.plane.audit(offset)[0])
    kinds = Counter(f"{e['verb']} {e.get('objectRef', {}).get('resource', '?')}" for e in requests)
    minutes = IDLE_WINDOW_S / 60
    return {
        "requests_per_min": len(requests) / minutes,
        "requests": dict(kinds),
        "cpu_s_per_min": cpu / minutes,
        "rss_mib": rss_mib(pid),
    }


def restart(world: World, namespace: str, count: int, name: str) -> float:
    started = time.monotonic()
    operator = world.operator(name, "--namespace", namespace, *OPERATOR_ARGS)
    try:
        last = -1
        while True:
            passed = fleets_passed(operator, namespace)
            if passed != last:
                progress(f"{namespace}: {passed}/{count} fleets passed {time.monotonic() - started:.0f} s after start")
                last = passed
            if passed >= count:
                return time.monotonic() - started
            if time.monotonic() - started > 900:
                raise TimeoutError(f"{passed}/{count} fleets passed after 900 s")
            time.sleep(1.0)
    finally:
        operator.stop()


def measure(world: World, size: int) -> dict[str, Any]:
    namespace = world.kube.create_namespace(f"bench-{size}")
    operator = world.operator(f"operator-{size}", "--namespace", namespace, *OPERATOR_ARGS)
    try:
        times = FleetStatusTimes(world, namespace).start()
        try:
            time.sleep(2)  # the watch is established
            pids = {"operator": operator.process.pid, **{n: p.pid for n, p in world.plane.processes.items()}}
            pids["coordinator"] = world.coordinator.pid
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            load_before = os.getloadavg()[0]
            offset = world.plane.audit_offset()
            create_fleets(world.kube, namespace, size, at_once=4)
            times.wait(size, timeout_s=1800)
            creation = times.figures()
            # Who the machine's cores worked for meanwhile: the API server's share is what the requests cost.
            creation["cpu_s_while_creating"] = {n: cpu_seconds(pid) - cpu_before[n] for n, pid in pids.items()}
            creation["load_average_before"] = load_before
            creation["load_average_after"] = os.getloadavg()[0]
            creation.update(burst(world, operator, namespace, size, offset, times))
            creation["cpu_s_until_quiet"] = {n: cpu_seconds(pid) - cpu_before[n] for n, pid in pids.items()}
        finally:
            times.close()
        progress(f"{namespace}: {creation}")
        if PARTS == "burst":
            return {"fleets": size, **creation}
        quiet_figures = idle(world, operator)
        progress(f"{namespace}: idle {quiet_figures}")
        latencies = spec_changes(world, namespace, size)
    finally:
        operator.stop()
    after_restart = restart(world, namespace, size, f"operator-{size}-restarted")
    progress(f"{namespace}: every fleet passed {after_restart:.1f} s after a restart")
    return {
        "fleets": size,
        **creation,
        "seconds_to_status_after_restart": after_restart,
        "spec_change_to_statefulset_s": spread(latencies),
        **quiet_figures,
    }


def burst_summary(r: dict[str, Any]) -> str:
    return (
        f"each fleet with status {r['wait_for_status_s']['median']:.1f} s (median) /"
        f" {r['wait_for_status_s']['max']:.1f} s (max) after its creation, all"
        f" {r['seconds_to_status_after_creation']:.0f} s after the first was created"
        f" ({r['seconds_creating']:.0f} s creating them), {r['requests_per_new_fleet']:.1f} requests per new fleet, the"
        f" last pass {r['seconds_to_quiet_after_burst']:.0f} s after the last status"
        + (
            f" ({r['seconds_to_quiet_after_the_last_status_write']:.1f} s after the last status write; after the last"
            f" status {_passes(r['passes_after_the_last_status'])})"
            if "passes_after_the_last_status" in r
            else ""
        )
        + ", the API server"
        f" {r['cpu_s_until_quiet']['kube-apiserver']:.0f} CPU-s (load {r['load_average_before']:.1f} before,"
        f" {r['load_average_after']:.1f} after)"
    )


def _passes(triggers: dict[str, int]) -> str:
    ordered = sorted(triggers.items(), key=lambda item: -item[1])
    return ", ".join(f"{count} passes {trigger}" for trigger, count in ordered) or "no pass"


def _burst_command() -> str:
    """The command that repeats this burst run, with the sizes and controller flags it was given."""
    given = {
        "BERTH_OPERATOR_SCALE_SIZES": os.environ.get("BERTH_OPERATOR_SCALE_SIZES"),
        "BERTH_OPERATOR_SCALE_PARTS": PARTS,
        "BERTH_OPERATOR_SCALE_CONTROLLER_FLAGS": " ".join(CONTROLLER_FLAGS) or None,
    }
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in given.items() if value)
    return f"{env} python -m benchmarks operator_scale"


def main() -> Result:
    rows = []
    with world(controller_flags=CONTROLLER_FLAGS) as w:
        for size in SIZES:
            progress(f"--- {size} fleets")
            rows.append(measure(w, size))
    largest = rows[-1]
    burst_met = (
        largest["requests_per_new_fleet"] <= 8
        and largest["seconds_to_quiet_after_burst"] <= 30
        and largest["wait_for_status_s"]["max"] <= 60
    )
    if PARTS == "burst":
        return Result(  # a record of its own: the full run's (operator_scale.json) stays as it was
            name="operator_scale_burst" if not CONTROLLER_FLAGS else "operator_scale_burst_controller",
            title="The watching operator: a burst of fleets created at once (real control plane"
            + (f"; controller manager {' '.join(CONTROLLER_FLAGS)})" if CONTROLLER_FLAGS else ")"),
            command=_burst_command(),
            goal=GOAL,
            met=burst_met,
            summary="; ".join(f"{r['fleets']}: {burst_summary(r)}" for r in rows),
            figures=json.loads(json.dumps({"sizes": rows})),
            note="pods stay Pending (no kubelet); requests counted exactly from the API server's audit log by the"
            " operator's User-Agent; each size in its own namespace with its own operator",
        )
    smallest = rows[0]
    spanned = largest["fleets"] - smallest["fleets"]
    rss_per_fleet_kib = (largest["rss_mib"] - smallest["rss_mib"]) * 1024 / spanned if spanned else 0.0
    figures = {"sizes": rows, "rss_growth_per_fleet_kib": rss_per_fleet_kib}
    spec = largest["spec_change_to_statefulset_s"]
    met = (
        burst_met
        and largest["requests_per_min"] / largest["fleets"] < 0.05
        and spec["max"] < 1.0
        and largest["seconds_to_status_after_restart"] <= 60
    )
    table = "; ".join(
        f"{r['fleets']}: {burst_summary(r)}; idle {r['requests_per_min']:.0f} req/min,"
        f" {r['cpu_s_per_min']:.2f} CPU-s/min, {r['rss_mib']:.0f} MiB; every fleet passed"
        f" {r['seconds_to_status_after_restart']:.0f} s after a restart"
        for r in rows
    )
    return Result(
        name="operator_scale",
        title="The watching operator at 10 / 100 / 1,000 fleets (real control plane)",
        command="python -m benchmarks operator_scale",
        goal=GOAL,
        met=met,
        summary=f"{table}; spec change -> StatefulSet with {largest['fleets']} fleets: median"
        f" {statistics.median([spec['median']]):.3f} s, max {spec['max']:.3f} s; RSS +{rss_per_fleet_kib:.0f} KiB per"
        " fleet",
        figures=json.loads(json.dumps(figures)),
        note="pods stay Pending (no kubelet); requests counted exactly from the API server's audit log by the"
        " operator's User-Agent (while the fleets were created, until the operator had gone quiet; and over a 60 s"
        " idle window); each size in its own namespace with its own operator",
    )


if __name__ == "__main__":
    print(json.dumps(main().figures, indent=2))
