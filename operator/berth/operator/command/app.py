"""The operator's composition root: every adapter built (:func:`build_service`), Kopf's settings, a registry with
Berth's handlers, the leader election around them, and the run.

:func:`run_operator` is what ``berth-operator`` runs and what the Kopf-level tests run in a thread (with a stop
flag). The reconcile service (``reconcile``) gets its ports from here and imports no adapter itself, so what runs
in front of it (the watch cache behind the workload's observer and reads, the leader's gate before every write) is
decided here alone (docs/architecture.md). Rules:

- Kopf runs standalone (no peering objects: Kopf's peering freezes equal peers, it elects nobody), cluster-wide or
  in one namespace; in one namespace Kopf's resource and namespace scanning is off (a Role cannot grant it).
- Kopf's bookkeeping goes into ``berth.dev/...`` annotations, never into status, which is the operator's alone;
  the finalizer is ``berth.dev/finalizer``.
- The watch cache starts first and runs on standbys too (a takeover finds it warm); the election starts at once,
  beside the cache's first lists (a standby's wait for a silent leader runs from its first look at the Lease);
  Kopf, and with it every handler, the finalizer and every pass, starts only once this replica holds the Lease
  (``--leader-elect``) and the cache has its first lists (or waited ``CACHE_SYNC_WAIT_S`` for them).
  Every write, Kopf's included, passes the leader's gate, right before it is written, with how late the network may
  deliver it bounded (``gated_http``); a replica that loses the Lease calls ``on_lost`` (``berth-operator`` exits,
  and its restart waits as a standby).
- A stop (SIGTERM or SIGINT, which the operator handles itself, Kopf's handlers replaced by its own once Kopf has
  installed them; or the caller's stop flag) releases the Lease at once, before Kopf and the passes wind down: the
  gate closes first, so nothing they still do is written, and a standby takes over without waiting for the
  wind-down. After a stop signal the wind-down gets ``WIND_DOWN_S``, then the process exits anyway (the Lease is
  released and the gate refuses every write: a pass's flush holds nothing that could still be written); without
  leader election ``UNGATED_WIND_DOWN_S``, inside the chart's 30 s grace period (a stop cut short is a ``kill -9``
  a moment early, which loses nothing acknowledged; the kubelet would send that at 30 s). The allowance runs on a
  thread of its own, so a wind-down that blocks the event loop is cut short too, and the cut says where the event
  loop's thread was and which tasks were still running, each where it waited: a stop that hangs names its cause.
- Every client is created inside the operator's event loop and closed when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import kopf
import kubernetes

from berth.operator.adapters.advice_source import ADVICE_KEY, AdviceSource
from berth.operator.adapters.coordinators import Coordinators
from berth.operator.adapters.evidence_files import DirectoryJournal
from berth.operator.adapters.health import serving_health
from berth.operator.adapters.kube.api_session import ApiSession, new_session
from berth.operator.adapters.kube.calls import GatedApiClient
from berth.operator.adapters.kube.configmaps import ConfigMapReader, key_watch
from berth.operator.adapters.kube.events import FleetEvents
from berth.operator.adapters.kube.evidence_configmap import ConfigMapJournal
from berth.operator.adapters.kube.fleets import CachedFleets, FleetApi, FleetCache, FleetStatusWriter
from berth.operator.adapters.kube.group_records import LeaseGroupRecords
from berth.operator.adapters.kube.identity import KubeIdentity, load_identity
from berth.operator.adapters.kube.informer import Informer
from berth.operator.adapters.kube.observation import ApiWorkloadObserver
from berth.operator.adapters.kube.secrets import SecretReader
from berth.operator.adapters.kube.watch_cache import CachedWorkloadObserver, WatchCache
from berth.operator.adapters.kube.workload import StatefulSetWorkload
from berth.operator.adapters.leadership.gated import GatedCoordinators, gated_session
from berth.operator.adapters.leadership.leader import LeaderGate, holding_the_lease
from berth.operator.adapters.metrics import OperatorMetrics, serving
from berth.operator.command.cli import version
from berth.operator.command.options import OperatorOptions
from berth.operator.handlers.activities import register_activities
from berth.operator.handlers.fleets import register_fleet_handlers
from berth.operator.planners.lease import write_bound_s
from berth.operator.planners.pass_timing import PassTiming
from berth.operator.planners.roll_pacing import RollPacer
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.ports import CoordinatorDirectory, EvidenceJournal, WriteGate
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.reconcile.reconciler import WORKERS, FleetKey, FleetReconciler
from berth.operator.spec.fleet import Fleet
from berth.operator.spec.names import ANNOTATION_PREFIX, COMPONENT, FINALIZER

logger = logging.getLogger("berth.operator")

StopFlag = threading.Event
#: A change to an object a fleet owns pokes the fleet this much later, so a burst of changes is one pass.
CACHE_POKE_DELAY_S = 0.1
#: How long the operator waits for the watch cache's first lists before it serves fleets anyway (through the API).
CACHE_SYNC_WAIT_S = 10.0
#: berth-operator's exit status when it lost the leader's Lease (its restart waits as a standby).
EXIT_LOST_LEADERSHIP = 1
#: After a stop signal (the Lease released, the gate closed), how long the operator may take to wind down before the
#: process exits anyway.
WIND_DOWN_S = 5.0
#: Without leader election (nothing released, no gate): within the chart's terminationGracePeriodSeconds (30 s),
#: where Kopf itself would allow 10 minutes.
UNGATED_WIND_DOWN_S = 20.0
#: Threads (and pooled connections) for the official client's calls: each call holds one for its round trip, and
#: every pass running at once may be in one (asyncio's default, cores + 4, would queue them on a small machine).
API_THREADS = WORKERS + 8


class NoDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """No last-handled configuration: the operator has no create, update or resume handler (``handlers.fleets``
    filters watch events itself, ``planners.pokes``), so Kopf needs no record of what it handled, and storing one
    cost a patch of every new fleet (Kopf stores it even when no handler ran). Every fleet reads as handled as it
    is: Kopf sees no change to handle, and stores nothing."""

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return self.build(body=body)

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        # Nothing is compared, so nothing is copied (Kopf's own build deep-copies the whole object, status and
        # managedFields included, on every watch event).
        return kopf.BodyEssence()


def build_settings(options: OperatorOptions) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.scanning.disabled = options.namespace is not None
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = NoDiffBaseStorage(prefix=ANNOTATION_PREFIX)
    settings.posting.reporting_component = COMPONENT
    settings.posting.reporting_instance = os.environ.get("HOSTNAME") or COMPONENT
    settings.posting.event_name_prefix = "berth-"
    # Watches end server-side every few minutes and are restarted: a connection silently dropped by a load
    # balancer then costs minutes of blindness at most, not hours.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    return settings


def evidence_journal(options: OperatorOptions, api_client: kubernetes.client.ApiClient) -> EvidenceJournal | None:
    if options.evidence_configmap and options.operator_namespace:
        return ConfigMapJournal(api_client, options.operator_namespace, options.evidence_configmap)
    if options.evidence_dir is not None:
        return DirectoryJournal(options.evidence_dir)
    return None


class CaFile:
    """The CA file's text, read when asked (a mounted Secret or ConfigMap changes under a running operator); the last
    good text while a rotation leaves it unreadable for a moment."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._last: str | None = None

    def __call__(self) -> str | None:
        if self.path is None:
            return None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            self._last = self.path.read_text()
        return self._last


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


@dataclass
class OperatorService:
    """The reconcile service as the operator runs it: the pass context (every port built on one API client), the
    reconciler, the watch cache, and what must be closed when the operator stops."""

    context: PassContext
    reconciler: FleetReconciler
    coordinators: Coordinators
    metrics: OperatorMetrics
    advice: AdviceSource
    cache: WatchCache | None = None
    #: The advice ConfigMap's watch (with ``api`` and ``--advice-configmap``).
    advice_watch: Informer | None = None
    #: The fleets, watched once this replica leads (with ``api``): what the passes read them from.
    fleet_cache: FleetCache | None = None

    def start_watching(self) -> None:
        """The watches that poke fleets: the objects they own, and the advice that sizes them."""
        if self.cache is not None:
            self.cache.start()
        if self.advice_watch is not None:
            self.advice_watch.start()
        self.advice.start()

    async def start_leading(self) -> None:
        """The watch of the fleets, started once this replica leads (its first list is taken after the previous
        leader's last write), and waited for a moment (until it has listed, the passes read through the API)."""
        if self.fleet_cache is not None:
            self.fleet_cache.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.fleet_cache.wait_synced(), CACHE_SYNC_WAIT_S)

    async def close(self) -> None:
        await self.reconciler.close()
        if self.fleet_cache is not None:
            await self.fleet_cache.stop()
        if self.cache is not None:
            await self.cache.stop()
        if self.advice_watch is not None:
            await self.advice_watch.stop()
        await self.advice.stop()
        await self.coordinators.close()


def build_service(
    options: OperatorOptions,
    api_client: kubernetes.client.ApiClient,
    *,
    api: ApiSession | None = None,
    gate: WriteGate | None = None,
    metrics: OperatorMetrics | None = None,
) -> OperatorService:
    """Every adapter the service uses, built here and nowhere else (the operator's composition root). With ``api``,
    the objects fleets own are watched (``kube.watch_cache``) rather than read every pass; with ``gate``, every
    coordinator write passes it (Kubernetes writes pass it in ``api_client`` and ``api`` themselves)."""
    ca_file = options.coordinator_ca_file
    coordinators = Coordinators(
        token=options.admin_token,
        ca_file=str(ca_file) if ca_file else None,
        session_factory=gated_session(gate, write_bound(options)) if gate is not None else None,
    )
    directory: CoordinatorDirectory = GatedCoordinators(coordinators, gate) if gate is not None else coordinators
    interval = options.reconcile_interval_s
    advice = AdviceSource(
        read_config_map_key=ConfigMapReader(api_client).read_key if options.advice_configmap else None,
        config_map=(
            (options.operator_namespace, options.advice_configmap)
            if options.advice_configmap and options.operator_namespace
            else None
        ),
        file=options.advice_file,
        ttl_s=max(interval, 1.0),
        on_changed=lambda keys: reconciler.poke_advised(keys) if reconciler is not None else None,
    )
    advice_watch = (
        key_watch(api, advice.config_map[0], advice.config_map[1], ADVICE_KEY, advice.changed)
        if api is not None and advice.config_map is not None
        else None
    )

    fleet_cache = FleetCache(api, namespace=options.namespace) if api is not None else None
    fleet_api = FleetApi(api_client, fleet_cache)
    fleets = CachedFleets(fleet_api, fleet_cache)
    metrics = metrics or OperatorMetrics()
    reconciler: FleetReconciler | None = None

    def owned_object_changed(namespace: str, name: str, kind: str, moved: frozenset[str]) -> None:
        if reconciler is not None:
            reconciler.owned_changed(FleetKey(namespace, name), kind, moved, CACHE_POKE_DELAY_S)

    def turn_offered(keys: list[tuple[str, str]]) -> None:
        if reconciler is not None:
            for namespace, name in keys:
                reconciler.poke(FleetKey(namespace, name), CACHE_POKE_DELAY_S, "turn")

    # Rolls are paced where the StatefulSets are watched (the pacer counts rolls from the watch).
    rolls = (
        RollPacer(options.max_concurrent_rolls, on_offer=turn_offered, on_counts=metrics.rolls_counted)
        if api is not None
        else None
    )
    cache = (
        WatchCache(
            api,
            namespace=options.namespace,
            on_fleet_change=owned_object_changed,
            on_relist=metrics.listed,
            rolls=rolls,
        )
        if api is not None
        else None
    )

    def workload_for(fleet: Fleet) -> StatefulSetWorkload:
        observer = None
        if cache is not None:
            through_api = ApiWorkloadObserver(api_client, namespace=fleet.namespace, name=fleet.name)
            observer = CachedWorkloadObserver(cache, through_api, namespace=fleet.namespace, name=fleet.name)
        return StatefulSetWorkload(
            api_client, namespace=fleet.namespace, name=fleet.name, fleet_uid=fleet.uid, observer=observer, cache=cache
        )

    def status_for(body: Mapping[str, Any]) -> FleetStatusWriter:
        metadata = body.get("metadata") or {}
        return FleetStatusWriter(fleet_api, str(metadata.get("namespace") or "default"), str(metadata.get("name")))

    ports = Ports(
        status_for=status_for,
        secrets=SecretReader(api_client),
        workload_for=workload_for,
        events_for=FleetEvents,
        evidence=evidence_journal(options, api_client),
        coordinators=directory,
        advice=advice,
        now=utc_now,
        metrics=metrics,
        records=(
            LeaseGroupRecords(api_client, options.group_owners_namespace) if options.group_owners_namespace else None
        ),
        fleets=fleets,
        coordinator_ca=CaFile(ca_file),
        rolls=rolls,
    )
    bounds = OperatorSessionBounds(options.session_min_ms, options.session_max_ms)
    stuck = timedelta(seconds=options.stuck_terminating_s)
    stuck_group = timedelta(seconds=options.stuck_group_s)
    context = PassContext(ports, Settings(options.defaults, bounds, stuck, options.adoption, stuck_group))
    reconciler = FleetReconciler(
        context,
        fleets,
        timing=PassTiming(poll_s=poll_interval_s(options), interval_s=interval, resync_s=options.resync_interval_s),
        journal_source=coordinators.port if options.follow_journal else None,
    )
    return OperatorService(context, reconciler, coordinators, metrics, advice, cache, advice_watch, fleet_cache)


def write_bound(options: OperatorOptions) -> float | None:
    """How late the network may deliver a leader's write (``planners.lease.write_bound_s``); None without election."""
    election = options.leader_election
    return write_bound_s(election.timing) if election is not None else None


def poll_interval_s(options: OperatorOptions) -> float:
    """How often a converging pass or a deletion looks again while it waits on something quick."""
    return min(1.0, options.reconcile_interval_s)


def exit_on_lost_leadership() -> None:
    """What ``berth-operator`` does when it lost the Lease: exit at once (the gate is closed already), so that its
    restart waits as a standby from a clean state, as controller-runtime's managers do."""
    logger.error("exiting: another replica may be the leader now")
    logging.shutdown()
    os._exit(EXIT_LOST_LEADERSHIP)


def user_agent(options: OperatorOptions) -> str:
    """``berth-operator/<version> (<replica>)``: what the API server's audit log shows for every request."""
    election = options.leader_election
    replica = election.identity if election else os.environ.get("POD_NAME") or socket.gethostname()
    return f"{COMPONENT}/{version()} ({replica})"


async def run_operator(
    options: OperatorOptions,
    *,
    identity: KubeIdentity | None = None,
    stop_flag: StopFlag | None = None,
    ready_flag: StopFlag | None = None,
    on_lost: Callable[[], None] = exit_on_lost_leadership,
) -> None:
    identity = identity or load_identity()
    election = options.leader_election
    gate = LeaderGate() if election is not None else None
    agent = user_agent(options)
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(API_THREADS, thread_name_prefix="api"))
    identity.configuration.connection_pool_maxsize = API_THREADS
    bound = write_bound(options)
    api_client = GatedApiClient(identity.configuration, user_agent=agent, gate=gate, write_bound_s=bound)
    api = ApiSession(identity, user_agent=agent, gate=gate, write_bound_s=bound)
    api_client.send_on(api)  # the passes' calls on the event loop, not in threads
    metrics = OperatorMetrics()
    service = build_service(options, api_client, api=api, gate=gate, metrics=metrics)
    registry = kopf.OperatorRegistry()
    stopping = Stopping(wind_down_s=WIND_DOWN_S if election is not None else UNGATED_WIND_DOWN_S)
    stopping.handle_signals()
    if stop_flag is not None:
        stopping.follow(stop_flag)

    def kopf_session() -> kopf.AiohttpSession:
        session = new_session(identity, user_agent=agent, gate=gate, write_bound_s=bound)
        return kopf.AiohttpSession(server=api.server, aiohttp_session=session)

    register_activities(registry, kopf_session, service.reconciler.close)
    register_fleet_handlers(registry, service.reconciler, defaults=options.defaults, poll_s=poll_interval_s(options))
    try:
        async with serving(metrics, options.metrics_port), serving_health(options.liveness_port):
            service.start_watching()
            cache_synced = asyncio.get_running_loop().time() + CACHE_SYNC_WAIT_S
            async with contextlib.AsyncExitStack() as held:
                if election is None:
                    metrics.leading(True)
                else:
                    assert gate is not None
                    lease = holding_the_lease(
                        identity, election, gate, user_agent=agent, on_leading=metrics.leading, on_lost=on_lost,
                        stopping=stopping.event,
                    )  # fmt: skip
                    if not await held.enter_async_context(lease):
                        return
                if service.cache is not None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            service.cache.wait_synced(), max(0.0, cache_synced - asyncio.get_running_loop().time())
                        )
                await service.start_leading()
                await run_kopf(
                    stopping,
                    registry=registry,
                    settings=build_settings(options),
                    standalone=True,
                    clusterwide=options.namespace is None,
                    namespaces=[options.namespace] if options.namespace else [],
                    ready_flag=ready_flag,
                )
    finally:
        stopping.restore_signals()
        await service.close()
        await api.close()
        api_client.close()  # type: ignore[no-untyped-call]


class Stopping:
    """How the operator learns that it is to stop: SIGTERM or SIGINT (in the main thread), or the caller's stop flag.
    ``event`` is set then: Kopf stops on it and the leader releases its Lease on it. After a stop signal the wind-down
    gets ``wind_down_s`` (``WIND_DOWN_S`` with leader election: the Lease released, the gate closed), then the process
    exits."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, *, wind_down_s: float) -> None:
        self.event = asyncio.Event()
        self.wind_down_s = wind_down_s
        self._handled = False

    def handle_signals(self) -> None:
        """Stop on SIGTERM and SIGINT (only the main thread can handle signals; Kopf's tests run it in another)."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for number in self.SIGNALS:
            loop.add_signal_handler(number, self.signalled, number)
        self._handled = True

    def restore_signals(self) -> None:
        if self._handled:
            loop = asyncio.get_running_loop()
            for number in self.SIGNALS:
                loop.remove_signal_handler(number)
            self._handled = False

    def signalled(self, number: int) -> None:
        if self.event.is_set():
            return
        logger.info("%s received: stopping", signal.Signals(number).name)
        self.event.set()
        # A thread's timer, not the loop's: a wind-down that blocks the event loop itself is cut short too.
        timer = threading.Timer(
            self.wind_down_s, self.cut_short, args=(asyncio.get_running_loop(), threading.current_thread())
        )
        timer.daemon = True
        timer.start()

    def cut_short(self, loop: asyncio.AbstractEventLoop, loop_thread: threading.Thread) -> None:
        """Exit now (from the timer's thread), saying where the event loop's thread and each task still were."""
        running = [task for task in asyncio.all_tasks(loop) if not task.done()]
        logger.warning(
            "the operator did not wind down within %g s of the stop signal: exiting; the event loop's thread at %s;"
            " %d tasks still running: %s",
            self.wind_down_s,
            where_thread(loop_thread),
            len(running),
            "; ".join(sorted(where_waiting(task) for task in running)),
        )
        logging.shutdown()
        os._exit(0)

    def follow(self, stop_flag: StopFlag) -> None:
        """Set ``event`` once the caller's stop flag (set from another thread) is: a daemon thread waits for it."""
        loop = asyncio.get_running_loop()

        def wait() -> None:
            stop_flag.wait()
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(self.event.set)

        threading.Thread(target=wait, name="stop flag", daemon=True).start()


def where_waiting(task: asyncio.Task[Any]) -> str:
    """A task's name and where it waits: the innermost frame of its coroutine chain."""
    frames = task.get_stack()
    return f"{task.get_name()} at {_where(frames[-1])}" if frames else task.get_name()


def where_thread(thread: threading.Thread) -> str:
    """Where a thread runs now: its innermost frame (the event loop's thread: ``select`` when the loop is idle)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return _where(frame) if frame is not None else "(gone)"


def _where(frame: FrameType) -> str:
    """``file:line function``."""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} {frame.f_code.co_name}"


async def run_kopf(stopping: Stopping, **kwargs: Any) -> None:
    """``kopf.operator(...)`` (its ``spawn_tasks`` + ``run_tasks``), stopped by ``stopping.event``: Kopf installs its
    own SIGTERM and SIGINT handlers as it spawns its tasks, and the operator's are put back right after, so that a
    stop signal reaches the Lease's release as well as Kopf."""
    existing = {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}
    tasks = await kopf.spawn_tasks(stop_flag=stopping.event, **kwargs)
    stopping.handle_signals()
    await kopf.run_tasks(tasks, ignored=existing)
